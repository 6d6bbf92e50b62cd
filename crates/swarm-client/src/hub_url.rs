//! Where a URL really points, read by the same parser the HTTP client sends with
//! (`reqwest::Url`, WHATWG): a check that splits the text by hand reads
//! `http://attacker\@localhost/` as `localhost` while the client connects to `attacker`.

/// Whether `url` names this machine (a loopback host) in a form with no room for two
/// readings: no user or password part and no backslash anywhere, which some parsers
/// take as a path separator and others as text.
pub fn is_plain_loopback_url(url: &str) -> bool {
    let url = url.trim();
    if url.contains('\\') {
        return false;
    }
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return false;
    }
    if !matches!(parsed.scheme(), "http" | "https") {
        return false;
    }
    // The parser's own host (IPv4 forms normalised, IPv6 in brackets).
    parsed.host_str().is_some_and(swarm_domain::local_key::is_loopback_host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_loopback_urls_are_this_machine() {
        for url in
            ["http://localhost:3013", "http://127.0.0.1:3013/mcp", "http://[::1]:3013", "https://LOCALHOST/"]
        {
            assert!(is_plain_loopback_url(url), "{url}");
        }
        for url in [
            // The attack of issue 39: WHATWG ends the authority at `\`, so the client
            // connects to `attacker` while a hand split saw `localhost`.
            "http://attacker\\@localhost/mcp",
            "http://localhost\\@attacker/mcp",
            "http://localhost@attacker.example/mcp",
            "http://user:pass@localhost/mcp",
            "http://attacker.example/mcp",
            "http://localhost.attacker.example/",
            "file:///etc/passwd",
            "not a url",
            "",
        ] {
            assert!(!is_plain_loopback_url(url), "{url}");
        }
    }
}
