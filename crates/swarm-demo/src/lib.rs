//! `swarm demo`: the whole system at work in a few seconds, with no LLM and no network.
//!
//! One process holds the cast (`crew.rs`): a hub on a temporary SQLite file, served on a
//! loopback port, and a lead and two workers, each a real runner whose agent CLI is this
//! program's scripted `stand-in-agent` (a child process per run, acting through the
//! hub's MCP endpoint like any agent). The demo sends the tasks of its script
//! (`story.rs`) through each route (an offer, the pool, the lead who delegates), tells
//! what happens as the hub records it (`narrator.rs`, woken by the service's change
//! stream), and ends with a summary (`report.rs`) and a verdict: exit 0 only when every
//! task ended as scripted.
//!
//! The hub runs in this process rather than as a child `swarm serve` so that the demo
//! can listen to the service's changes instead of polling, and has nothing to spawn,
//! parse or clean up for it; what the runners and agents talk to is still the real
//! HTTP and MCP application of `swarm serve` (`serve::hub_app`).

mod crew;
mod narrator;
mod report;
pub mod stand_in;
mod story;

use std::{collections::HashMap, time::Duration};

use anyhow::bail;
use clap::Args;
use swarm_domain::{
    agent::Agent,
    event::EventType,
    task::{Task, TaskStatus},
    time::Timestamp,
};
use swarm_service::{Caller, TaskListQuery};
use tokio::{sync::broadcast::error::RecvError, time::Instant};

use self::{
    crew::{Crew, CrewSettings, DemoHub},
    narrator::Narrator,
    report::{Report, Row, Summary},
    story::{Cast, STEPS, Tracked},
};

pub const LONG_ABOUT: &str = "Watch a whole crew at work in a few seconds, with no LLM and no network.\n\n\
    The demo starts a hub on a temporary database, then a lead and two workers: real runners (what \
    `swarm lead` and `swarm worker` run) whose agent CLI is a scripted stand-in. It sends a task offered \
    to a worker (reviewed, accepted, done), tasks to the pool (claimed by whichever worker is free; one \
    fails, to show a failure and its reason), and a task for the lead, who delegates it to a worker with \
    the send-task tool and is told when the work is finished. Every step is shown as the hub records it, \
    then a summary of the tasks and agent runs. Exits 0 when every task ended as scripted.";

/// How long the demo waits between two tasks it sends, so the story stays readable.
const STEP_GAP: Duration = Duration::from_millis(400);
/// How often the demo looks at the hub even when no change was announced.
const LOOK_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Give up after this many seconds (the demo takes about five)
    #[arg(long, default_value_t = 60, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3_600))]
    timeout: u64,
    /// Port of the demo's hub on 127.0.0.1 (0 picks a free one)
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Keep the demo's folder (the database and the runners' logs) and print where it is
    #[arg(long)]
    keep: bool,
    /// How long each stand-in agent run pretends to think, in milliseconds
    #[arg(long, default_value_t = 800, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pace: u64,
    /// Also show the runners' own lines (on stderr)
    #[arg(long)]
    verbose: bool,
    /// Print one JSON object per line (each step, then the summary) instead of text
    #[arg(long)]
    json: bool,
}

/// Why the demo stopped watching.
enum Ending {
    /// Nothing left to wait for.
    Settled,
    TimedOut,
    Interrupted,
    /// A runner ended by itself: which, and why.
    RunnerStopped(String, String),
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    swarm_hub::init_logging("text", "warn");
    let started = Timestamp::now();
    let clock = Instant::now();
    let report = Report::new(args.json);
    let dir = tempfile::Builder::new().prefix("swarm-demo-").tempdir()?;
    let hub = DemoHub::start(&dir.path().join("swarm.db"), args.port).await?;
    report.header(&hub.url, dir.path());

    let settings = CrewSettings {
        pace: Duration::from_millis(args.pace),
        runs_dir: dir.path().join("runs"),
        log_dir: dir.path().join("logs"),
        fail_marker: story::FAIL_MARKER,
        verbose: args.verbose,
    };
    std::fs::create_dir_all(&settings.runs_dir)?;
    let mut crew = Crew::start(&hub, &settings)?;
    report.note(clock.elapsed(), "starting the crew: lead, worker-1, worker-2");
    let mut narrator = Narrator::new(started);
    let watch = Watch { hub: &hub, report, clock, deadline: clock + Duration::from_secs(args.timeout) };
    let (ending, sent) = match watch.play(&mut crew, &mut narrator).await {
        Ok(played) => played,
        Err(err) => {
            crew.stop(false).await;
            hub.stop().await;
            return Err(err);
        }
    };

    let cast = cast(&crew);
    let mut problems = match &ending {
        Ending::Settled => Vec::new(),
        Ending::TimedOut => vec![format!("the demo did not finish within {} s (--timeout)", args.timeout)],
        Ending::Interrupted => vec!["interrupted".to_string()],
        Ending::RunnerStopped(name, why) => vec![format!("{name}'s runner stopped early: {why}")],
    };
    report.note(clock.elapsed(), "stopping the crew, then the hub");
    // After a failure nobody waits for the runs still under way: their tasks are paused.
    crew.stop(matches!(ending, Ending::Settled)).await;
    // The last word comes from the hub, after every runner has settled its runs.
    let (_, tasks) = watch.look(&mut narrator).await?;
    hub.stop().await;

