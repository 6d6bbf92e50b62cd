//! What a task listing asks for.

use swarm_domain::{id::AgentId, task::TaskStatus, time::Timestamp};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Any of these statuses; empty means all.
    pub statuses: Vec<TaskStatus>,
    pub agent_id: Option<AgentId>,
    pub creator_agent_id: Option<AgentId>,
    pub offered_to: Option<AgentId>,
    pub source: Option<String>,
    pub task_type: Option<String>,
    /// Tasks carrying every one of these tags.
    pub tags: Vec<String>,
    /// Case-insensitive substring of the task text.
    pub search: Option<String>,
    /// Only tasks with `finished_at >= finished_since`.
    pub finished_since: Option<Timestamp>,
    /// Only tasks whose every `dependsOn` task is `completed`.
    pub ready_only: bool,
    /// Page size (the service bounds it) and offset; ordered newest first.
    pub limit: i64,
    pub offset: i64,
}

impl TaskFilter {
    /// Whether the filter asks for nothing but statuses (or for every task): then its
    /// total is a sum of the counts by status that each store keeps, not a count of rows.
    pub fn by_status_only(&self) -> bool {
        let TaskFilter {
            statuses: _,
            agent_id,
            creator_agent_id,
            offered_to,
            source,
            task_type,
            tags,
            search,
            finished_since,
            ready_only,
            limit: _,
            offset: _,
        } = self;
        agent_id.is_none()
            && creator_agent_id.is_none()
            && offered_to.is_none()
            && source.is_none()
            && task_type.is_none()
            && tags.is_empty()
            && search.is_none()
            && finished_since.is_none()
            && !ready_only
    }
}
