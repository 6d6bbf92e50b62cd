//! Jira Cloud for `swarm serve`.
