//! Claude Code's files: `.mcp.json`, `.claude/commands/*.md`, `.claude/settings.json`.
//!
//! Formats, as documented by Anthropic:
//! - `.mcp.json`: `{"mcpServers": {"<name>": {"type": "http", "url", "headers"}}}`, with
//!   `${VAR}` and `${VAR:-default}` expanded in `url` and `headers` when Claude Code
//!   starts (https://code.claude.com/docs/en/mcp, "Environment variable expansion in
//!   .mcp.json"). The docs say a `${VAR}` without default whose variable is unset makes
//!   the config fail to parse, so every placeholder we write has a default.
//! - hooks: `{"hooks": {"<Event>": [{"matcher": "*", "hooks": [{"type": "command",
//!   "command": "...", "timeout": <seconds>}]}]}}`; `matcher` only for tool events
//!   (https://code.claude.com/docs/en/hooks).
//! - status line: `{"statusLine": {"type": "command", "command": "..."}}`
//!   (https://code.claude.com/docs/en/statusline).
//! - slash commands: `.claude/commands/<name>.md`, front matter `description` and
//!   `argument-hint`, `$ARGUMENTS` replaced by what follows the command
//!   (https://code.claude.com/docs/en/slash-commands).
//! - `enabledMcpjsonServers` approves a project server, and `permissions.allow`
//!   `mcp__<server>__*` allows its tools without asking (https://code.claude.com/docs/en/settings).
//!
//! serde_json here keeps object keys sorted (the workspace does not enable its
//! `preserve_order` feature, which would change every JSON map in the hub), so a
//! file we rewrite has its keys in alphabetical order. We only rewrite a file whose
//! values change.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use super::{Endpoint, FileChange, Plan, SERVER_NAME, read_optional};

/// The most a hook may take before Claude Code gives up on it. Ours answer within
/// about two seconds even when the hub is down; this bounds a wedged machine.
const HOOK_TIMEOUT_SECONDS: u64 = 10;

/// The hook events we install, the `swarm hook` argument for each, and the matcher
/// (tool events only: `*` is every tool).
const HOOKS: [(&str, &str, Option<&str>); 6] = [
    ("SessionStart", "session-start", None),
    ("UserPromptSubmit", "user-prompt-submit", None),
    ("PreToolUse", "pre-tool-use", Some("*")),
    ("PostToolUse", "post-tool-use", Some("*")),
    ("Stop", "stop", None),
    ("SubagentStop", "subagent-stop", None),
];

const STATUS_LINE_EVENT: &str = "status-line";

#[derive(Debug, Clone)]
pub(super) struct Options {
    /// How the hooks call swarm (`swarm`, or a path).
    pub(super) hook_program: String,
    /// `.claude/settings.local.json` instead of `.claude/settings.json`.
    pub(super) local_settings: bool,
}

pub(super) fn plan(dir: &Path, endpoint: &Endpoint, options: &Options) -> anyhow::Result<Plan> {
    let mut plan = Plan::default();
    plan.changes.push(mcp_json(dir, endpoint)?);
    // The runner's prompts start with these commands; Codex gets the same texts in full.
    for swarm_domain::prompts::Command { name, file: text } in swarm_domain::prompts::COMMANDS {
        let path = dir.join(".claude").join("commands").join(format!("{name}.md"));
        let before = read_optional(&path)?;
        plan.changes.push(FileChange::new(path, before, text.to_string(), format!("slash command /{name}")));
    }
    let settings_name = if options.local_settings { "settings.local.json" } else { "settings.json" };
    let (settings, notes) = settings_json(&dir.join(".claude").join(settings_name), &options.hook_program)?;
    plan.changes.push(settings);
    plan.notes.extend(notes);
    Ok(plan)
}

