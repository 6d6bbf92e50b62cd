//! The reference's `GET /api/scheduled-tasks`: the timed triggers seen as schedules.

use swarm_domain::trigger::{ScheduledTask, TriggerType};

use crate::{Service, ServiceResult};

const TIMED: [TriggerType; 3] = [TriggerType::Cron, TriggerType::Interval, TriggerType::Once];

impl Service {
    /// Timed triggers by name, those `enabled` is, whose name contains `name`.
    pub async fn scheduled_tasks(
        &self,
        enabled: Option<bool>,
        name: Option<&str>,
    ) -> ServiceResult<Vec<ScheduledTask>> {
        let name = name.map(str::trim).filter(|name| !name.is_empty());
        let triggers = self.trigger_list(&TIMED).await?;
        Ok(triggers
            .iter()
            .filter(|trigger| enabled.is_none_or(|enabled| trigger.enabled == enabled))
            .filter(|trigger| name.is_none_or(|name| trigger.name.contains(name)))
            .filter_map(ScheduledTask::from_trigger)
            .collect())
    }
}
