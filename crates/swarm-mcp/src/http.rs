//! MCP over Streamable HTTP, for `swarm serve` to mount at `/mcp`.
//!
//! Stateless: no transport session is kept (rmcp's legacy session mode is off), every
//! reply is plain JSON when the tool sends nothing before its result, and the caller is
//! read from each request's `X-Agent-ID`. So any replica answers any request. Clients of
//! the 2025 revisions (`initialize` first) and of the 2026-07-28 stateless revision
//! (`server/discover`, per-request metadata) share the one endpoint.

use std::sync::Arc;

use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::never::NeverSessionManager,
};
use swarm_service::Service;
use tokio_util::sync::CancellationToken;

use crate::{context::Identity, registry::Registry, server::McpServer, tools};

/// The tower service that answers `/mcp`.
pub type McpHttpService = StreamableHttpService<McpServer, NeverSessionManager>;

/// Which `Host` headers `/mcp` answers. rmcp refuses others with 403, which protects
/// a hub on loopback from DNS rebinding; a hub reached by name must list that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    Any,
    /// Host names or `host:port` authorities.
    Only(Vec<String>),
}

impl AllowedHosts {
    pub fn loopback() -> Self {
        AllowedHosts::Only(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])
    }

    /// A comma-separated list; `*` allows any host.
    pub fn parse(list: &str) -> Self {
        let hosts: Vec<String> =
            list.split(',').map(str::trim).filter(|host| !host.is_empty()).map(str::to_string).collect();
        if hosts.iter().any(|host| host == "*") { AllowedHosts::Any } else { AllowedHosts::Only(hosts) }
    }
}

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub allowed_hosts: AllowedHosts,
    /// Cancelled on shutdown: requests in flight (a waiting `poll-task`) end at once.
    pub shutdown: CancellationToken,
}

pub fn http_service(service: Service, options: HttpOptions) -> McpHttpService {
    let registry = Arc::new(Registry::new(tools::hub_groups()));
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_cancellation_token(options.shutdown);
    let config = match options.allowed_hosts {
        AllowedHosts::Any => config.disable_allowed_hosts(),
        AllowedHosts::Only(hosts) => config.with_allowed_hosts(hosts),
    };
    StreamableHttpService::new(
        move || Ok(McpServer::new(service.clone(), Identity::Header, Arc::clone(&registry))),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_hosts_parse() {
        assert_eq!(AllowedHosts::parse("*"), AllowedHosts::Any);
        assert_eq!(
            AllowedHosts::parse("localhost, hub.example:3013,"),
            AllowedHosts::Only(vec!["localhost".into(), "hub.example:3013".into()])
        );
    }
}