/// Expand `${NAME}` and `${NAME:-default}` as Claude Code does in `.mcp.json`: a
/// variable that is set (even to "") gives its value, else the default; `${NAME}`
/// of an unset variable stays as written. Anything else is copied.
pub(crate) fn expand_env_placeholders(text: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut expanded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        expanded.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            expanded.push_str(&rest[start..]);
            return expanded;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (lookup(name), default) {
            (Some(value), _) => expanded.push_str(&value),
            (None, Some(default)) => expanded.push_str(default),
            (None, None) => expanded.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    expanded.push_str(rest);
    expanded
}

/// Our `mcpServers` entry. Every value is an environment placeholder whose default is
/// what `swarm connect` was given, so the same file serves a person (defaults) and a
/// runner (which sets MCP_BASE_URL, API_KEY and AGENT_ID for each agent it starts).
pub(super) fn server_entry(endpoint: &Endpoint) -> Value {
    let key_default = endpoint.embedded_api_key.as_deref().unwrap_or_default();
    let agent_default = endpoint.agent_id.map(|id| id.to_string()).unwrap_or_default();
    // A token is written as it is: with `${API_KEY:-token}` a person's API_KEY (the
    // operator key) would win, and in token mode the key cannot act as the agent.
    let authorization = match &endpoint.agent_token {
        Some(token) => format!("Bearer {token}"),
        None => format!("Bearer ${{API_KEY:-{key_default}}}"),
    };
    json!({
        "type": "http",
        "url": format!("${{MCP_BASE_URL:-{}}}/mcp", endpoint.base_url),
        "headers": {
            "Authorization": authorization,
            "X-Agent-ID": format!("${{AGENT_ID:-{agent_default}}}"),
            // The trigger session a runner's run continues: tasks it creates are awaited
            // by it. Empty outside such a run, which the hub reads as none.
            "X-Task-ID": "${SWARM_SESSION_TASK_ID:-}",
        },
    })
}

fn mcp_json(dir: &Path, endpoint: &Endpoint) -> anyhow::Result<FileChange> {
    let path = dir.join(".mcp.json");
    let before = read_optional(&path)?;
    let mut root = parse_json_object(&path, before.as_deref())?;
    let original = Value::Object(root.clone());
    let servers = object_entry(&mut root, "mcpServers", &path)?;
    servers.insert(SERVER_NAME.to_string(), server_entry(endpoint));
    let url = server_entry(endpoint)["url"].as_str().unwrap_or_default().to_string();
    Ok(json_change(path, before, original, root, format!("MCP server {SERVER_NAME} at {url}")))
}

/// Merge our hooks, status line and permissions into Claude Code's settings, keeping
/// every other key, hook and permission as it is.
fn settings_json(path: &Path, hook_program: &str) -> anyhow::Result<(FileChange, Vec<String>)> {
    let before = read_optional(path)?;
    let mut root = parse_json_object(path, before.as_deref())?;
    let original = Value::Object(root.clone());
    let mut notes = Vec::new();

    push_unique(array_entry(&mut root, "enabledMcpjsonServers", path)?, SERVER_NAME);
    let permissions = object_entry(&mut root, "permissions", path)?;
    push_unique(array_entry(permissions, "allow", path)?, &format!("mcp__{SERVER_NAME}__*"));

    let hooks = object_entry(&mut root, "hooks", path)?;
    for (event, argument, matcher) in HOOKS {
        let groups = array_entry(hooks, event, path)?;
        ensure_hook(groups, matcher, &hook_command(hook_program, argument), hook_program, argument);
    }

    let status_line = json!({"type": "command", "command": hook_command(hook_program, STATUS_LINE_EVENT)});
    match root.get("statusLine") {
        Some(existing) if !is_our_command(command_of(existing), hook_program, STATUS_LINE_EVENT) => {
            notes.push(format!(
                "kept your statusLine in {}; to show the swarm's, set its command to `{}`",
                path.display(),
                hook_command(hook_program, STATUS_LINE_EVENT)
            ));
        }
        _ => {
            root.insert("statusLine".to_string(), status_line);
        }
    }
    let change =
        json_change(path.to_path_buf(), before, original, root, "hooks, status line, swarm tools allowed");
    Ok((change, notes))
}

/// `<program> hook <event>`, with the program quoted for the shell when it needs it.
pub(super) fn hook_command(program: &str, event: &str) -> String {
    let plain = program.chars().all(|c| c.is_ascii_alphanumeric() || "_-./+:@".contains(c));
    if plain {
        format!("{program} hook {event}")
    } else {
        format!("'{}' hook {event}", program.replace('\'', r"'\''"))
    }
}

/// Whether a hook command is `swarm hook <event>` as written by any `swarm connect`:
/// the program is ours (`--hook-command`) or any binary named `swarm`.
fn is_our_command(command: Option<&str>, hook_program: &str, event: &str) -> bool {
    let Some(command) = command else { return false };
    let Some(program) =
        command.trim().strip_suffix(event).and_then(|rest| rest.trim_end().strip_suffix(" hook"))
    else {
        return false;
    };
    let program = program.trim().trim_matches(|c| c == '\'' || c == '"');
    program == hook_program || Path::new(program).file_name().is_some_and(|name| name == "swarm")
}

fn command_of(handler: &Value) -> Option<&str> {
    handler.get("command").and_then(Value::as_str)
}

/// Make `groups` (one event's matcher groups) hold our handler exactly once. When it
/// is already there as we would write it, nothing moves; otherwise every handler of
/// ours is taken out (a group left empty by that goes too) and one group with the
/// current handler is appended. The user's handlers stay where they are.
fn ensure_hook(
    groups: &mut Vec<Value>,
    matcher: Option<&str>,
    command: &str,
    hook_program: &str,
    event: &str,
) {
    let handler = json!({"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS});
    ensure_handler(groups, matcher, handler, hook_program, event);
}

/// [`ensure_hook`] with the handler as the CLI spells it (the Gemini CLI's `timeout` is in
/// milliseconds).
pub(super) fn ensure_handler(
    groups: &mut Vec<Value>,
    matcher: Option<&str>,
    handler: Value,
    hook_program: &str,
    event: &str,
) {
    let is_ours = |handler: &Value| is_our_command(command_of(handler), hook_program, event);
    let handlers_of =
        |group: &Value| group.get("hooks").and_then(Value::as_array).cloned().unwrap_or_default();
    let ours: Vec<(usize, Value)> = groups
        .iter()
        .enumerate()
        .flat_map(|(index, group)| {
            handlers_of(group).into_iter().filter(is_ours).map(move |found| (index, found))
        })
        .collect();
    if let [(index, found)] = &ours[..] {
        let group_matcher = groups[*index].get("matcher").and_then(Value::as_str);
        if *found == handler && group_matcher == matcher {
            return;
        }
    }
    groups.retain_mut(|group| {
        let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else { return true };
        let count = handlers.len();
        handlers.retain(|handler| !is_ours(handler));
        !(handlers.is_empty() && count > 0)
    });
    let mut group = Map::new();
    if let Some(matcher) = matcher {
        group.insert("matcher".to_string(), json!(matcher));
    }
    group.insert("hooks".to_string(), json!([handler]));
    groups.push(Value::Object(group));
}

fn push_unique(list: &mut Vec<Value>, item: &str) {
    if !list.iter().any(|existing| existing.as_str() == Some(item)) {
        list.push(json!(item));
    }
}

/// The JSON object in `text`; an empty object for a missing or blank file.
pub(super) fn parse_json_object(path: &Path, text: Option<&str>) -> anyhow::Result<Map<String, Value>> {
    let Some(text) = text.filter(|text| !text.trim().is_empty()) else { return Ok(Map::new()) };
    let value: Value = serde_json::from_str(text).with_context(|| {
        format!("cannot read {} as JSON: fix or move it, then re-run (nothing was written)", path.display())
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => bail!(
            "{} is not a JSON object: fix or move it, then re-run (nothing was written)",
            path.display()
        ),
    }
}

pub(super) fn object_entry<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
    path: &Path,
) -> anyhow::Result<&'a mut Map<String, Value>> {
    match map.entry(key).or_insert_with(|| Value::Object(Map::new())) {
        Value::Object(object) => Ok(object),
        _ => bail!(
            "`{key}` in {} is not a JSON object: fix it, then re-run (nothing was written)",
            path.display()
        ),
    }
}

pub(super) fn array_entry<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
    path: &Path,
) -> anyhow::Result<&'a mut Vec<Value>> {
    match map.entry(key).or_insert_with(|| Value::Array(Vec::new())) {
        Value::Array(array) => Ok(array),
        _ => bail!(
            "`{key}` in {} is not a JSON list: fix it, then re-run (nothing was written)",
            path.display()
        ),
    }
}