    problems.extend(story::problems(&sent, &tasks, &cast));
    let mut rows: Vec<Row<'_>> = tasks
        .iter()
        .filter_map(|task| {
            let route = story::route_of(task, &sent, &cast)?;
            let agent = task.agent_id.map_or_else(|| "-".to_string(), |id| narrator.name(Some(id)));
            Some(Row { route, task, agent })
        })
        .collect();
    rows.sort_by_key(|row| row.task.created_at);
    let runs = report::count_runs(&settings.runs_dir)
        .into_iter()
        .map(|(agent, n)| (narrator.name(Some(agent)), n))
        .collect();
    let kept = args.keep.then(|| dir.keep());
    let summary = Summary { rows, runs, problems, elapsed: clock.elapsed(), kept };
    report.summary(&summary);
    if !summary.problems.is_empty() {
        bail!("the demo did not go as scripted ({} problem(s) listed above)", summary.problems.len());
    }
    Ok(())
}

/// The demo watching its crew: sends the script's tasks, tells what happens.
struct Watch<'a> {
    hub: &'a DemoHub,
    report: Report,
    clock: Instant,
    deadline: Instant,
}

impl Watch<'_> {
    /// Until nothing is left to wait for, the deadline, Ctrl-C, or a runner that stops.
    async fn play(&self, crew: &mut Crew, narrator: &mut Narrator) -> anyhow::Result<(Ending, Vec<Tracked>)> {
        let cast = cast(crew);
        let mut changes = self.hub.service.subscribe();
        let mut announcing = true;
        let mut sent: Vec<Tracked> = Vec::new();
        let mut next_step_at: Option<Instant> = None;
        let mut looks = tokio::time::interval(LOOK_EVERY);
        loop {
            let (agents, tasks) = self.look(narrator).await?;
            let crew_ready =
                crew.members.iter().all(|member| agents.iter().any(|agent| agent.id == member.agent_id));
            if crew_ready && next_step_at.is_none() && sent.is_empty() {
                self.report.note(self.clock.elapsed(), "the crew is waiting for work: sending the tasks");
                next_step_at = Some(Instant::now());
            }
            if story::settled(&sent, &tasks, &cast) {
                self.report.note(self.clock.elapsed(), "every task has ended and the lead has been told");
                return Ok((Ending::Settled, sent));
            }
            let step_due = next_step_at.unwrap_or(self.deadline);
            let step_ready = next_step_at.is_some()
                && STEPS
                    .get(sent.len())
                    .is_some_and(|step| !step.after_delegation || story::has_delegated(&sent, &tasks, &cast));
            tokio::select! {
                change = changes.recv(), if announcing => {
                    // Several changes make one look; a lagging receiver just looks again.
                    if matches!(change, Err(RecvError::Closed)) {
                        announcing = false;
                    }
                    while changes.try_recv().is_ok() {}
                }
                _ = looks.tick() => {}
                _ = tokio::time::sleep_until(step_due), if step_ready => {
                    let step = STEPS[sent.len()];
                    let draft = story::draft(&step, &cast);
                    let task = self.hub.service.task_create(Caller::Operator, draft).await?;
                    sent.push(Tracked { route: step.route, task_id: task.id, expected: step.expected });
                    next_step_at = (sent.len() < STEPS.len()).then(|| Instant::now() + STEP_GAP);
                }
                (name, why) = crew.runner_stopped() => return Ok((Ending::RunnerStopped(name, why), sent)),
                _ = tokio::time::sleep_until(self.deadline) => return Ok((Ending::TimedOut, sent)),
                _ = tokio::signal::ctrl_c() => return Ok((Ending::Interrupted, sent)),
            }
        }
    }

    /// Reads the agents and tasks and tells what changed since the last look.
    async fn look(&self, narrator: &mut Narrator) -> anyhow::Result<(Vec<Agent>, Vec<Task>)> {
        let service = &self.hub.service;
        let agents = service.agent_list().await?;
        let (tasks, _) =
            service.task_list(TaskListQuery { limit: Some(1000), ..TaskListQuery::default() }).await?;
        let mut created_as = HashMap::new();
        for task in tasks.iter().filter(|task| !narrator.knows_task(task.id)) {
            created_as.insert(task.id, self.first_status(task).await?);
        }
        for line in narrator.agents(&agents) {
            self.report.line(&line);
        }
        for line in narrator.tasks(&tasks, &created_as) {
            self.report.line(&line);
        }
        Ok((agents, tasks))
    }

    /// The status a task was created with, from its `task_created` event.
    async fn first_status(&self, task: &Task) -> anyhow::Result<TaskStatus> {
        let detail = self.hub.service.task_detail(task.id).await?;
        let created = detail.logs.iter().find(|event| event.event_type == EventType::TaskCreated);
        let first = created
            .and_then(|event| event.new_value.as_deref())
            .and_then(|status| TaskStatus::parse(status).ok());
        Ok(first.unwrap_or(task.status))
    }
}

fn cast(crew: &Crew) -> Cast {
    Cast {
        lead: crew.named(story::LEAD).agent_id,
        offered_to: crew.named(story::OFFERED_TO).agent_id,
        workers: crew
            .members
            .iter()
            .filter(|member| member.role == swarm_runner::Role::Worker)
            .map(|member| member.agent_id)
            .collect(),
    }
}
