//! `swarm-bench`: start a real hub (or use a running one) and measure, over HTTP on
//! loopback, how fast the poll hands out work. BENCHMARKS.md explains each number.
//!
//! The hub is a separate process (the `swarm` binary; the bench is not part of it), so
//! the numbers include everything a runner pays: HTTP parsing, JSON, the store's
//! transactions and the wake-up of parked polls. The bench reaches a hub only over its
//! HTTP API, and its database only through the `Store` trait (`--fill`).

mod cpu;
mod fill;
mod fleet;
mod fleet_client;
mod fleet_proc;
mod fleet_report;
mod hub;
mod measure;
mod memory;
mod report;
mod soak;
mod soak_kinds;
mod soak_load;
mod tools;
mod tools_cli;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use clap::Parser;

pub use fleet::{FLEET_ABOUT, FleetArgs};
pub use fleet_client::FleetClientArgs;
use hub::{Backend, Http, SpawnedHub, Target};
use measure::{CycleKind, Plan};
pub use memory::{MEMORY_ABOUT, MemoryArgs};
use report::{Machine, Report, Run};
pub use soak::{SOAK_ABOUT, SoakArgs};
pub use tools::{TOOLS_ABOUT, ToolsArgs};

/// The long help of `swarm-bench`.
pub const LONG_ABOUT: &str = "Measure the hub's poll over real HTTP on loopback.\n\n\
    Starts the `swarm` binary (found beside swarm-bench or on PATH, or named by --swarm) as \
    `swarm serve --port 0` on a scratch database (a new SQLite file in a \
    temporary folder; on PostgreSQL a new database swarm_bench_<random> that is dropped after), \
    or benches a running hub with --url. Measures: trigger latency (task created → a parked \
    `GET /api/poll?wait=30` answers), null-poll throughput (an idle agent's `GET /api/poll`), \
    `GET /health` throughput as a floor (the same clients alternate between the two every half \
    second, so both see the same machine), and claim cycles per second (create → poll → finish) \
    with many workers. Progress goes to stderr, a Markdown table (or --json) to stdout. \
    A default run takes about a minute per backend; build with --release for real numbers.";

