//! Where a hub on this machine leaves its generated API key for the user's own `swarm`
//! commands (runners, `swarm connect`, the client commands).
//!
//! `swarm serve` started without `API_KEY` generates a key and keeps it in its data
//! directory. Local commands do not know that directory, only the hub's URL, so the hub
//! also writes the key to a per-user file named by its port; a command aimed at a
//! loopback URL with no key of its own reads it from there. Both files are readable by
//! their owner only. A hub on another machine is out of reach of this file, as it should
//! be: its key is handed over explicitly.

use std::path::PathBuf;

/// `$XDG_CONFIG_HOME/swarm/keys`, else `$HOME/.config/swarm/keys`.
pub fn keys_dir() -> Option<PathBuf> {
    let from = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let config = from("XDG_CONFIG_HOME").or_else(|| from("HOME").map(|home| home.join(".config")))?;
    Some(config.join("swarm").join("keys"))
}

/// The per-user key file of the local hub on `port`.
pub fn key_file_for_port(port: u16) -> Option<PathBuf> {
    keys_dir().map(|dir| dir.join(format!("localhost-{port}.key")))
}

/// Whether a URL's host names this machine: only then is the per-user key file used.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The key in a key file: its first line, trimmed; `None` when that is empty.
pub fn parse_key_file(text: &str) -> Option<String> {
    let key = text.lines().next().unwrap_or_default().trim();
    (!key.is_empty()).then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_this_machine() {
        for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "0.0.0.0", "localhost.example.com", ""] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn a_key_file_holds_one_key() {
        assert_eq!(parse_key_file("swk_abc\n").as_deref(), Some("swk_abc"));
        assert_eq!(parse_key_file("  swk_abc  \nrest"), Some("swk_abc".to_string()));
        assert_eq!(parse_key_file("\n"), None);
        assert_eq!(parse_key_file(""), None);
    }
}
