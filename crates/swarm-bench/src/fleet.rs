//! `swarm-bench fleet`: many agents connected at once, each waiting for work as our
//! runner does, and tasks created for them at a steady rate. The agents live in child
//! processes (`fleet-client`, [`super::fleet_client`]) so a fleet can pass one process's
//! descriptor limit, and connect from several loopback addresses so it can pass one
//! address's ephemeral ports. The parent starts the hub (replicas on one PostgreSQL
//! database with `--replicas`), reads its memory and CPU from `/proc`, creates the tasks
//! and matches every delivery the clients report with its creation.

use std::{
    collections::HashMap,
    process::Stdio,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, bail};
use clap::Args;
use serde::Deserialize;
use serde_json::json;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, Command},
    sync::mpsc,
    time::Instant,
};

use super::{
    fleet_client::{self, API_KEY_ENV},
    fleet_proc::{database_ticks, descriptor_limit, heartbeat_writes, hub_ticks, parked_polls},
    fleet_report::{FleetReport, Readings, percentile},
    hub::{Backend, Database, Http, Scratch, SpawnedHub, Target},
};

/// The long help of `swarm-bench fleet`.
pub const FLEET_ABOUT: &str = "Many agents connected to a real hub at once, as runners waiting for work.\n\n\
    Starts the `swarm` binary as `swarm serve` on a scratch database (SQLite in a temporary folder, \
    or with --database-url a new PostgreSQL database, dropped after; --replicas starts several \
    hubs on it and deals the agents out over them), registers --agents agents and parks one \
    long-poll for each on its own connection, with the runner's headers (Authorization, \
    X-Agent-ID, X-Runner-ID, its User-Agent), from child processes (`fleet-client`, \
    --agents-per-client each) bound to loopback source addresses 127.0.0.2, 127.0.0.3, ... \
    (--agents-per-address each). An empty poll is sent again at once; an agent that gets a task \
    pings, finishes it and polls again, as the runner does. Once the hubs count every poll \
    parked it creates tasks for random waiting agents at --rate a second for --seconds, with a \
    burst of --burst at once half-way, and reports: agents parked, wake latency (task created → \
    its agent's poll answered) p50/p99, duplicates (a task delivered twice) and lost (created, \
    never delivered), each hub's memory idle and parked (VmRSS and anonymous, /proc), hub CPU per \
    task (and the PostgreSQL server's, when it runs on this machine), heartbeats per second. \
    Needs 127.0.0.0/8 on loopback (Linux has it). Progress goes to stderr, the report (Markdown, \
    or --json: one line) to stdout. Build with --release.";

/// 10 million tasks a day.
const DEFAULT_RATE: f64 = 10_000_000.0 / 86_400.0;
/// Descriptors a hub keeps for itself beyond its connections (database, listener, ...).
const HUB_SPARE_DESCRIPTORS: u64 = 256;

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Agents in the fleet, each with one parked long-poll on its own connection.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    agents: u64,
    /// Seconds tasks are created for (fractions allowed).
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Tasks created a second, for random waiting agents. Default: 10 million a day.
    #[arg(long, default_value_t = DEFAULT_RATE)]
    rate: f64,
    /// Tasks created at once half-way through. Default: a tenth of the agents, at most 1,000.
    #[arg(long)]
    burst: Option<u64>,
    /// `swarm serve` processes on the one database (PostgreSQL only); agent i talks to
    /// replica i mod R, and each task is created through another replica than its agent's.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    replicas: u32,
    /// A PostgreSQL server (postgres:// URL) to create the scratch database on, with a role
    /// that may CREATE DATABASE. Without it, SQLite.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Agents per client process (each holds one descriptor per agent).
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    agents_per_client: u64,
    /// Agents per loopback source address. An address has about 28,000 ephemeral ports,
    /// and a closed connection keeps its port for a minute (TIME_WAIT): a run right after
    /// another needs room for both.
    #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    agents_per_address: u64,
    /// Each poll's `?wait=` in seconds: the runner's default.
    #[arg(long, default_value_t = 30.0)]
    wait: f64,
    /// Seconds the polls may take to be parked before the run goes on with those that are.
    #[arg(long)]
    park_within: Option<f64>,
    /// Print the report as one line of JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

