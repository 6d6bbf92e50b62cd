//! Codex's `config.toml`: the `[mcp_servers.agent-swarm]` table.
//!
//! Format (https://developers.openai.com/codex/mcp, and codex-rs's MCP client): a
//! Streamable HTTP server has `url`; `bearer_token_env_var` names the variable holding
//! the token sent as `Authorization: Bearer` (Codex fails the server when that variable
//! is unset or empty, so we name it only when a key is in use); `http_headers` are
//! literal headers and `env_http_headers` map a header to a variable, skipped when the
//! variable is unset or empty and applied after `http_headers`, so the variable wins.
//! Codex has no `${VAR}` expansion. It reads `$CODEX_HOME/config.toml` (default
//! `~/.codex/config.toml`), and a project's `.codex/config.toml` only when the project
//! is trusted.
//!
//! The file is edited with `toml_edit`, which keeps the user's comments, order and
//! layout; only our table's keys are set, and only when their value differs.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use toml_edit::{DocumentMut, InlineTable, Item, Table, value};

use super::{Endpoint, FileChange, Plan, SERVER_NAME, read_optional};

/// `poll-task` may hold a call for up to 60 s, Codex's default tool timeout.
const TOOL_TIMEOUT_SECONDS: i64 = 90;

/// Keys of a stdio server: a table of that name written for `swarm mcp` before
/// would make Codex refuse the mix of `command` and `url`.
const STDIO_KEYS: [&str; 5] = ["command", "args", "env", "env_vars", "cwd"];

/// `$CODEX_HOME/config.toml`, else `~/.codex/config.toml`.
pub(super) fn default_config_path() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("CODEX_HOME").filter(|home| !home.is_empty()) {
        return Ok(PathBuf::from(home).join("config.toml"));
    }
    let Some(home) = std::env::var_os("HOME").filter(|home| !home.is_empty()) else {
        bail!("cannot find Codex's config.toml: HOME and CODEX_HOME are unset; pass --codex-config PATH");
    };
    Ok(PathBuf::from(home).join(".codex").join("config.toml"))
}

pub(super) fn plan(path: &Path, endpoint: &Endpoint) -> anyhow::Result<Plan> {
    let before = read_optional(path)?;
    let mut document: DocumentMut = before.as_deref().unwrap_or_default().parse().with_context(|| {
        format!(
            "cannot read {} as TOML: fix it, or pass --codex-config to write elsewhere (nothing was written)",
            path.display()
        )
    })?;
    let servers = table_entry(document.as_table_mut(), "mcp_servers", path)?;
    // `[mcp_servers.agent-swarm]` alone, not an empty `[mcp_servers]` header above it.
    servers.set_implicit(true);
    let server = table_entry(servers, SERVER_NAME, path)?;
    set_server(server, endpoint);
    let url = format!("{}/mcp", endpoint.base_url);
    let after = document.to_string();
    Ok(Plan {
        changes: vec![FileChange::new(
            path.to_path_buf(),
            before,
            after,
            format!("Codex MCP server {SERVER_NAME} at {url}"),
        )],
        notes: Vec::new(),
    })
}

fn set_server(server: &mut Table, endpoint: &Endpoint) {
    for key in STDIO_KEYS {
        server.remove(key);
    }
    set_str(server, "url", &format!("{}/mcp", endpoint.base_url));
    let mut literal_headers: Vec<(&str, String)> = Vec::new();
    match (&endpoint.embedded_api_key, endpoint.api_key_in_use) {
        (Some(key), _) => {
            server.remove("bearer_token_env_var");
            literal_headers.push(("Authorization", format!("Bearer {key}")));
        }
        (None, true) => set_str(server, "bearer_token_env_var", "API_KEY"),
        (None, false) => {
            server.remove("bearer_token_env_var");
        }
    }
    if let Some(agent_id) = endpoint.agent_id {
        literal_headers.push(("X-Agent-ID", agent_id.to_string()));
    }
    set_headers(server, "http_headers", &literal_headers);
    // X-Task-ID: the trigger session a runner's run continues (tasks it creates are
    // awaited by it); Codex leaves the header out when the variable is unset.
    set_headers(
        server,
        "env_http_headers",
        &[("X-Agent-ID", "AGENT_ID".to_string()), ("X-Task-ID", "SWARM_SESSION_TASK_ID".to_string())],
    );
    if !server.contains_key("tool_timeout_sec") {
        server.insert("tool_timeout_sec", value(TOOL_TIMEOUT_SECONDS));
    }
}

