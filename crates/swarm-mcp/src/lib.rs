//! The MCP adapter of swarm: the reference's tools (names and inputs kept, docs/mcp.md) served with the
//! official Rust SDK (rmcp) over Streamable HTTP (`swarm serve`, at `/mcp`) and over
//! stdio (`swarm mcp`).
//!
//! Each tool is a thin adapter over the service function its REST twin calls. Tools
//! live in groups (`tools/`), each tool with an audience (anyone, agents, lead only,
//! worker only); `tools/list` shows a caller the tools of its role, and a call outside
//! its audience is answered `success: false` with the reason.
//!
//! Architecture invariant: no permission rule and no state lives here. Who may do
//! what is decided by `swarm_service`; the caller is named by each request.

mod context;
mod http;
mod prompts;
mod registry;
mod reply;
mod resources;
mod server;
mod stdio;
mod subscriptions;
mod tasks_ext;
mod tools;

pub use context::AGENT_ID_HEADER;
pub use http::{AllowedHosts, HttpOptions, McpHttpService, http_service};
pub use registry::{CAPABILITIES, Capability};
pub use server::McpServer;
pub use stdio::{StdioOptions, serve_stdio};
pub use tools::InboxRole;
