//! The reference's view of a schedule (`GET /api/scheduled-tasks`), read from the timed
//! triggers (`cron`, `interval`, `once`): no table of its own, one mapping here.

use serde::Serialize;

use super::{TriggerDef, TriggerTarget, TriggerType};
use crate::{
    id::{AgentId, TriggerId},
    time::Timestamp,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledTask {
    pub id: TriggerId,
    pub name: String,
    pub description: Option<String>,
    pub cron_expression: Option<String>,
    pub interval_ms: Option<i64>,
    /// When a one-off schedule (ours: a `once` trigger) fires.
    pub run_at: Option<Timestamp>,
    pub task_template: String,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub priority: i32,
    /// The agent its tasks go to; `None` for the pool or the lead (see `target`).
    pub target_agent_id: Option<AgentId>,
    /// Ours: `pool`, `lead`, or the agent's id.
    pub target: TriggerTarget,
    pub enabled: bool,
    pub last_run_at: Option<Timestamp>,
    pub next_run_at: Option<Timestamp>,
    pub created_by_agent_id: Option<AgentId>,
    pub timezone: String,
    pub created_at: Timestamp,
    pub last_updated_at: Timestamp,
    /// Ours: `cron`, `interval` or `once`.
    pub schedule_type: TriggerType,
    /// Ours: how many times it fired.
    pub run_count: i64,
}

impl ScheduledTask {
    /// The schedule a timed trigger is; `None` for the other types.
    pub fn from_trigger(trigger: &TriggerDef) -> Option<ScheduledTask> {
        if !trigger.kind.is_timed() {
            return None;
        }
        Some(ScheduledTask {
            id: trigger.id,
            name: trigger.name.clone(),
            description: trigger.description.clone(),
            cron_expression: trigger.schedule.clone().filter(|_| trigger.kind == TriggerType::Cron),
            interval_ms: trigger.interval_ms,
            run_at: trigger.run_at,
            task_template: trigger.prompt.clone(),
            task_type: trigger.task_type.clone(),
            tags: trigger.tags.clone(),
            priority: trigger.priority,
            target_agent_id: match trigger.target {
                TriggerTarget::Agent(id) => Some(id),
                TriggerTarget::Pool | TriggerTarget::Lead => None,
            },
            target: trigger.target,
            enabled: trigger.enabled,
            last_run_at: trigger.last_run_at,
            next_run_at: trigger.next_run_at,
            created_by_agent_id: trigger.created_by,
            timezone: trigger.timezone.clone(),
            created_at: trigger.created_at,
            last_updated_at: trigger.updated_at,
            schedule_type: trigger.kind,
            run_count: trigger.run_count,
        })
    }
}
