//! `swarm connect`: sets up a project directory so that an agent CLI talks to a hub.
//!
//! For Claude Code it writes the `agent-swarm` server into `.mcp.json`, the slash
//! commands the runner's prompts use into `.claude/commands/`, and hooks that call
//! `swarm hook <event>` (plus the status line) into `.claude/settings.json`. For Codex
//! it writes `[mcp_servers.agent-swarm]` into Codex's `config.toml`.
//!
//! Every file is planned first and written only when all plans succeeded, so a file
//! that cannot be read leaves everything as it was. Re-running updates: our entries
//! are replaced by the current version, everything else in the files is kept, and a
//! file whose content would not change is not touched.

mod claude;
mod codex;
mod gemini;
mod git;
mod opencode;
mod pi;

use std::{
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::Serialize;
use swarm_domain::id::AgentId;

pub(crate) use claude::expand_env_placeholders;

/// The MCP server's name in the agent CLIs' configuration, as in the reference: Claude
/// Code shows the tools as `mcp__agent-swarm__<tool>`, and the slash commands say so.
pub const SERVER_NAME: &str = "agent-swarm";

pub const LONG_ABOUT: &str = "\
Set up a project directory so that an agent CLI talks to a swarm hub.

Claude Code (--harness claude, the default):
  .mcp.json                  the `agent-swarm` MCP server: URL, API key and agent id headers
  .claude/commands/*.md      the slash commands the runner's prompts use: /work-on-task,
                             /review-offered-task, /task-result, /swarm-chat, /start-worker,
                             /start-leader
  .claude/settings.json      hooks that call `swarm hook <event>` (a cancelled task blocks
                             further tool use), the status line, and permission to use the
                             swarm's tools

Codex (--harness codex): the [mcp_servers.agent-swarm] table of Codex's config.toml
($CODEX_HOME/config.toml, else ~/.codex/config.toml, or --codex-config).

The Gemini CLI (--harness gemini): .gemini/settings.json in the project, the `agent-swarm`
MCP server (httpUrl, headers, trusted) and hooks that call `swarm hook <event>` at its
SessionStart, BeforeAgent, BeforeTool, AfterTool and AfterAgent events. Gemini reads a
project's settings only in a trusted folder (the runner passes --skip-trust).

pi (--harness pi), which has no MCP client:
  .pi/extensions/agent-swarm.ts   an extension that registers the hub's MCP tools as pi tools
                                  (mcp__agent-swarm__<tool>) and calls `swarm hook <event>`
                                  at pi's events, as Claude Code's hooks do
  .pi/prompts/*.md                the runner's commands as pi prompt templates

opencode (--harness opencode): opencode.json in the project, the `agent-swarm` MCP server
(a remote server: URL, headers with {env:API_KEY} and {env:AGENT_ID}). It has no hooks: the
runner puts unread mail into the prompt, as for Codex.

Values come from the environment when the agent CLI starts, so one set of files serves a
person and every runner: .mcp.json holds ${MCP_BASE_URL:-<url>}, ${API_KEY:-} and
${AGENT_ID:-<agent id>}, which Claude Code expands. The API key is never written unless you
pass --embed-api-key.

Re-run it any time (e.g. after upgrading swarm): entries of ours are updated, everything
else in these files is kept, and unchanged files are not touched. --dry-run shows what
would change.";

/// Which agent CLI to set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Harness {
    /// Claude Code: .mcp.json, .claude/commands, .claude/settings.json
    Claude,
    /// Codex: config.toml
    Codex,
    /// pi: .pi/extensions/agent-swarm.ts, .pi/prompts
    Pi,
    /// The Gemini CLI: .gemini/settings.json
    Gemini,
    /// opencode: opencode.json
    Opencode,
    /// All of them
    All,
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The project directory to set up
    #[arg(long, default_value = ".", value_name = "DIR")]
    dir: PathBuf,
    /// The agent CLI to set up
    #[arg(long, value_enum, default_value_t = Harness::Claude)]
    harness: Harness,
    /// The hub. Claude Code gets `${MCP_BASE_URL:-URL}/mcp`, so a runner's MCP_BASE_URL
    /// still wins; Codex gets URL/mcp. The key is not written unless --embed-api-key:
    /// the agent CLI reads API_KEY from its environment when it starts (Codex is told to
    /// send it only when a key is in use)
    #[command(flatten)]
    hub: swarm_client::HubFlags,
    /// Write the API key (given, or the one a hub on this machine left for you) into the
    /// files, as the default of ${API_KEY:-KEY}. Keep such files out of version control
    #[arg(long)]
    embed_api_key: bool,
    /// The agent's own token, for a hub with AGENT_AUTH=token: written literally as the
    /// Authorization header (never the API key, which then cannot act as an agent), in
    /// files readable by you only (0600), and masked in what is printed
    #[arg(
        long,
        env = "AGENT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        conflicts_with = "embed_api_key"
    )]
    agent_token: Option<String>,
    /// The agent these files speak for (sent as X-Agent-ID). Written as the default of
    /// ${AGENT_ID:-UUID}, so a runner's AGENT_ID still wins; without it the header
    /// comes from AGENT_ID alone
    #[arg(long, env = "AGENT_ID", value_name = "UUID")]
    agent_id: Option<String>,
    /// Write the hooks into .claude/settings.local.json (yours only, not committed)
    /// instead of .claude/settings.json (shared with the project)
    #[arg(long)]
    local_settings: bool,
    /// How the hooks call swarm: a program name on PATH or a path to the binary
    #[arg(long, default_value = "swarm", value_name = "COMMAND")]
    hook_command: String,
    /// Codex's config file to edit (a project's .codex/config.toml is read by Codex
    /// only in a trusted project)
    #[arg(long, value_name = "PATH")]
    codex_config: Option<PathBuf>,
    /// Write a key into a file even when git tracks it (by default that is refused: the
    /// next commit would publish the key)
    #[arg(long)]
    force: bool,
    /// Show what would change and write nothing
    #[arg(long)]
    dry_run: bool,
    /// Print what was done as JSON (for scripts) instead of a summary
    #[arg(long)]
    json: bool,
}

/// What the written files say about the hub. Private fields: built once from the
/// arguments by [`Endpoint::from_args`], which validates them.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The hub's base URL, without a trailing slash.
    base_url: String,
    /// The key to write, only when the user asked for it (`--embed-api-key`).
    embedded_api_key: Option<String>,
    /// Whether the hub is used with a key at all: Codex fails a server whose bearer
    /// token variable is unset, so it is told about `API_KEY` only then.
    api_key_in_use: bool,
    agent_id: Option<AgentId>,
    /// The agent's token (`--agent-token`): sent instead of any key, whatever the
    /// environment's API_KEY says.
    agent_token: Option<String>,
}

impl Endpoint {
    /// What must never be printed, and makes a file private when written into it.
    fn secrets(&self) -> Vec<String> {
        self.embedded_api_key.iter().chain(&self.agent_token).cloned().collect()
    }

    fn from_args(args: &ConnectArgs) -> anyhow::Result<Endpoint> {
        let base_url = args.hub.base_url();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://"))
            || base_url.contains(['}', ' '])
        {
            bail!(
                "--url (or MCP_BASE_URL) must be the hub's http(s) base URL, e.g. {}; got {base_url:?}",
                swarm_client::DEFAULT_HUB_URL
            );
        }
        // Without one, the key a hub on this machine generated for its user's commands.
        let key = args.hub.key_or_local();
        let api_key = key.as_deref();
        let embedded_api_key = match (args.embed_api_key, api_key) {
            (false, _) => None,
            (true, None) => bail!("--embed-api-key needs the key: pass --api-key KEY or set API_KEY"),
            (true, Some(key)) if key.contains(['}', '"', '\'', '\n']) => {
                bail!(
                    "this API key contains characters that cannot be embedded; leave out --embed-api-key and set API_KEY when the agent CLI starts"
                )
            }
            (true, Some(key)) => Some(key.to_string()),
        };
        let agent_id = match args.agent_id.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(AgentId::parse(text).context(
                "--agent-id (or AGENT_ID) must be an agent's UUID; see them with `swarm agent list`",
            )?),
        };
        let agent_token = args.agent_token.as_deref().map(str::trim).filter(|token| !token.is_empty());
        if agent_token.is_some_and(|token| token.contains(['}', '"', '\'', '\n', ' '])) {
            bail!("--agent-token is not a token of this hub (they look like swt_ and 64 hex digits)");
        }
        Ok(Endpoint {
            base_url: base_url.to_string(),
            // Codex's literal header is the embedded key's: the token takes its place.
            embedded_api_key: agent_token.map(str::to_string).or(embedded_api_key),
            api_key_in_use: api_key.is_some() || agent_token.is_some(),
            agent_id,
            agent_token: agent_token.map(str::to_string),
        })
    }
}

/// One file as it is and as it will be.
#[derive(Debug, Clone)]
struct FileChange {
    path: PathBuf,
    /// The file's text now; `None` when it does not exist.
    before: Option<String>,
    /// The text to write; equal to `before` (or equivalent) when nothing changes.
    after: String,
    /// Set by the planner when the content is equivalent even if the text differs
    /// (JSON whose values are already ours, in the user's own formatting).
    unchanged: bool,
    /// What the file is for, in a few words.
    what: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum FileStatus {
    Created,
    Updated,
    Unchanged,
}

impl FileChange {
    fn new(path: PathBuf, before: Option<String>, after: String, what: impl Into<String>) -> FileChange {
        let unchanged = before.as_deref() == Some(after.as_str());
        FileChange { path, before, after, unchanged, what: what.into() }
    }

    fn status(&self) -> FileStatus {
        match (&self.before, self.unchanged) {
            (_, true) => FileStatus::Unchanged,
            (None, false) => FileStatus::Created,
            (Some(_), false) => FileStatus::Updated,
        }
    }
}

/// What a harness module wants done: the files, and what the user should know.
#[derive(Debug, Default)]
struct Plan {
    changes: Vec<FileChange>,
    notes: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    dry_run: bool,
    files: Vec<ReportedFile<'a>>,
    notes: &'a [String],
}

#[derive(Serialize)]
struct ReportedFile<'a> {
    path: String,
    status: FileStatus,
    what: &'a str,
}

pub async fn run(args: ConnectArgs) -> anyhow::Result<()> {
    let endpoint = Endpoint::from_args(&args)?;
    let dir = &args.dir;
    if !dir.is_dir() {
        bail!("{} is not a directory: pass the project directory with --dir", dir.display());
    }
    let mut plan = Plan::default();
    if matches!(args.harness, Harness::Claude | Harness::All) {
        let options = claude::Options {
            hook_program: args.hook_command.trim().to_string(),
            local_settings: args.local_settings,
        };
        if options.hook_program.is_empty() {
            bail!("--hook-command must name the swarm program, e.g. `swarm` or /usr/local/bin/swarm");
        }
        merge(&mut plan, claude::plan(dir, &endpoint, &options)?);
    }
    if matches!(args.harness, Harness::Codex | Harness::All) {
        let config_path = match &args.codex_config {
            Some(path) => path.clone(),
            None => codex::default_config_path()?,
        };
        merge(&mut plan, codex::plan(&config_path, &endpoint)?);
    }
    if matches!(args.harness, Harness::Pi | Harness::All) {
        let hook_program = args.hook_command.trim();
        if hook_program.is_empty() {
            bail!("--hook-command must name the swarm program, e.g. `swarm` or /usr/local/bin/swarm");
        }
        merge(&mut plan, pi::plan(dir, &endpoint, hook_program)?);
    }
    if matches!(args.harness, Harness::Gemini | Harness::All) {
        let hook_program = args.hook_command.trim();
        if hook_program.is_empty() {
            bail!("--hook-command must name the swarm program, e.g. `swarm` or /usr/local/bin/swarm");
        }
        merge(&mut plan, gemini::plan(dir, &endpoint, hook_program)?);
    }
    if matches!(args.harness, Harness::Opencode | Harness::All) {
        merge(&mut plan, opencode::plan(dir, &endpoint)?);
    }
    let hooks_installed =
        matches!(args.harness, Harness::Claude | Harness::Pi | Harness::Gemini | Harness::All);
    if hooks_installed && args.hook_command.trim() == "swarm" && !program_on_path("swarm") {
        plan.notes.push(
            "`swarm` is not on PATH, and the hooks call `swarm hook <event>`: install it with \
             `cargo install --locked --path crates/swarm` (from the swarm checkout), or re-run with \
             --hook-command /path/to/swarm"
                .to_string(),
        );
    }
    plan.notes.extend(auth_notes(&endpoint, args.harness));
    let secrets = endpoint.secrets();
    let holds_secret = |change: &FileChange| secrets.iter().any(|secret| change.after.contains(secret));
    let to_write: Vec<&FileChange> =
        plan.changes.iter().filter(|change| change.status() != FileStatus::Unchanged).collect();
    if !args.force
        && let Some(change) =
            to_write.iter().find(|change| holds_secret(change) && git::tracked(&change.path))
    {
        bail!(
            "{} is tracked by git, and this would write a key into it: the next commit would publish \
             the key. Leave out --embed-api-key/--agent-token (the agent CLI reads API_KEY from its \
             environment), or `git rm --cached` the file first, or pass --force",
            change.path.display()
        );
    }
    if !args.dry_run {
        for change in &to_write {
            let private = holds_secret(change);
            write_file(&change.path, &change.after, private)?;
            if private && let Some(exclude) = git::exclude(&change.path) {
                plan.notes.push(format!(
                    "{} holds a key: added to {} so that git ignores it",
                    shown_path(&change.path, dir),
                    exclude.display()
                ));
            }
        }
    }
    let text = if args.json {
        json_report(&plan, dir, args.dry_run)?
    } else {
        text_report(&plan, dir, args.dry_run)
    };
    // What is printed may end up in a terminal log or a CI transcript: never a secret.
    let text = secrets.iter().fold(text, |text, secret| text.replace(secret, MASK));
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(err).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

fn merge(plan: &mut Plan, other: Plan) {
    plan.changes.extend(other.changes);
    plan.notes.extend(other.notes);
}

fn auth_notes(endpoint: &Endpoint, harness: Harness) -> Vec<String> {
    let mut notes = Vec::new();
    if endpoint.embedded_api_key.is_some() {
        notes.push("the API key is written into these files: keep them out of version control".to_string());
    } else if harness != Harness::Codex {
        let who = match harness {
            Harness::Pi => "the pi extension",
            Harness::Gemini => "the Gemini CLI",
            Harness::Opencode => "opencode",
            _ => "Claude Code",
        };
        notes.push(format!(
            "the API key is not written: {who} sends `Bearer ${{API_KEY}}` from its environment \
             (set API_KEY before starting it, or re-run with --embed-api-key)"
        ));
    }
    if matches!(harness, Harness::Codex | Harness::All) && !endpoint.api_key_in_use {
        notes.push(
            "no API key was given, so Codex sends none; if the hub has one, re-run with API_KEY set"
                .to_string(),
        );
    }
    if endpoint.agent_id.is_none() {
        notes.push(
            "no agent id was given: X-Agent-ID comes from AGENT_ID when the agent CLI starts (a runner \
             sets it); without it the agent registers with join-swarm"
                .to_string(),
        );
    }
    notes
}

/// Whether `program` would be found on PATH, so we can warn before a hook fails.
fn program_on_path(program: &str) -> bool {
    let Some(paths) = std::env::var_os("PATH") else { return false };
    std::env::split_paths(&paths).any(|dir| dir.join(program).is_file())
}

/// How a secret is shown in what `swarm connect` prints.
const MASK: &str = "********";

/// Write through a temporary file in the same directory and rename it over the
/// target, so a crash never leaves half a file; an existing file keeps its
/// permissions (Codex's config may hold other servers' secrets), and a symlinked
/// file (dotfiles) is written where the link points. A `private` file (it holds a key)
/// is readable by its owner only (0600), from its first byte on.
fn write_file(path: &Path, text: &str, private: bool) -> anyhow::Result<()> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let parent = target.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create the directory {}", parent.display()))?;
    let file_name = target.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = parent.join(format!(".{file_name}.swarm-connect.tmp"));
    let _ = std::fs::remove_file(&temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    if private {
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    }
    options
        .open(&temporary)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot make {} private", temporary.display()))?;
    } else if let Ok(metadata) = std::fs::metadata(&target) {
        let _ = std::fs::set_permissions(&temporary, metadata.permissions());
    }
    std::fs::rename(&temporary, &target).with_context(|| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot replace {}", target.display())
    })
}

/// A path as the user knows it: relative to the project directory when inside it.
fn shown_path(path: &Path, dir: &Path) -> String {
    path.strip_prefix(dir).unwrap_or(path).display().to_string()
}

fn text_report(plan: &Plan, dir: &Path, dry_run: bool) -> String {
    let mut text = String::new();
    if dry_run {
        text.push_str("dry run: nothing was written\n");
    }
    let width =
        plan.changes.iter().map(|change| shown_path(&change.path, dir).chars().count()).max().unwrap_or(0);
    for change in &plan.changes {
        let status = match (change.status(), dry_run) {
            (FileStatus::Created, false) => "created",
            (FileStatus::Created, true) => "would create",
            (FileStatus::Updated, false) => "updated",
            (FileStatus::Updated, true) => "would update",
            (FileStatus::Unchanged, _) => "unchanged",
        };
        let path = shown_path(&change.path, dir);
        let _ = writeln!(text, "{status:<12}  {path:<width$}  {}", change.what);
    }
    if dry_run {
        for change in plan.changes.iter().filter(|change| change.status() != FileStatus::Unchanged) {
            let _ = writeln!(text, "\n--- {} ---", shown_path(&change.path, dir));
            text.push_str(&change.after);
        }
    }
    if !plan.notes.is_empty() {
        text.push('\n');
        for note in &plan.notes {
            let _ = writeln!(text, "note: {note}");
        }
    }
    text
}

fn json_report(plan: &Plan, dir: &Path, dry_run: bool) -> anyhow::Result<String> {
    let files = plan
        .changes
        .iter()
        .map(|change| ReportedFile {
            path: shown_path(&change.path, dir),
            status: change.status(),
            what: &change.what,
        })
        .collect();
    let report = Report { dry_run, files, notes: &plan.notes };
    Ok(format!("{}\n", serde_json::to_string_pretty(&report).context("cannot write the report as JSON")?))
}

/// Read a file that may not exist yet.
fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
    }
}