/// A JSON file's change; unchanged when the values are the same, whatever the
/// formatting, so a re-run never reformats a file it has nothing to add to.
pub(super) fn json_change(
    path: std::path::PathBuf,
    before: Option<String>,
    original: Value,
    updated: Map<String, Value>,
    what: impl Into<String>,
) -> FileChange {
    let updated = Value::Object(updated);
    let text = serde_json::to_string_pretty(&updated).unwrap_or_default() + "\n";
    let mut change = FileChange::new(path, before, text, what);
    change.unchanged = change.before.is_some() && original == updated;
    change
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SET" => Some("value".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_like_claude_code() {
        let cases = [
            ("${SET}", "value"),
            ("${SET:-other}", "value"),
            ("${EMPTY:-other}", ""),
            ("${UNSET:-http://localhost:3013}/mcp", "http://localhost:3013/mcp"),
            ("Bearer ${UNSET:-}", "Bearer "),
            ("${UNSET}", "${UNSET}"),
            ("$SET and ${SET", "$SET and ${SET"),
            ("a${SET}b${UNSET:-c}d", "avaluebcd"),
        ];
        for (text, expected) in cases {
            assert_eq!(expand_env_placeholders(text, env), expected, "{text}");
        }
    }

    #[test]
    fn recognises_our_hook_commands_only() {
        let cases = [
            ("swarm hook stop", true),
            ("/usr/local/bin/swarm hook stop", true),
            ("'/my tools/swarm' hook stop", true),
            ("/opt/x/custom hook stop", true),
            ("swarm hook stop-all", false),
            ("swarmy hook stop", false),
            ("echo hook stop", false),
            ("swarm hook pre-tool-use", false),
        ];
        for (command, expected) in cases {
            assert_eq!(is_our_command(Some(command), "/opt/x/custom", "stop"), expected, "{command}");
        }
    }

    #[test]
    fn quotes_programs_that_need_it() {
        assert_eq!(hook_command("swarm", "stop"), "swarm hook stop");
        assert_eq!(hook_command("/my tools/swarm", "stop"), "'/my tools/swarm' hook stop");
    }

    #[test]
    fn ensure_hook_keeps_user_handlers_and_adds_ours_once() {
        let mut groups = vec![json!({"matcher": "Bash", "hooks": [
            {"type": "command", "command": "lint.sh"},
            {"type": "command", "command": "swarm hook pre-tool-use"},
        ]})];
        ensure_hook(&mut groups, Some("*"), "swarm hook pre-tool-use", "swarm", "pre-tool-use");
        let once = groups.clone();
        ensure_hook(&mut groups, Some("*"), "swarm hook pre-tool-use", "swarm", "pre-tool-use");
        assert_eq!(groups, once, "a second run changes nothing");
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0]["hooks"], json!([{"type": "command", "command": "lint.sh"}]));
        assert_eq!(groups[1]["matcher"], "*");
        assert_eq!(groups[1]["hooks"][0]["command"], "swarm hook pre-tool-use");
    }
}