#[derive(Debug, Parser)]
#[command(
    name = "swarm-bench",
    version,
    about = "Measure a real swarm hub: trigger latency, poll throughput and claim cycles (BENCHMARKS.md)",
    long_about = LONG_ABOUT
)]
pub struct BenchArgs {
    /// The `swarm` binary to start hubs with. Default: the one beside swarm-bench (the
    /// same cargo target folder), else `swarm` on PATH.
    #[arg(long, global = true, env = "SWARM_BIN", value_name = "PATH")]
    swarm: Option<PathBuf>,
    /// Backends to bench: sqlite, postgres or both. Default: sqlite, plus postgres when a
    /// PostgreSQL URL is given.
    #[arg(long, value_enum, conflicts_with = "url")]
    backend: Option<BackendChoice>,
    /// A PostgreSQL server (postgres:// URL) to bench on. The bench creates a scratch
    /// database there, so the URL's role needs the right to CREATE DATABASE.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Bench this running hub (e.g. http://127.0.0.1:3013) instead of starting one. Its
    /// data stays: the bench registers agents and leaves completed tasks behind. Ignores
    /// --backend and --database-url.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// API key of the --url hub (a hub the bench starts gets a key of its own).
    #[arg(long, env = "API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Trigger-latency samples measured.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    latency_samples: u32,
    /// Trigger-latency samples taken first and thrown away.
    #[arg(long, default_value_t = 50)]
    latency_warmup: u32,
    /// Seconds each throughput run is measured (fractions allowed). Null polls and
    /// `/health` get this long each, in turns of half a second.
    #[arg(long, default_value_t = 6.0, value_parser = parse_seconds)]
    seconds: f64,
    /// Seconds each throughput run goes on before measuring starts.
    #[arg(long, default_value_t = 2.0, value_parser = parse_seconds_or_zero)]
    warmup_seconds: f64,
    /// Concurrent clients of the null-poll and /health runs, comma-separated; one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,16",
        value_parser = clap::value_parser!(u32).range(1..=1_000))]
    concurrency: Vec<u32>,
    /// Concurrent workers (agents with maxTasks 1) of the claim-cycle runs.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    workers: u32,
    /// Claim-cycle runs, comma-separated: `assigned` (each worker creates a task assigned
    /// to itself) and/or `pool` (each creates a pool task; its poll claims whichever pool
    /// task is best, maybe another worker's).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "assigned,pool")]
    cycles: Vec<CycleKind>,
    /// `swarm serve` processes to start on the one scratch database (PostgreSQL: replicas
    /// sharing it, as in a scale-out deployment). Clients are dealt out over them in turn,
    /// and the trigger-latency task is created through another replica than the one the
    /// poll waits on. The exactly-once counts cover every replica.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16), conflicts_with = "url")]
    replicas: u32,
    /// Skip `GET /health` (the floor the poll is compared with): null polls only.
    #[arg(long)]
    no_health: bool,
    /// The scale run: before the hub starts, give its scratch database a history of this
    /// many finished tasks (with their events), written through the store in batches.
    #[arg(long, value_name = "TASKS", conflicts_with = "url",
        value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    fill: Option<u64>,
    /// The agents (offline) that finished the --fill tasks.
    #[arg(long, default_value_t = 10_000, requires = "fill",
        value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    fill_agents: u64,
    /// Print the results as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: Option<BenchCommand>,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Many agents waiting for work at once (runners' long-polls), tasks at a steady rate:
    /// wake latency, duplicates, lost, the hub's memory and CPU.
    #[command(long_about = FLEET_ABOUT)]
    Fleet(FleetArgs),
    /// One slice of a fleet's agents, in a process of its own (`fleet` starts it).
    #[command(hide = true)]
    FleetClient(FleetClientArgs),
    /// Soak a real hub for minutes under a mixed load: memory, errors and latency over time.
    #[command(long_about = SOAK_ABOUT)]
    Soak(SoakArgs),
    /// A real hub's memory: idle, with 1,000 parked long-polls, and after they end.
    #[command(long_about = MEMORY_ABOUT)]
    Memory(MemoryArgs),
    /// What the hub adds to every model call: each role's MCP tools, as the real CLIs send them.
    #[command(long_about = TOOLS_ABOUT)]
    Tools(ToolsArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendChoice {
    Sqlite,
    Postgres,
    Both,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.swarm {
        hub::use_swarm_program(path.clone());
    }
    match args.command {
        Some(BenchCommand::Fleet(fleet)) => return fleet::run(fleet).await,
        Some(BenchCommand::FleetClient(client)) => return fleet_client::run(client).await,
        Some(BenchCommand::Soak(soak)) => return soak::run(soak).await,
        Some(BenchCommand::Memory(memory)) => return memory::run(memory).await,
        Some(BenchCommand::Tools(tools)) => return tools::run(tools).await,
        None => {}
    }
    let plan = Plan {
        latency_samples: args.latency_samples as usize,
        latency_warmup: args.latency_warmup as usize,
        warmup: Duration::from_secs_f64(args.warmup_seconds),
        measure: Duration::from_secs_f64(args.seconds),
        concurrency: args.concurrency.iter().map(|&clients| clients as usize).collect(),
        workers: args.workers as usize,
        cycles: args.cycles.clone(),
        health: !args.no_health,
    };
    let machine = Machine::read();
    let mut runs = Vec::new();
    let outcome = bench_all(&args, &plan, &mut runs).await;
    // A failure on a later backend keeps the results of the earlier ones.
    if !runs.is_empty() || outcome.is_ok() {
        let report = Report { machine, plan, runs };
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", report.markdown());
        }
    }
    outcome
}

async fn bench_all(args: &BenchArgs, plan: &Plan, runs: &mut Vec<Run>) -> anyhow::Result<()> {
    if let Some(url) = &args.url {
        let target = Target::new(url, args.api_key.clone())?;
        runs.push(bench_hub(&target, format!("the running hub at {url}"), plan).await?);
        return Ok(());
    }
    for backend in backends(args)? {
        let scratch = hub::Scratch::create(&backend).await?;
        let filled = match args.fill {
            Some(tasks) => {
                let shape = fill::Shape { agents: args.fill_agents, tasks };
                eprintln!("bench: filling the database with {} agents and {tasks} tasks", shape.agents);
                match fill::fill(&scratch.database(), shape).await.context("--fill") {
                    Ok(filled) => Some((shape, filled)),
                    Err(err) => {
                        scratch.remove().await;
                        return Err(err);
                    }
                }
            }
            None => None,
        };
        eprintln!("bench: starting a hub on a scratch {} database", backend.name());
        let hub = SpawnedHub::start_on(scratch, args.replicas as usize).await?;
        let description = format!("{}, started by the bench", hub.description());
        let run = async {
            let filled = match filled {
                Some((shape, filled)) => {
                    fill::check(hub.target(), shape).await?;
                    Some(filled)
                }
                None => None,
            };
            let mut run = bench_hub(hub.target(), description, plan).await?;
            if let Some(mut filled) = filled {
                filled.bytes_after = fill::size(&hub.database()).await.ok();
                run.fill = Some(filled);
            }
            anyhow::Ok(run)
        }
        .await;
        hub.stop().await;
        runs.push(run?);
    }
    Ok(())
}

