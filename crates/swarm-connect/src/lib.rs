//! Setting a project up for an agent CLI, and answering the CLI's hook events.
//!
//! [`connect`] writes what Claude Code or Codex reads to reach a hub (the MCP server
//! entry, slash commands, Claude Code's hooks); [`hook`] is what those hooks run
//! (`swarm hook <event>`): mail delivery on resume, progress traces, help alerts.
//! Both speak to the hub only through `swarm-client`.

pub mod connect;
pub mod hook;
