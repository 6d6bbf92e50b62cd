//! One module per resource; each exposes `router()` and the handlers are named
//! resource-then-verb (`tasks_create`).

pub mod agents;
pub mod budgets;
pub mod channels;
pub mod epics;
pub mod events;
pub mod gitlab_webhook;
pub mod inbox;
pub mod insight;
pub mod mail;
pub mod poll;
pub mod reference_events;
pub mod reference_runner;
pub mod services;
pub mod sessions;
pub mod steering;
pub mod system;
pub mod tasks;
pub mod tokens;
pub mod tracker_webhooks;
pub mod triggers;

use serde::Deserialize;

/// `?include=tasks,inbox`
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IncludeQuery {
    /// Comma-separated extras: `tasks` (agents), `inbox` (`/me`).
    pub include: Option<String>,
}

impl IncludeQuery {
    pub fn has(&self, what: &str) -> bool {
        crate::extract::split_list(self.include.as_deref()).iter().any(|part| part == what)
    }
}
