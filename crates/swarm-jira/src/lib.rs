//! Jira Cloud for `swarm serve`: `POST /api/trackers/jira/webhook/<JIRA_WEBHOOK_TOKEN>`
//! turns issues assigned to the bot or labelled for the swarm into tasks; the tracker
//! reporter comments (ADF) and transitions the issue through Jira's REST API v3 when
//! the task ends.
//!
//! Architecture invariant: an adapter. It changes state only through `swarm_service`;
//! deduplication and "reported once" are database marks.

pub mod adf;
pub mod client;
pub mod webhook;
