//! Bytes per finished task, and the database in steady state under retention.
//!
//! Runs N work cycles on a fresh SQLite file through the store (create a pool task, claim
//! it, start it, append session log lines, finish it), on a simulated clock that moves a
//! fixed step per cycle, and runs the hub's own retention pass (`Service::retention_pass`,
//! the same code `swarm serve` runs every ten minutes) every simulated ten minutes with
//! windows in simulated hours. Prints the file's size as cycles go by, with and without
//! retention. The bytes a task takes do not depend on the build profile; the time does.
//!
//! ```sh
//! cargo run -p swarm-hub --example retention_steady_state -- 60000 [agents] [lines] [task hours]
//! ```

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::{Duration, Instant},
};

use swarm_domain::{
    agent::NewAgent,
    id::AgentId,
    poll::TriggerKind,
    retention::RetentionPolicy,
    session::NewSessionLogs,
    task::{FinishOutcome, NewTask, TaskAction, TaskDraft},
    time::Timestamp,
};
use swarm_service::{Service, clock::Clock};
use swarm_store::Store;
use swarm_store_sqlite::SqliteStore;

/// Simulated time per cycle: 2 s, so 1,800 tasks finish per simulated hour.
const STEP_MILLIS: i64 = 2_000;
const HOUR: Duration = Duration::from_secs(3600);

struct SimulatedClock(AtomicI64);

impl Clock for SimulatedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(self.0.load(Ordering::SeqCst)).expect("a time")
    }
}

/// The database file alone: the WAL is a fixed-size journal that the checkpointer copies
/// back every second and that is reused from its start (its file keeps its high-water
/// mark, a few MB, whatever the database holds).
fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1_048_576.0)
}

async fn run(cycles: u64, agents: usize, lines: usize, policy: Option<RetentionPolicy>) -> (u64, u64) {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let path = dir.path().join("swarm.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.expect("open"));
    let clock = Arc::new(SimulatedClock(AtomicI64::new(1_767_225_600_000)));
    let service = Service::new(store.clone()).with_clock(clock.clone());
    let lead = NewAgent::parse(AgentId::new_v7(), "lead", true, None, None, None, Some(1)).expect("a lead");
    store.agent_register(&lead, clock.now()).await.expect("register the lead");
    let lead = lead.id;
    let mut workers = Vec::new();
    for n in 0..agents {
        let agent =
            NewAgent::parse(AgentId::new_v7(), &format!("worker-{n}"), false, None, None, None, Some(1))
                .expect("an agent");
        store.agent_register(&agent, clock.now()).await.expect("register");
        workers.push(agent.id);
    }
    let line = "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"".to_string()
        + &"x".repeat(140)
        + "\"}]}}";
    let empty = size(&path);
    let label = if policy.is_some() { "with retention" } else { "without retention" };
    println!(
        "\n{label}: {cycles} cycles, {agents} agents, {lines} log lines of {} bytes per task",
        line.len()
    );
    println!("| cycles | simulated hours | database file MB | bytes per finished task so far |");
    println!("|---:|---:|---:|---:|");
    let started = Instant::now();
    let report_every = (cycles / 12).max(1);
    let passes_every = 300; // 10 simulated minutes
    let mut done = 0;
    while done < cycles {
        let batch = (agents as u64).min(cycles - done);
        let mut group = tokio::task::JoinSet::new();
        for worker in workers.iter().take(batch as usize).copied() {
            let (store, clock, line) = (store.clone(), clock.clone(), line.clone());
            group.spawn(async move {
                let now = || clock.now();
                let draft = TaskDraft { task: "steady work".into(), ..TaskDraft::default() };
                let task = store.task_create(&NewTask::parse(draft, None).unwrap(), now()).await.unwrap();
                let finish = TaskAction::Finish {
                    assignee: Some(worker),
                    outcome: FinishOutcome::Completed { output: Some("done".into()) },
                };
                for action in [TaskAction::Claim { agent: worker }, TaskAction::Start { agent: worker }] {
                    store.task_apply(task.id, &action.change(), Some(worker), now()).await.unwrap();
                }
                let logs = NewSessionLogs::parse(
                    format!("session-{}", task.id),
                    0,
                    Some(task.id),
                    Some("claude".into()),
                    vec![line; lines],
                )
                .unwrap();
                store.session_logs_append(&logs, now()).await.unwrap();
                store.task_apply(task.id, &finish.change(), Some(worker), now()).await.unwrap();
            });
        }
        while let Some(joined) = group.join_next().await {
            joined.expect("a cycle");
        }
        for _ in 0..batch {
            done += 1;
            clock.0.fetch_add(STEP_MILLIS, Ordering::SeqCst);
            if let Some(policy) = &policy
                && done % passes_every == 0
            {
                // The lead hears of finished tasks, as a lead's runner polls for them.
                let kinds = [TriggerKind::TasksFinished];
                let lease = clock.now().plus_millis(60_000);
                while store.poll_claim(lead, &kinds, clock.now(), lease).await.expect("poll").is_some() {}
                service.retention_pass(policy).await.expect("a retention pass");
            }
            if done % report_every == 0 || done == cycles {
                let bytes = size(&path);
                println!(
                    "| {done} | {:.1} | {} | {} |",
                    (done as i64 * STEP_MILLIS) as f64 / 3_600_000.0,
                    mb(bytes),
                    (bytes - empty) / done
                );
            }
        }
    }
    eprintln!("{label}: {cycles} cycles in {:.1} s", started.elapsed().as_secs_f64());
    (empty, size(&path))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).map(|arg| arg.parse::<u64>().expect("a number"));
    let cycles = args.next().unwrap_or(60_000);
    let agents = args.next().unwrap_or(16) as usize;
    let lines = args.next().unwrap_or(10) as usize;
    // Finished tasks themselves go after this many simulated hours (0: kept, the default).
    let finished_tasks_hours = args.next().filter(|hours| *hours > 0).map(|hours| hours as u32);
    // Windows in simulated hours: logs 4 h, events and hand-outs 8 h, mail 24 h.
    let policy = RetentionPolicy {
        session_logs: Some(HOUR * 4),
        events: Some(HOUR * 8),
        delivered_triggers: Some(HOUR * 8),
        read_mail: Some(HOUR * 24),
        finished_tasks: finished_tasks_hours.map(|hours| HOUR * hours),
    };
    let (empty, without) = run(cycles, agents, lines, None).await;
    let (_, with) = run(cycles, agents, lines, Some(policy)).await;
    println!(
        "\nbytes per finished task: {} without retention, {} with (file {} MB against {} MB)",
        (without - empty) / cycles,
        (with - empty) / cycles,
        mb(with),
        mb(without)
    );
}