/// What a client process reported, one line.
enum Event {
    Registered,
    Got { agent: u64, task: String, at_ns: u128 },
    Idle(u64),
    Stat { client: usize, polls: u64, pings: u64, errors: u64 },
    Said(String),
    Gone(usize),
}

struct Created {
    agent: u64,
    at_ns: u128,
    burst: bool,
}

#[derive(Deserialize)]
struct TaskAnswer {
    id: String,
}

pub async fn run(args: FleetArgs) -> anyhow::Result<()> {
    if !(args.rate > 0.0 && args.rate.is_finite() && args.seconds > 0.0 && args.wait >= 1.0) {
        bail!("--rate and --seconds must be above 0, --wait at least 1");
    }
    let backend = Backend::from_postgres_flag(args.database_url.as_deref())?;
    if args.replicas > 1 && matches!(backend, Backend::Sqlite) {
        bail!("--replicas needs PostgreSQL (--database-url postgres://...): replicas share one database");
    }
    let per_replica = args.agents.div_ceil(u64::from(args.replicas));
    let descriptors = descriptor_limit().unwrap_or(u64::MAX);
    if per_replica + HUB_SPARE_DESCRIPTORS > descriptors {
        eprintln!(
            "fleet: warning: {per_replica} agents a replica need more than the {descriptors} descriptors a \
             process may open here (ulimit -n); the polls beyond it fail: give more --replicas"
        );
    }
    let scratch = Scratch::create(&backend).await?;
    let database = scratch.database();
    eprintln!("fleet: starting {} hub(s) on a scratch {} database", args.replicas, backend.name());
    let max_connections = (per_replica + HUB_SPARE_DESCRIPTORS).to_string();
    let hub = SpawnedHub::start_on_with_env(
        scratch,
        args.replicas as usize,
        &[("MAX_CONNECTIONS", &max_connections)],
    )
    .await?;
    let outcome = fleet(&args, &hub, &database).await;
    hub.stop().await;
    let report = outcome?;
    if args.json {
        println!("{}", serde_json::to_string(&report.json())?);
    } else {
        print!("{}", report.markdown());
    }
    Ok(())
}