/// Which hubs to start: an explicit --backend must be satisfiable; without one,
/// PostgreSQL joins when a PostgreSQL URL is at hand.
fn backends(args: &BenchArgs) -> anyhow::Result<Vec<Backend>> {
    let url = args.database_url.as_deref().map(str::trim).filter(|url| !url.is_empty());
    let postgres_url = url.filter(|url| url.starts_with("postgres://") || url.starts_with("postgresql://"));
    let postgres = || -> anyhow::Result<Backend> {
        match postgres_url {
            Some(url) => Ok(Backend::Postgres { server_url: url.to_string() }),
            None if url.is_some() => bail!("--database-url (or DATABASE_URL) must be a postgres:// URL"),
            None => bail!("benching PostgreSQL needs --database-url postgres://... (or DATABASE_URL)"),
        }
    };
    Ok(match args.backend {
        Some(BackendChoice::Sqlite) => vec![Backend::Sqlite],
        Some(BackendChoice::Postgres) => vec![postgres()?],
        Some(BackendChoice::Both) => vec![Backend::Sqlite, postgres()?],
        None if postgres_url.is_some() => vec![Backend::Sqlite, postgres()?],
        None => vec![Backend::Sqlite],
    })
}

async fn bench_hub(target: &Target, description: String, plan: &Plan) -> anyhow::Result<Run> {
    let health: hub::Health = Http::new(target)
        .get("/health", None)
        .await
        .context("the hub does not answer GET /health; is it a swarm hub?")?;
    let backend = health.database.clone();
    let progress = |what: String| eprintln!("bench [{backend}]: {what}");
    let cpu_clock = cpu::CpuClock::start(target.pids());

    progress(format!(
        "trigger latency, {} samples after {} warm-up",
        plan.latency_samples, plan.latency_warmup
    ));
    let latency = measure::trigger_latency(target, plan).await.context("trigger latency")?;

    let window =
        format!("{:.1} s after {:.1} s warm-up", plan.measure.as_secs_f64(), plan.warmup.as_secs_f64());
    let mut null_polls = Vec::new();
    let mut health_floor = Vec::new();
    for &clients in &plan.concurrency {
        if plan.health {
            progress(format!("null polls and GET /health taking turns, {clients} concurrent, {window} each"));
            let (polls, health) = measure::null_polls_and_health(target, plan, clients)
                .await
                .context("null polls and GET /health")?;
            null_polls.push(polls);
            health_floor.push(health);
        } else {
            progress(format!("null polls, {clients} concurrent, {window}"));
            null_polls.push(measure::null_polls(target, plan, clients).await.context("null polls")?);
        }
    }
    let mut claim_cycles = Vec::new();
    for &kind in &plan.cycles {
        progress(format!("claim cycles ({}), {} workers, {window}", kind.name(), plan.workers));
        claim_cycles.push(measure::claim_cycles(target, plan, kind).await.context("claim cycles")?);
    }
    let cpu = cpu_clock.and_then(|clock| clock.stop());
    Ok(Run {
        backend: health.database,
        version: health.version,
        hub: description,
        latency,
        null_polls,
        health: health_floor,
        claim_cycles,
        cpu,
        fill: None,
    })
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    let seconds = parse_seconds_or_zero(text)?;
    if seconds < 0.001 {
        return Err("must be at least 0.001 seconds".to_string());
    }
    Ok(seconds)
}

fn parse_seconds_or_zero(text: &str) -> Result<f64, String> {
    let seconds: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !seconds.is_finite() || !(0.0..=3_600.0).contains(&seconds) {
        return Err(format!("{text} must be between 0 and 3600 seconds"));
    }
    Ok(seconds)
}
