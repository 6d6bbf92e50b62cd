//! A harness described as data: the TOML a user writes to add an agent CLI (and the built-in
//! ones, embedded), and the argument templates it holds (docs/real-agent-clis.md, "Adding an
//! agent CLI").

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::report::StreamFormat;

/// One agent CLI, as its TOML file says. Field names are the file's keys.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HarnessSpec {
    /// What the hub's session logs record as `cli`, and `--harness <name>` chooses.
    pub name: String,
    /// The program to start (a bare name is looked up on `PATH`).
    pub program: String,
    /// The arguments of a new session. Placeholders: `{prompt}`, `{system_prompt}`,
    /// `{model}`, `{session}` inside a word; `{model_args}` and `{agent_args}` as a whole
    /// word stand for several words (none when there is no model, or no extra argument).
    pub args: Vec<String>,
    /// The arguments that resume session `{session}`; without them (and without an `env`
    /// entry naming `{session}`) the CLI does not resume sessions.
    #[serde(default)]
    pub resume_args: Option<Vec<String>>,
    /// The words that choose the model, where `{model_args}` stands: `["--model", "{model}"]`.
    #[serde(default)]
    pub model_args: Vec<String>,
    /// What the runner writes to the CLI's standard input, then closes it (same placeholders
    /// as `args`); without it the CLI reads nothing. For a CLI that mangles a prompt given as
    /// an argument (opencode quotes one that holds a space).
    #[serde(default)]
    pub stdin: Option<String>,
    /// The standard input of a resumed run; `stdin` when absent.
    #[serde(default)]
    pub resume_stdin: Option<String>,
    /// Environment for the CLI. A value naming `{session}` or `{model}` is set only when
    /// the run has one, and removed from the environment otherwise.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How its standard output reads.
    #[serde(default)]
    pub output: StreamFormat,
    /// `slash`: the runner's prompts go as they are (`/work-on-task <id>`, the CLI has the
    /// commands `swarm connect` installs); `expanded`: the command's instructions in full.
    #[serde(default)]
    pub prompts: Prompts,
    /// How unread mail reaches the agent: its own `hooks` (`swarm hook`), the runner puts
    /// it in the `prompt`, or `none` (the agent reads it with `read-mail`).
    #[serde(default)]
    pub mail: MailDelivery,
    /// The CLI runs `swarm hook` on its own events (mail, a cancelled task's tools,
    /// steering): Claude Code's hooks.
    #[serde(default)]
    pub hooks: bool,
    /// How a task's steering messages reach the running agent (docs/running-agents.md,
    /// "Steering"): `hooks` (its hooks run `swarm hook post-tool-use` and `stop` and pass on
    /// what they print), `resume` (the runner resumes its session with them when a turn
    /// ends), `none` (they become a follow-up task when the run ends). Default: `resume`
    /// when the CLI resumes sessions, else `none`; `hooks` only when said.
    #[serde(default)]
    pub steering: Option<SteeringDelivery>,
    /// Which MCP configuration `swarm connect --harness <mcp>` writes for it, and `swarm
    /// doctor` looks for.
    #[serde(default)]
    pub mcp: McpConfig,
    /// How to install it, for `swarm doctor`'s fix.
    #[serde(default)]
    pub install: Option<String>,
    /// `swarm doctor` and the preflight run `<program> --version` (not for a program where
    /// that may mean work).
    #[serde(default)]
    pub check_version: bool,
    /// As root it refuses to skip permissions unless `IS_SANDBOX=1` (Claude Code).
    #[serde(default)]
    pub root_needs_sandbox: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Prompts {
    #[default]
    Slash,
    Expanded,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MailDelivery {
    Hooks,
    #[default]
    Prompt,
    None,
}

/// How steering reaches a running agent of this CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SteeringDelivery {
    /// Its hooks: `steer` at the next tool call, the rest when its turn ends.
    Hooks,
    /// The runner resumes its session with the messages after each turn.
    Resume,
    /// None during the run: a follow-up task when the run ends.
    None,
}

