//! Linear for `swarm serve`: `POST /api/trackers/linear/webhook`, signed with
//! `LINEAR_SIGNING_SECRET`, turns issues labelled (or assigned) for the swarm into tasks
//! and comments that mention the bot into steering or follow-ups; the tracker reporter
//! moves the workflow state and comments through Linear's GraphQL API.
//!
//! Architecture invariant: an adapter. It changes state only through `swarm_service`;
//! deduplication and "reported once" are database marks.

pub mod client;
mod text;
pub mod webhook;