async fn fleet(args: &FleetArgs, hub: &SpawnedHub, database: &Database) -> anyhow::Result<FleetReport> {
    let replicas = hub.target().all_replicas();
    let pids: Vec<u32> = hub.target().pids();
    let seed: u32 = rand_seed();
    let (events, mut inbox) = mpsc::unbounded_channel();
    let mut clients = Vec::new();
    let mut inputs = Vec::new();
    let mut from = 0;
    while from < args.agents {
        let to = (from + args.agents_per_client).min(args.agents);
        let (child, stdin) = start_client(args, &replicas, seed, from, to, clients.len(), &events)?;
        clients.push(child);
        inputs.push(stdin);
        from = to;
    }
    let outcome = drive(args, &replicas, &pids, database, seed, &mut inbox, &mut inputs).await;
    drop(inputs);
    for child in &mut clients {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    outcome
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    args: &FleetArgs,
    replicas: &[Target],
    pids: &[u32],
    database: &Database,
    seed: u32,
    inbox: &mut mpsc::UnboundedReceiver<Event>,
    inputs: &mut [ChildStdin],
) -> anyhow::Result<FleetReport> {
    let began = Instant::now();
    let mut registered = 0;
    while registered < inputs.len() {
        match inbox.recv().await {
            Some(Event::Registered) => registered += 1,
            Some(Event::Said(line)) => eprintln!("fleet: client: {line}"),
            Some(Event::Gone(client)) => bail!("client {client} exited before it registered its agents"),
            Some(_) => {}
            None => bail!("the clients are gone"),
        }
    }
    eprintln!("fleet: {} agents registered in {:.1} s", args.agents, began.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = Readings::of(pids)?;
    for input in inputs.iter_mut() {
        input.write_all(b"park\n").await.context("cannot tell a client to park its polls")?;
        input.flush().await?;
    }

    // Parked: every replica's gauge, until they add up to the fleet or time runs out.
    let operators: Vec<Http> = replicas.iter().map(Http::new).collect();
    let park_within = Duration::from_secs_f64(args.park_within.unwrap_or(60.0 + args.agents as f64 / 500.0));
    let parking = Instant::now();
    let mut parked = 0;
    let mut told = Instant::now();
    let mut said = Vec::new();
    loop {
        while let Ok(event) = inbox.try_recv() {
            if let Event::Said(line) = event {
                eprintln!("fleet: client: {line}");
                said.push(line);
            }
        }
        parked = parked.max(parked_polls(&operators).await?);
        if parked >= args.agents || parking.elapsed() >= park_within {
            break;
        }
        if told.elapsed() >= Duration::from_secs(5) {
            told = Instant::now();
            eprintln!("fleet: {parked} of {} polls parked", args.agents);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let parked_memory = Readings::of(pids)?;
    eprintln!(
        "fleet: {parked} of {} polls parked after {:.1} s; hub VmRSS {:.1} MB",
        args.agents,
        parking.elapsed().as_secs_f64(),
        parked_memory.rss_kb() as f64 / 1024.0
    );

    // Tasks: a steady rate, and a burst half-way.
    let burst = args.burst.unwrap_or((args.agents / 10).clamp(1, 1_000));
    let mut waiting: Vec<u64> = (0..args.agents).collect();
    let mut created: HashMap<String, Created> = HashMap::new();
    let mut deliveries: Vec<(u64, String, u128)> = Vec::new();
    let (made, mut made_inbox) = mpsc::unbounded_channel::<anyhow::Result<(String, Created)>>();
    // A few keep-alive connections per replica to create tasks with, taken in turn.
    const CREATORS_PER_REPLICA: usize = 8;
    let creators: Vec<Vec<Http>> = replicas
        .iter()
        .map(|replica| (0..CREATORS_PER_REPLICA).map(|_| Http::new(replica)).collect())
        .collect();
    let mut next_creator = 0;
    let mut create_failures = 0u64;
    let mut first_failure = None;
    let mut skipped = 0u64;
    let mut stats: HashMap<usize, (u64, u64, u64)> = HashMap::new();
    let heartbeat_writes_before = heartbeat_writes(&operators).await;
    let stats_before = stats.clone();
    let cpu_before = (hub_ticks(pids), database_ticks(database));
    let window = Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut burst_sent = false;
    let mut burst_began_ns = None;
    let mut progress = Instant::now();
    let mut rng = seed as u64 | 1;
    let mut asked = 0u64;
    let mut create = |agent: u64, is_burst: bool, asked: &mut u64| {
        // Through another replica than the agent's, when there are several.
        let replica = (agent as usize + 1) % replicas.len();
        let http = creators[replica][next_creator % CREATORS_PER_REPLICA].clone();
        next_creator += 1;
        *asked += 1;
        let made = made.clone();
        let id = fleet_client::agent_id(seed, agent);
        tokio::spawn(async move {
            let at_ns = now_ns();
            let body = json!({"task": format!("fleet task for agent {agent}"), "agentId": id});
            let answer = http.post::<TaskAnswer>("/api/tasks", None, &body).await;
            let _ = made.send(answer.map(|task| (task.id, Created { agent, at_ns, burst: is_burst })));
        });
    };
    let mut handle = |event: Event,
                      waiting: &mut Vec<u64>,
                      deliveries: &mut Vec<(u64, String, u128)>,
                      stats: &mut HashMap<usize, (u64, u64, u64)>| match event {
        Event::Got { agent, task, at_ns } => deliveries.push((agent, task, at_ns)),
        Event::Idle(agent) => waiting.push(agent),
        Event::Stat { client, polls, pings, errors } => {
            stats.insert(client, (polls, pings, errors));
        }
        Event::Said(line) => {
            eprintln!("fleet: client: {line}");
            said.push(line);
        }
        Event::Gone(client) => eprintln!("fleet: client {client} exited"),
        Event::Registered => {}
    };
    let mut cpu_after = None;
    let mut heartbeat_writes_after = None;
    let mut stats_after = None;
    let grace = Duration::from_secs_f64(args.wait + 10.0);
    let mut ended_at = None;
    loop {
        let creating = started.elapsed() < window;
        if !creating && ended_at.is_none() {
            ended_at = Some(Instant::now());
            cpu_after = Some((hub_ticks(pids), database_ticks(database)));
            heartbeat_writes_after = heartbeat_writes(&operators).await;
            stats_after = Some(stats.clone());
            eprintln!("fleet: {asked} tasks asked for; waiting for the last deliveries");
        }
        if let Some(ended) = ended_at {
            let answered = created.len() as u64 + create_failures;
            let settled = answered >= asked && deliveries.len() >= created.len();
            if settled || ended.elapsed() >= grace {
                break;
            }
        }
        if progress.elapsed() >= Duration::from_secs(5) {
            progress = Instant::now();
            eprintln!(
                "fleet: {:.0} s: {} tasks created, {} delivered, {} agents waiting",
                started.elapsed().as_secs_f64(),
                created.len(),
                deliveries.len(),
                waiting.len()
            );
        }
        tokio::select! {
            _ = ticks.tick(), if creating => {
                if !burst_sent && started.elapsed() >= window / 2 {
                    burst_sent = true;
                    burst_began_ns = Some(now_ns());
                    for _ in 0..burst.min(waiting.len() as u64) {
                        let agent = take_random(&mut waiting, &mut rng).expect("counted");
                        create(agent, true, &mut asked);
                    }
                }
                match take_random(&mut waiting, &mut rng) {
                    Some(agent) => create(agent, false, &mut asked),
                    None => skipped += 1,
                }
            }
            Some(made) = made_inbox.recv() => match made {
                Ok((task, creation)) => { created.insert(task, creation); }
                Err(error) => {
                    create_failures += 1;
                    first_failure.get_or_insert_with(|| format!("{error:#}"));
                }
            },
            Some(event) = inbox.recv() => handle(event, &mut waiting, &mut deliveries, &mut stats),
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    let end_memory = Readings::of(pids)?;
    let seconds = ended_at.map_or(window, |ended| ended - started).as_secs_f64();

    // Match the deliveries with the creations. A steady task created while the burst was
    // being delivered waits behind it: its latency is the burst's, reported apart.
    let burst_ended_ns = deliveries
        .iter()
        .filter(|(_, task, _)| created.get(task.as_str()).is_some_and(|creation| creation.burst))
        .map(|(_, _, at_ns)| *at_ns)
        .max();
    let in_burst = |at_ns: u128| {
        burst_began_ns.zip(burst_ended_ns).is_some_and(|(began, ended)| (began..=ended).contains(&at_ns))
    };
    let mut seen: HashMap<&str, u32> = HashMap::new();
    let (mut steady, mut bursty, mut beside_burst) = (Vec::new(), Vec::new(), Vec::new());
    let (mut duplicates, mut strangers, mut misdelivered) = (0u64, 0u64, 0u64);
    for (agent, task, at_ns) in &deliveries {
        let Some(creation) = created.get(task.as_str()) else {
            strangers += 1;
            continue;
        };
        let count = seen.entry(task.as_str()).or_default();
        *count += 1;
        if *count > 1 {
            duplicates += 1;
            continue;
        }
        if *agent != creation.agent {
            misdelivered += 1;
        }
        let ms = at_ns.saturating_sub(creation.at_ns) as f64 / 1e6;
        if creation.burst {
            bursty.push(ms);
        } else if in_burst(creation.at_ns) {
            beside_burst.push(ms);
        } else {
            steady.push(ms);
        }
    }
    let lost = created.keys().filter(|task| !seen.contains_key(task.as_str())).count() as u64;
    let sum = |stats: &HashMap<usize, (u64, u64, u64)>| {
        stats.values().fold((0, 0, 0), |acc, s| (acc.0 + s.0, acc.1 + s.1, acc.2 + s.2))
    };
    let (polls0, pings0, _) = sum(&stats_before);
    let (polls1, pings1, _) = sum(stats_after.as_ref().unwrap_or(&stats));
    let (_, _, errors) = sum(&stats);
    let tasks = created.values().count() as f64;
    let (cpu0, cpu1) = (cpu_before, cpu_after.unwrap_or_default());
    let per_task = |before: Option<u64>, after: Option<u64>| {
        let ticks = after?.checked_sub(before?)?;
        (tasks > 0.0).then(|| ticks as f64 * 10.0 / tasks)
    };
    Ok(FleetReport {
        backend: match database {
            Database::SqliteFile(_) => "sqlite".into(),
            Database::Postgres { .. } => "postgres".into(),
        },
        replicas: replicas.len(),
        agents: args.agents,
        clients: inputs.len(),
        source_addresses: args.agents.div_ceil(args.agents_per_address),
        parked,
        seconds,
        rate: args.rate,
        tasks_created: created.len() as u64,
        create_failures,
        first_create_failure: first_failure,
        skipped_no_agent_waiting: skipped,
        burst,
        wake_p50_ms: percentile(&mut steady, 50.0),
        wake_p99_ms: percentile(&mut steady, 99.0),
        wake_max_ms: percentile(&mut steady, 100.0),
        burst_p50_ms: percentile(&mut bursty, 50.0),
        burst_p99_ms: percentile(&mut bursty, 99.0),
        beside_burst_tasks: beside_burst.len() as u64,
        beside_burst_p99_ms: percentile(&mut beside_burst, 99.0),
        burst_seconds: burst_began_ns
            .zip(burst_ended_ns)
            .map(|(began, ended)| ended.saturating_sub(began) as f64 / 1e9),
        duplicates,
        lost,
        strangers,
        misdelivered,
        client_errors: errors,
        idle,
        parked_memory,
        end_memory,
        hub_cpu_ms_per_task: per_task(cpu0.0, cpu1.0),
        database_cpu_ms_per_task: per_task(cpu0.1, cpu1.1),
        heartbeats_sent_per_second: (polls1 + pings1).saturating_sub(polls0 + pings0) as f64 / seconds,
        heartbeat_writes_per_second: heartbeat_writes_before
            .zip(heartbeat_writes_after)
            .map(|(before, after)| (after - before) / seconds),
    })
}

fn start_client(
    args: &FleetArgs,
    replicas: &[Target],
    seed: u32,
    from: u64,
    to: u64,
    number: usize,
    events: &mpsc::UnboundedSender<Event>,
) -> anyhow::Result<(Child, ChildStdin)> {
    let program = std::env::current_exe().context("cannot find this program to start its clients")?;
    let urls: Vec<&str> = replicas.iter().map(Target::base_url).collect();
    let mut command = Command::new(program);
    command
        .arg("fleet-client")
        .arg(format!("--urls={}", urls.join(",")))
        .arg(format!("--seed={seed}"))
        .arg(format!("--from={from}"))
        .arg(format!("--to={to}"))
        .arg(format!("--agents-per-address={}", args.agents_per_address))
        .arg(format!("--wait={}", args.wait))
        .env(
            API_KEY_ENV,
            replicas
                .iter()
                .map(|replica| replica.api_key().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(","),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command.spawn().context("cannot start a fleet-client process")?;
    let stdin = child.stdin.take().context("the client's stdin is not piped")?;
    let stdout = child.stdout.take().context("the client's stdout is not piped")?;
    let events = events.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(event) = parse_event(&line, number) {
                let _ = events.send(event);
            }
        }
        let _ = events.send(Event::Gone(number));
    });
    Ok((child, stdin))
}

fn parse_event(line: &str, client: usize) -> Option<Event> {
    let mut words = line.splitn(4, ' ');
    Some(match words.next()? {
        "registered" => Event::Registered,
        "got" => Event::Got {
            agent: words.next()?.parse().ok()?,
            task: words.next()?.to_string(),
            at_ns: words.next()?.parse().ok()?,
        },
        "idle" => Event::Idle(words.next()?.parse().ok()?),
        "stat" => Event::Stat {
            client,
            polls: words.next()?.parse().ok()?,
            pings: words.next()?.parse().ok()?,
            errors: words.next()?.parse().ok()?,
        },
        "error" => Event::Said(line.to_string()),
        _ => return None,
    })
}

fn take_random(waiting: &mut Vec<u64>, rng: &mut u64) -> Option<u64> {
    if waiting.is_empty() {
        return None;
    }
    // xorshift: a random agent, cheaply; the bench needs spread, not secrecy.
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let index = (*rng % waiting.len() as u64) as usize;
    Some(waiting.swap_remove(index))
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos()
}

fn rand_seed() -> u32 {
    let bytes = uuid::Uuid::new_v4();
    u32::from_le_bytes(bytes.as_bytes()[..4].try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_lines_are_read() {
        assert!(matches!(parse_event("got 7 abc 123", 0), Some(Event::Got { agent: 7, at_ns: 123, .. })));
        assert!(matches!(parse_event("stat 1 2 3", 4), Some(Event::Stat { client: 4, errors: 3, .. })));
        assert!(parse_event("nonsense", 0).is_none());
    }
}
