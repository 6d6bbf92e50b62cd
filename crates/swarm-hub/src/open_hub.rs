//! A hub without a key (`--insecure-no-auth`) answers only requests addressed to it by a
//! name it was told about, the same list MCP at `/mcp` keeps (loopback, the bound
//! address, `--mcp-allowed-hosts`), or by an IP address. A web page on a domain that
//! an attacker points at 127.0.0.1 (DNS rebinding) is same-origin with the hub in the
//! browser's eyes, so no CORS rule stops it: its requests carry the attacker's name in
//! `Host`, and that is refused here. An IP address in `Host` cannot be a rebound name.

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::{StatusCode, header, uri::Authority},
    middleware::Next,
    response::{IntoResponse, Response},
};

/// Host names (`name` or `name:port`) a keyless hub answers besides IP addresses.
#[derive(Debug, Clone)]
pub(crate) struct KnownHosts(Arc<Vec<String>>);

impl KnownHosts {
    pub(crate) fn new(hosts: Vec<String>) -> Self {
        KnownHosts(Arc::new(hosts))
    }

    /// Whether a request with this `Host` is addressed to the hub.
    fn admits(&self, host: &str) -> bool {
        let Ok(authority) = Authority::try_from(host.trim()) else {
            return false;
        };
        let name = normalize(authority.host());
        if name.parse::<std::net::IpAddr>().is_ok() {
            return true;
        }
        self.0.iter().any(|allowed| {
            let (allowed_name, allowed_port) = match Authority::try_from(allowed.trim()) {
                Ok(allowed) => (normalize(allowed.host()), allowed.port_u16()),
                Err(_) => (normalize(allowed), None),
            };
            allowed_name == name && allowed_port.is_none_or(|port| authority.port_u16() == Some(port))
        })
    }
}

fn normalize(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

pub(crate) async fn check_host(State(known): State<KnownHosts>, request: Request, next: Next) -> Response {
    // A request without `Host` is not a browser's (every browser sends one).
    let host = request.headers().get(header::HOST).map(|value| value.to_str().unwrap_or("?").to_string());
    match host {
        Some(host) if !known.admits(&host) => {
            let message = format!(
                "this hub has no key (--insecure-no-auth), so it answers requests addressed to \
                 localhost, its IP addresses or a name it was told about, not to host {host:?} (a guard \
                 against DNS rebinding): list the name in --mcp-allowed-hosts (env MCP_ALLOWED_HOSTS), \
                 or give the hub a key (drop --insecure-no-auth)"
            );
            let body = serde_json::json!({ "error": message });
            (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
        }
        _ => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyless_hub_knows_loopback_ip_addresses_and_listed_names_only() {
        let known = KnownHosts::new(vec!["localhost".into(), "::1".into(), "hub.lan:3013".into()]);
        for host in
            ["localhost", "LOCALHOST:3013", "127.0.0.1:3013", "[::1]:80", "10.0.0.7:3013", "hub.lan:3013"]
        {
            assert!(known.admits(host), "{host}");
        }
        for host in ["evil.example", "evil.example:3013", "localhost.evil.example", "hub.lan:80", "", "a b"] {
            assert!(!known.admits(host), "{host}");
        }
    }
}
