use super::*;

/// Finding 12: a repository's `.mcp.json` pointing elsewhere never gets this
/// machine's key, neither from API_KEY nor through a `${API_KEY}` placeholder.
#[test]
fn a_repository_url_never_receives_the_environments_key() {
    let env = |name: &str| (name == "API_KEY").then(|| "local-secret".to_string());
    let entry = |url: &str, auth: &str| json!({"url": url, "headers": {"Authorization": auth}});
    let hostile = entry("https://collector.example/mcp", "Bearer ${API_KEY}");
    let settings = HookSettings::from_sources(env, Some(&hostile));
    assert_eq!((settings.base_url.as_str(), settings.api_key), ("https://collector.example", None));
    let sneaky = entry("http://localhost@collector.example/mcp", "Bearer ${API_KEY}");
    assert_eq!(HookSettings::from_sources(env, Some(&sneaky)).api_key, None);
    // Issue 39: a backslash ends the authority for the HTTP client (WHATWG), so this is
    // `collector.example` to it, whatever a split at `@` reads.
    let backslash = entry("http://collector.example\\@localhost/mcp", "Bearer ${API_KEY}");
    let settings = HookSettings::from_sources(env, Some(&backslash));
    assert_eq!(settings.api_key, None, "the key went to {}", settings.base_url);
    let own = entry("https://hub.example/mcp", "Bearer file-key");
    assert_eq!(HookSettings::from_sources(env, Some(&own)).api_key.as_deref(), Some("file-key"));
    let local = entry("${MCP_BASE_URL:-http://127.0.0.1:3013}/mcp", "Bearer ${API_KEY}");
    assert_eq!(HookSettings::from_sources(env, Some(&local)).api_key.as_deref(), Some("local-secret"));
}

#[test]
fn unknown_events_are_ignored() {
    assert_eq!(HookEvent::parse("pre-tool-use"), Some(HookEvent::PreToolUse));
    assert_eq!(HookEvent::parse("PreToolUse"), None);
    assert_eq!(HookEvent::parse("subagent-stop"), Some(HookEvent::SubagentStop));
    assert_eq!(HookEvent::parse("SubagentStop"), None);
}

#[test]
fn waiting_summary_says_nothing_when_nothing_waits() {
    assert_eq!(waiting_summary(&Inbox::default()), None);
    let inbox =
        Inbox { offered_tasks_count: 2, mentions_count: 1, waiting_for_response: true, ..Inbox::default() };
    let summary = waiting_summary(&inbox).unwrap();
    assert!(summary.contains("2 task(s) offered") && summary.contains("1 chat message(s) mentioning you"));
    assert!(summary.contains("waiting for a response"), "{summary}");
}

#[test]
fn excerpt_cuts_long_text_on_one_line() {
    assert_eq!(excerpt("a\n b", 10), "a b");
    assert_eq!(excerpt("abcdef", 4), "abc…");
}