/// Set a string unless it already has that value, so its formatting stays.
fn set_str(table: &mut Table, key: &str, text: &str) {
    if table.get(key).and_then(Item::as_str) != Some(text) {
        table.insert(key, value(text));
    }
}

/// Make `table[key]` an inline table holding exactly `headers`, left as it is when it
/// already does; removed when there are none.
fn set_headers(table: &mut Table, key: &str, headers: &[(&str, String)]) {
    let current: Option<Vec<(String, String)>> =
        table.get(key).and_then(Item::as_table_like).map(|existing| {
            existing
                .iter()
                .map(|(name, item)| (name.to_string(), item.as_str().unwrap_or_default().to_string()))
                .collect()
        });
    let wanted: Vec<(String, String)> =
        headers.iter().map(|(name, text)| (name.to_string(), text.clone())).collect();
    let same = current.as_ref().is_some_and(|current| {
        current.len() == wanted.len() && wanted.iter().all(|pair| current.contains(pair))
    });
    if same {
        return;
    }
    if headers.is_empty() {
        table.remove(key);
        return;
    }
    let mut inline = InlineTable::new();
    for (name, text) in headers {
        inline.insert(*name, text.as_str().into());
    }
    table.insert(key, value(inline));
}

fn table_entry<'a>(table: &'a mut Table, key: &str, path: &Path) -> anyhow::Result<&'a mut Table> {
    let item = table.entry(key).or_insert_with(|| Item::Table(Table::new()));
    if let Some(inline) = item.as_inline_table() {
        // `mcp_servers = { ... }` written inline: turn it into a table to add to it.
        *item = Item::Table(inline.clone().into_table());
    }
    match item.as_table_mut() {
        Some(table) => Ok(table),
        None => bail!(
            "`{key}` in {} is not a TOML table: fix it, then re-run (nothing was written)",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(api_key_in_use: bool, agent: Option<&str>) -> Endpoint {
        Endpoint {
            base_url: "http://hub:3013".into(),
            embedded_api_key: None,
            api_key_in_use,
            agent_id: agent.map(|id| swarm_domain::id::AgentId::parse(id).unwrap()),
            agent_token: None,
        }
    }

    fn apply(text: &str, endpoint: &Endpoint) -> String {
        let mut document: DocumentMut = text.parse().unwrap();
        let servers = table_entry(document.as_table_mut(), "mcp_servers", Path::new("x")).unwrap();
        servers.set_implicit(true);
        set_server(table_entry(servers, SERVER_NAME, Path::new("x")).unwrap(), endpoint);
        document.to_string()
    }

    #[test]
    fn keeps_the_rest_of_the_file_and_is_stable() {
        let original = "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"other\"\n";
        let agent = "0195f0a1-0000-7000-8000-000000000001";
        let once = apply(original, &endpoint(true, Some(agent)));
        assert!(once.starts_with(original), "{once}");
        assert!(!once.contains("[mcp_servers]\n"), "no empty parent header: {once}");
        let parsed: DocumentMut = once.parse().unwrap();
        let server = &parsed["mcp_servers"]["agent-swarm"];
        assert_eq!(server["url"].as_str(), Some("http://hub:3013/mcp"));
        assert_eq!(server["bearer_token_env_var"].as_str(), Some("API_KEY"));
        assert_eq!(server["http_headers"]["X-Agent-ID"].as_str(), Some(agent));
        assert_eq!(server["env_http_headers"]["X-Agent-ID"].as_str(), Some("AGENT_ID"));
        assert_eq!(apply(&once, &endpoint(true, Some(agent))), once, "a second run changes nothing");
        let without = apply(&once, &endpoint(false, None));
        let parsed: DocumentMut = without.parse().unwrap();
        assert!(parsed["mcp_servers"]["agent-swarm"].get("bearer_token_env_var").is_none());
        assert!(parsed["mcp_servers"]["agent-swarm"].get("http_headers").is_none());
    }

    #[test]
    fn replaces_a_stdio_server_of_the_same_name() {
        let original =
            "[mcp_servers.agent-swarm]\ncommand = \"swarm\"\nargs = [\"mcp\"]\ntool_timeout_sec = 300\n";
        let updated = apply(original, &endpoint(false, None));
        let parsed: DocumentMut = updated.parse().unwrap();
        let server = &parsed["mcp_servers"]["agent-swarm"];
        assert!(server.get("command").is_none() && server.get("args").is_none(), "{updated}");
        assert_eq!(server["tool_timeout_sec"].as_integer(), Some(300), "the user's timeout stays");
    }
}