/// The MCP configurations `swarm connect` knows how to write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum McpConfig {
    /// `.mcp.json` in the project (or `~/.claude.json`).
    Claude,
    /// `[mcp_servers.agent-swarm]` in `$CODEX_HOME/config.toml`.
    Codex,
    /// pi has no MCP client: the extension `swarm connect --harness pi` writes
    /// (`.pi/extensions/agent-swarm.ts`) registers the hub's tools and runs the hooks.
    Pi,
    /// `mcpServers.agent-swarm` in the project's `.gemini/settings.json`.
    Gemini,
    /// The `mcp` section of `opencode.json` in the project.
    Opencode,
    /// Whatever the CLI reads; the runner checks nothing.
    #[default]
    None,
}

/// The values a run fills the templates with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Values<'a> {
    pub prompt: &'a str,
    pub system_prompt: &'a str,
    pub session: Option<&'a str>,
    pub model: Option<&'a str>,
    pub agent_args: &'a [String],
}

impl HarnessSpec {
    /// Reads a harness file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<HarnessSpec, String> {
        let document = text.parse::<toml_edit::DocumentMut>().map_err(|err| format!("not TOML: {err}"))?;
        let mut value = table_to_json(document.as_table());
        // A file found by name need not repeat it.
        if let (Some(object), false) = (value.as_object_mut(), origin.is_empty()) {
            object.entry("name").or_insert_with(|| Value::String(origin.to_string()));
        }
        let spec: HarnessSpec = serde_json::from_value(value).map_err(|err| err.to_string())?;
        if spec.program.trim().is_empty() {
            return Err("`program` is empty".into());
        }
        let words = spec.args.iter().chain(spec.resume_args.iter().flatten()).chain(&spec.model_args);
        for word in words.chain(&spec.stdin).chain(&spec.resume_stdin) {
            check_template(word)?;
        }
        Ok(spec)
    }

    /// Whether it can continue an earlier session.
    pub fn can_resume(&self) -> bool {
        self.resume_args.is_some() || self.env.values().any(|value| value.contains("{session}"))
    }

    /// The arguments for one run.
    pub fn arguments(&self, values: &Values<'_>) -> Vec<String> {
        let template = match (&self.resume_args, values.session) {
            (Some(resume), Some(_)) => resume,
            _ => &self.args,
        };
        let mut words = Vec::new();
        for word in template {
            match word.as_str() {
                "{agent_args}" => words.extend(values.agent_args.iter().cloned()),
                "{model_args}" => {
                    if values.model.is_some() {
                        words.extend(self.model_args.iter().map(|word| fill(word, values)));
                    }
                }
                _ => words.push(fill(word, values)),
            }
        }
        words
    }

    /// What to write to the CLI's standard input, if anything.
    pub fn input(&self, values: &Values<'_>) -> Option<String> {
        let template = match (&self.resume_stdin, values.session) {
            (Some(resume), Some(_)) => Some(resume),
            _ => self.stdin.as_ref(),
        };
        template.map(|template| fill(template, values))
    }

    /// The environment entries to set (`Some`) or remove (`None`).
    pub fn environment(&self, values: &Values<'_>) -> Vec<(String, Option<String>)> {
        self.env
            .iter()
            .map(|(name, template)| {
                let missing = (template.contains("{session}") && values.session.is_none())
                    || (template.contains("{model}") && values.model.is_none());
                (name.clone(), (!missing).then(|| fill(template, values)))
            })
            .collect()
    }
}

const PLACEHOLDERS: [&str; 4] = ["prompt", "system_prompt", "session", "model"];

fn check_template(word: &str) -> Result<(), String> {
    if matches!(word, "{agent_args}" | "{model_args}") {
        return Ok(());
    }
    let mut rest = word;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else { break };
        let name = &rest[start + 1..start + end];
        if !PLACEHOLDERS.contains(&name) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "unknown placeholder {{{name}}} in {word:?}: known are {{prompt}}, {{system_prompt}}, \
                 {{session}}, {{model}}, and {{model_args}} / {{agent_args}} as a whole word"
            ));
        }
        rest = &rest[start + end + 1..];
    }
    Ok(())
}

