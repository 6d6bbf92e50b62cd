//! The event log (`GET /api/logs`): an append-only history of what happened.

use serde::{Deserialize, Serialize};

use crate::{
    id::{AgentId, EventId, TaskId},
    time::Timestamp,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    AgentJoined,
    AgentStatusChange,
    AgentLeft,
    TaskCreated,
    TaskStatusChange,
    TaskProgress,
    TaskEdited,
    TaskOffered,
    TaskAccepted,
    TaskRejected,
    TaskClaimed,
    TaskReleased,
    TaskLeaseExpired,
    ChannelMessage,
    /// Ours: why an agent stopped taking work was set or cleared (`statusReason`).
    AgentStatusReason,
    /// Ours: a task was taken from an agent that is gone, by the rescuer or an operator.
    TaskHandedBack,
    /// Ours: a task joined an epic or left it (old → new epic id).
    TaskEpicChanged,
    /// The reference's: an agent registered a service, or registered it again.
    ServiceRegistered,
    ServiceUnregistered,
    /// A service's status changed (old → new).
    ServiceStatusChange,
    /// Ours: a daily budget was set (old → new ceiling in USD; `metadata.scope`).
    BudgetSet,
    /// Ours: a daily budget was removed (its ceiling as the old value).
    BudgetRemoved,
}

impl EventType {
    pub const ALL: [EventType; 22] = [
        EventType::AgentJoined,
        EventType::AgentStatusChange,
        EventType::AgentLeft,
        EventType::TaskCreated,
        EventType::TaskStatusChange,
        EventType::TaskProgress,
        EventType::TaskEdited,
        EventType::TaskOffered,
        EventType::TaskAccepted,
        EventType::TaskRejected,
        EventType::TaskClaimed,
        EventType::TaskReleased,
        EventType::TaskLeaseExpired,
        EventType::ChannelMessage,
        EventType::AgentStatusReason,
        EventType::TaskHandedBack,
        EventType::TaskEpicChanged,
        EventType::ServiceRegistered,
        EventType::ServiceUnregistered,
        EventType::ServiceStatusChange,
        EventType::BudgetSet,
        EventType::BudgetRemoved,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            EventType::AgentJoined => "agent_joined",
            EventType::AgentStatusChange => "agent_status_change",
            EventType::AgentLeft => "agent_left",
            EventType::TaskCreated => "task_created",
            EventType::TaskStatusChange => "task_status_change",
            EventType::TaskProgress => "task_progress",
            EventType::TaskEdited => "task_edited",
            EventType::TaskOffered => "task_offered",
            EventType::TaskAccepted => "task_accepted",
            EventType::TaskRejected => "task_rejected",
            EventType::TaskClaimed => "task_claimed",
            EventType::TaskReleased => "task_released",
            EventType::TaskLeaseExpired => "task_lease_expired",
            EventType::ChannelMessage => "channel_message",
            EventType::AgentStatusReason => "agent_status_reason",
            EventType::TaskHandedBack => "task_handed_back",
            EventType::TaskEpicChanged => "task_epic_changed",
            EventType::ServiceRegistered => "service_registered",
            EventType::ServiceUnregistered => "service_unregistered",
            EventType::ServiceStatusChange => "service_status_change",
            EventType::BudgetSet => "budget_set",
            EventType::BudgetRemoved => "budget_removed",
        }
    }

    /// Unknown names read back from a newer database are kept as the closest generic kind
    /// rather than failing the whole read.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub id: EventId,
    pub event_type: EventType,
    pub agent_id: Option<AgentId>,
    pub task_id: Option<TaskId>,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub created_at: Timestamp,
}

/// An event to append; stores give it an id and write it in the same transaction as
/// the change it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub event_type: EventType,
    pub agent_id: Option<AgentId>,
    pub task_id: Option<TaskId>,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
    pub metadata: Option<serde_json::Value>,
}

impl NewEvent {
    /// The common shape of a logged change: who, about which task, old → new.
    pub fn change(
        event_type: EventType,
        agent_id: Option<AgentId>,
        task_id: Option<TaskId>,
        old_value: Option<&str>,
        new_value: Option<&str>,
    ) -> Self {
        NewEvent {
            event_type,
            agent_id,
            task_id,
            old_value: old_value.map(str::to_string),
            new_value: new_value.map(str::to_string),
            metadata: None,
        }
    }
}
