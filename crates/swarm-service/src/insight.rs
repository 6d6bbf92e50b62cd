//! The dashboard's control room (issue 49): a task found by the end of its id as a person
//! typed it, and what the crew spent per agent, epic and day.

use swarm_domain::{
    costs::{CostSummary, cost_days},
    id::{IdSuffix, TaskId},
};

use crate::{Service, ServiceError, ServiceResult};

/// How many tasks an ambiguous id names at most in its error.
const CANDIDATES_SHOWN: i64 = 10;

impl Service {
    /// The task a person means by `text`: a whole id, or the end of one (as lists show
    /// it) that exactly one task's id ends with.
    pub async fn task_resolve(&self, text: &str) -> ServiceResult<TaskId> {
        if let Ok(id) = TaskId::parse(text) {
            return Ok(id);
        }
        let suffix = IdSuffix::parse(text)?;
        let found = self.store.task_ids_ending_with(suffix.as_str(), CANDIDATES_SHOWN + 1).await?;
        match found.as_slice() {
            [] => Err(ServiceError::NotFound(format!(
                "no task id ends with {:?}; see the ids with `swarm task list`",
                suffix.as_str()
            ))),
            [id] => Ok(*id),
            several => {
                let shown: Vec<String> =
                    several.iter().take(CANDIDATES_SHOWN as usize).map(ToString::to_string).collect();
                let more = if several.len() as i64 > CANDIDATES_SHOWN { ", …" } else { "" };
                Err(ServiceError::Conflict(format!(
                    "{} task ids end with {:?}: {}{more}; give more of the id",
                    if more.is_empty() { several.len().to_string() } else { "more than 10".to_string() },
                    suffix.as_str(),
                    shown.join(", ")
                )))
            }
        }
    }

    /// The session costs of the last 7 UTC days (today included), per agent, per epic
    /// and per day.
    pub async fn cost_summary(&self) -> ServiceResult<CostSummary> {
        let mut days = Vec::new();
        for day in cost_days(self.clock.now()) {
            let totals = self.store.cost_totals(day.start, day.end).await?;
            days.push((day, totals));
        }
        Ok(CostSummary::from_days(&days))
    }
}
