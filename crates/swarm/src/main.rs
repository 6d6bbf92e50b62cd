//! `swarm`: one binary for the hub (`serve`), its runners and its client commands.
//!
//! `main` only parses arguments, runs the chosen command and maps the result to an
//! exit code. Each command's logic lives in a library crate (`swarm-hub`, `swarm-runner`,
//! `swarm-cli`, `swarm-connect`, `swarm-demo`); the modules here turn
//! flags into their configuration.

mod backup;
mod mcp;
mod runner;
mod serve;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "swarm",
    version,
    about = "A coordination hub for crews of AI coding agents",
    long_about = "A coordination hub for crews of AI coding agents.\n\n\
        Run the hub with `swarm serve`; run agents for it with `swarm worker` and `swarm lead`; \
        set up a project for Claude Code or Codex with `swarm connect`; talk to a running hub \
        with `swarm task`, `swarm agent` and `swarm stats`. New here? `swarm demo` shows a \
        whole crew at work in a few seconds."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the hub: HTTP API on --host:--port, backed by SQLite (default) or PostgreSQL.
    Serve(Box<swarm_hub::ServeArgs>),
    /// Serve the MCP tools over stdio for an agent CLI, on the hub's database (no hub needed).
    Mcp(mcp::McpArgs),
    /// Run a worker agent: wait for work on a hub and start the agent CLI only when there is some.
    #[command(long_about = runner::LONG_ABOUT)]
    Worker(runner::RunnerArgs),
    /// Run the lead agent: like `worker`, registered as the swarm's lead.
    #[command(long_about = runner::LONG_ABOUT)]
    Lead(runner::RunnerArgs),
    /// Check that an agent can run here: hub and key, registration, agent CLI, MCP entry, hooks, root/sandbox.
    Doctor(runner::DoctorArgs),
    /// Copy the hub's SQLite database (--db / DATABASE_PATH) to a new file, consistently, while it runs.
    #[command(long_about = BACKUP_ABOUT)]
    Backup(backup::BackupArgs),
    /// Check a backup and put it in place of the SQLite database; refuses while any process has it open.
    #[command(long_about = RESTORE_ABOUT)]
    Restore(backup::RestoreArgs),
    /// Create, list, show, finish and cancel tasks on a running hub.
    #[command(subcommand)]
    Task(swarm_cli::TaskCommand),
    /// List and show agents on a running hub.
    #[command(subcommand)]
    Agent(swarm_cli::AgentCommand),
    /// Agent mail on a running hub: `swarm mail log <agent>` prints an agent's history as JSONL.
    #[command(subcommand)]
    Mail(swarm_cli::MailCommand),
    /// List, create, fire and disable triggers (cron, interval, once, webhook, github, manual).
    #[command(subcommand)]
    Trigger(swarm_cli::TriggerCommand),
    /// Show agent and task counts of a running hub.
    Stats(swarm_cli::StatsArgs),
    /// Watch a hub, a lead and two workers at work in a few seconds (no LLM, no network).
    #[command(long_about = swarm_demo::LONG_ABOUT)]
    Demo(swarm_demo::DemoArgs),
    /// A scripted agent CLI for tests and demos (no LLM): acts on the hub through MCP.
    #[command(hide = true)]
    StandInAgent(swarm_demo::stand_in::StandInArgs),
    /// Set up a project directory for Claude Code or Codex to talk to a hub (MCP, slash commands, hooks).
    #[command(long_about = swarm_connect::connect::LONG_ABOUT)]
    Connect(swarm_connect::connect::ConnectArgs),
    /// Answer an agent CLI's hook event (installed by `swarm connect`); never fails the agent.
    #[command(long_about = swarm_connect::hook::LONG_ABOUT)]
    Hook(swarm_connect::hook::HookArgs),
}

const BACKUP_ABOUT: &str = "Copy the hub's SQLite database (--db / DATABASE_PATH, as for `swarm serve`) \
    to FILE while the hub runs: one consistent snapshot (VACUUM INTO on a read-only connection), checked \
    (integrity, migrations) before it gets its name. On PostgreSQL use pg_dump (docs/deployment.md).";
const RESTORE_ABOUT: &str = "Check FILE (PRAGMA integrity_check, the migrations this swarm knows) and put it \
    in place of the SQLite database (--db / DATABASE_PATH). Refuses while any process has the database open \
    (a hub, `swarm mcp`, a sqlite3 shell): stop them first. The database it replaces is kept beside it as \
    <db>.before-restore-<seconds>. On PostgreSQL use pg_restore (docs/deployment.md).";

/// Flags whose value is a secret: on the command line it is visible to every user of
/// the machine (`ps`, `/proc/<pid>/cmdline`) for as long as the process runs.
const SECRET_FLAGS: [(&str, &str); 3] = [
    ("--api-key", "API_KEY (or --api-key-file for `swarm serve`)"),
    ("--agent-token", "AGENT_TOKEN"),
    ("--secret", "TRIGGER_SECRET"),
];

/// A warning for each secret given as a flag, naming the variable to use instead.
fn warn_about_secret_flags(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<String> {
    let mut warnings = Vec::new();
    for arg in args {
        let arg = arg.to_string_lossy();
        if arg == "--" {
            break;
        }
        for (flag, instead) in SECRET_FLAGS {
            if arg == flag || arg.starts_with(&format!("{flag}=")) {
                warnings.push(format!(
                    "warning: {flag} on the command line can be read by every user of this machine \
                     (ps); set {instead} in the environment instead"
                ));
            }
        }
    }
    warnings
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    for warning in warn_about_secret_flags(std::env::args_os().skip(1)) {
        eprintln!("{warning}");
    }
    if matches!(cli.command, Command::Serve(_)) {
        // Before the runtime starts its threads.
        swarm_hub::tune_allocator();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::Backup(args) => backup::backup(args).await,
            Command::Restore(args) => backup::restore(args).await,
            Command::Task(command) => swarm_cli::run_task(command).await,
            Command::Agent(command) => swarm_cli::run_agent(command).await,
            Command::Mail(command) => swarm_cli::run_mail(command).await,
            Command::Trigger(command) => swarm_cli::run_trigger(command).await,
            Command::Stats(args) => swarm_cli::run_stats(args).await,
            Command::Worker(args) => runner::run(swarm_runner::Role::Worker, args).await,
            Command::Lead(args) => runner::run(swarm_runner::Role::Lead, args).await,
            Command::Doctor(args) => runner::doctor(args).await,
            Command::Demo(args) => swarm_demo::run(args).await,
            Command::StandInAgent(args) => swarm_demo::stand_in::run(args).await,
            Command::Connect(args) => swarm_connect::connect::run(args).await,
            Command::Hook(args) => swarm_connect::hook::run(args).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_given_as_flags_are_named_with_their_variable() {
        let args = ["serve", "--api-key", "k", "--api-key-file", "f", "--agent-token=t", "--", "--secret"];
        let warnings = warn_about_secret_flags(args.iter().map(std::ffi::OsString::from));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("--api-key on the command line") && warnings[0].contains("API_KEY"));
        assert!(warnings[1].contains("AGENT_TOKEN"), "{warnings:?}");
    }
}