/// Replaces each placeholder once, left to right: a value that itself holds `{prompt}` (a
/// prompt quoting a template) is not expanded again.
fn fill(template: &str, values: &Values<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let value = after.find('}').and_then(|end| {
            let value = match &after[1..end] {
                "prompt" => Some(values.prompt),
                "system_prompt" => Some(values.system_prompt),
                "session" => Some(values.session.unwrap_or_default()),
                "model" => Some(values.model.unwrap_or_default()),
                _ => None,
            };
            value.map(|value| (value, end))
        });
        match value {
            Some((value, end)) => {
                out.push_str(value);
                rest = &after[end + 1..];
            }
            None => {
                out.push('{');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn table_to_json(table: &toml_edit::Table) -> Value {
    Value::Object(table.iter().map(|(key, item)| (key.to_string(), item_to_json(item))).collect())
}

fn item_to_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::Value(value) => value_to_json(value),
        toml_edit::Item::Table(table) => table_to_json(table),
        toml_edit::Item::ArrayOfTables(tables) => Value::Array(tables.iter().map(table_to_json).collect()),
        toml_edit::Item::None => Value::Null,
    }
}

fn value_to_json(value: &toml_edit::Value) -> Value {
    use toml_edit::Value as Toml;
    match value {
        Toml::String(text) => Value::String(text.value().clone()),
        Toml::Integer(number) => Value::from(*number.value()),
        Toml::Float(number) => Value::from(*number.value()),
        Toml::Boolean(flag) => Value::Bool(*flag.value()),
        Toml::Datetime(time) => Value::String(time.value().to_string()),
        Toml::Array(items) => Value::Array(items.iter().map(value_to_json).collect()),
        Toml::InlineTable(table) => {
            Value::Object(table.iter().map(|(key, value)| (key.to_string(), value_to_json(value))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(session: Option<&'a str>, model: Option<&'a str>, extra: &'a [String]) -> Values<'a> {
        Values { prompt: "do {session} it", system_prompt: "be good", session, model, agent_args: extra }
    }

    #[test]
    fn a_file_names_program_templates_and_format() {
        let spec = HarnessSpec::from_toml(
            r#"
            program = "my-agent"
            args = ["run", "{model_args}", "{agent_args}", "--system", "{system_prompt}", "{prompt}"]
            resume_args = ["run", "--continue={session}", "{prompt}"]
            model_args = ["-m", "{model}"]
            output = "text"
            [env]
            MY_AGENT_SESSION = "{session}"
            MY_AGENT_QUIET = "1"
            "#,
            "mine",
        )
        .unwrap();
        assert_eq!(spec.name, "mine");
        assert!(spec.can_resume());
        let extra = vec!["--fast".to_string()];
        assert_eq!(
            spec.arguments(&values(None, Some("big"), &extra)),
            ["run", "-m", "big", "--fast", "--system", "be good", "do {session} it"]
        );
        assert_eq!(
            spec.arguments(&values(None, None, &[])),
            ["run", "--system", "be good", "do {session} it"]
        );
        assert_eq!(
            spec.arguments(&values(Some("s-1"), None, &[])),
            ["run", "--continue=s-1", "do {session} it"]
        );
        assert_eq!(
            spec.environment(&values(None, None, &[])),
            [("MY_AGENT_QUIET".to_string(), Some("1".to_string())), ("MY_AGENT_SESSION".to_string(), None)]
        );
        assert_eq!(spec.environment(&values(Some("s-1"), None, &[]))[1].1.as_deref(), Some("s-1"));
    }

    #[test]
    fn a_broken_file_says_what_is_wrong() {
        for (text, says) in [
            ("program = ", "not TOML"),
            ("args = []", "missing field `program`"),
            ("program = 'x'\nargs = []\noutput = 'xml'", "unknown variant `xml`"),
            ("program = 'x'\nargs = ['{promt}']", "unknown placeholder {promt}"),
            ("program = 'x'\nargs = []\nflavour = 1", "unknown field `flavour`"),
            ("program = ' '\nargs = []", "`program` is empty"),
        ] {
            let err = HarnessSpec::from_toml(text, "x").unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
