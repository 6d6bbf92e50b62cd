//! The demo's cast: a hub in this process (the same application `swarm serve` serves,
//! on a temporary SQLite file and a loopback port), and a lead and two workers, each a
//! real runner (`swarm_runner::run`, in this process too) whose agent CLI is this very
//! program's `stand-in-agent`, started as a child process for every run.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;
use swarm_domain::{id::AgentId, lease::LeasePolicy};
use swarm_hub::{DatabaseArgs, Hub, HubOptions, LimitArgs, RetentionArgs, ServeArgs, SlackArgs};
use swarm_runner::{Harness, OutputFormat, Role, RunnerConfig, RunnerExit, Shutdown};
use swarm_service::Service;
use tokio::task::JoinSet;

/// How often the rescuer looks for expired claims (none expire in a healthy demo).
const RESCUE_EVERY: Duration = Duration::from_secs(5);
/// How long agent runs still under way get to finish when the demo ends.
const RUNNER_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the runners, then the hub, get to stop before the demo stops waiting.
const STOP_DEADLINE: Duration = Duration::from_secs(15);

/// The hub, served from this process: the same hub `swarm serve` runs.
pub(super) struct DemoHub {
    pub service: Service,
    pub url: String,
    api_key: String,
    hub: Hub,
}

impl DemoHub {
    /// Opens (creates) the database at `db` and serves it on `127.0.0.1:<port>`.
    pub async fn start(db: &Path, port: u16) -> anyhow::Result<DemoHub> {
        // A key of its own, so nothing else on this machine can steer the demo's crew.
        let api_key = uuid::Uuid::new_v4().simple().to_string();
        // Built field by field rather than parsed, so that the user's own API_KEY,
        // DATABASE_URL or SLACK_BOT_TOKEN never reach the demo's hub.
        let args = ServeArgs {
            port,
            host: "127.0.0.1".into(),
            database: DatabaseArgs { db: db.to_path_buf(), database_url: None, sqlite_wal_batching: false },
            api_key: Some(api_key.clone()),
            api_key_file: None,
            insecure_no_auth: false,
            agent_auth: "header".into(),
            share_local_key: "off".into(),
            log_format: "text".into(),
            lease_seconds: LeasePolicy::default().period.as_secs(),
            rescue_interval_seconds: RESCUE_EVERY.as_secs(),
            max_lease_losses: i64::from(LeasePolicy::default().max_losses),
            max_deliveries: i64::from(LeasePolicy::default().max_deliveries),
            result_handoff_seconds: LeasePolicy::default().result_handoff.as_secs(),
            reassign_after_seconds: LeasePolicy::default().reassign_after.as_secs(),
            mcp_allowed_hosts: None,
            capabilities: String::new(),
            metrics_public: false,
            github_allowed_associations: "OWNER,MEMBER,COLLABORATOR".into(),
            limits: LimitArgs::default(),
            retention: RetentionArgs::default(),
            slack: SlackArgs {
                slack_bot_token: None,
                slack_app_token: None,
                slack_signing_secret: None,
                slack_allowed_user_ids: None,
                slack_allowed_email_domains: None,
                slack_api_url: String::new(),
                app_url: None,
                slack_channel_management: false,
            },
            linear: Default::default(),
            jira: Default::default(),
            gitlab: Default::default(),
        };
        let hub = Hub::start(&args, HubOptions::default())
            .await
            .context("cannot start the demo's hub (pick another --port; 0 picks a free one)")?;
        Ok(DemoHub { service: hub.service.clone(), url: hub.url(), api_key, hub })
    }

    /// Finishes the requests in flight and stops serving.
    pub async fn stop(self) {
        match tokio::time::timeout(STOP_DEADLINE, self.hub.stop()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "the demo hub's server failed"),
            Err(_) => tracing::warn!("the demo hub did not stop in time"),
        }
    }
}

/// One agent of the crew.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub name: &'static str,
    pub role: Role,
    pub agent_id: AgentId,
}

/// What the crew's stand-in agents are told.
#[derive(Debug, Clone)]
pub(super) struct CrewSettings {
    /// How long each stand-in run "thinks" before acting.
    pub pace: Duration,
    /// Where each run records itself (`<pid>.start`, `<pid>.end`).
    pub runs_dir: PathBuf,
    /// Runner logs (`<log_dir>/<agent name>/`).
    pub log_dir: PathBuf,
    /// Worker stand-ins fail tasks whose text contains this.
    pub fail_marker: &'static str,
    /// Show the runners' own lines (stderr) instead of their warnings only.
    pub verbose: bool,
}

/// The runners, each in a task of this process.
pub(super) struct Crew {
    pub members: Vec<Member>,
    shutdown: Shutdown,
    runners: JoinSet<(&'static str, Result<RunnerExit, swarm_runner::RunnerError>)>,
}

impl Crew {
    /// A lead named `lead` and workers `worker-1`, `worker-2`, all of them polling `hub`.
    pub fn start(hub: &DemoHub, settings: &CrewSettings) -> anyhow::Result<Crew> {
        let program = std::env::current_exe()
            .context("cannot find this program's own path, which the stand-in agents are started from")?;
        let members = vec![
            Member { name: "lead", role: Role::Lead, agent_id: AgentId::new_v7() },
            Member { name: "worker-1", role: Role::Worker, agent_id: AgentId::new_v7() },
            Member { name: "worker-2", role: Role::Worker, agent_id: AgentId::new_v7() },
        ];
        // One shutdown for all: they stop together.
        let shutdown = Shutdown::default();
        let mut runners = JoinSet::new();
        for member in &members {
            let config = runner_config(member, hub, &program, settings);
            let name = member.name;
            let shutdown = shutdown.clone();
            runners.spawn(async move { (name, swarm_runner::run(config, shutdown).await) });
        }
        Ok(Crew { members, shutdown, runners })
    }

    pub fn named(&self, name: &str) -> &Member {
        self.members.iter().find(|member| member.name == name).expect("a member of the demo crew")
    }

    /// Waits for a runner that stopped by itself (they only stop when asked, or when an
    /// agent run failed): its name and why. Pending forever while all of them run.
    pub async fn runner_stopped(&mut self) -> (String, String) {
        match self.runners.join_next().await {
            Some(Ok((name, Ok(RunnerExit::Stopped)))) => (name.into(), "it stopped".into()),
            Some(Ok((name, Ok(RunnerExit::AgentFailed(end) | RunnerExit::EnvironmentFailed(end))))) => {
                (name.into(), format!("an agent run failed ({end})"))
            }
            Some(Ok((name, Err(error)))) => (name.into(), format!("{error:#}")),
            Some(Err(error)) => ("a runner".into(), format!("its task failed: {error}")),
            None => std::future::pending().await,
        }
    }

    /// Asks every runner to stop and waits for them. `graceful`: agent runs under way
    /// get to finish; else they are stopped now and their tasks paused.
    pub async fn stop(mut self, graceful: bool) {
        self.shutdown.graceful.cancel();
        if !graceful {
            self.shutdown.immediate.cancel();
        }
        let all_stopped = async { while self.runners.join_next().await.is_some() {} };
        if tokio::time::timeout(STOP_DEADLINE, all_stopped).await.is_err() {
            self.shutdown.immediate.cancel();
            self.runners.abort_all();
        }
    }
}

fn runner_config(member: &Member, hub: &DemoHub, program: &Path, settings: &CrewSettings) -> RunnerConfig {
    let mut config = RunnerConfig::new(
        member.role,
        hub.url.clone(),
        member.agent_id,
        Harness::program(program, Vec::new()),
    );
    config.agent_name = member.name.to_string();
    config.api_key = Some(hub.api_key.clone());
    config.agent_args = vec![
        "stand-in-agent".into(),
        "--behaviour".into(),
        "complete".into(),
        "--sleep-ms".into(),
        settings.pace.as_millis().to_string(),
        "--fail-when".into(),
        settings.fail_marker.into(),
        "--record-dir".into(),
        settings.runs_dir.display().to_string(),
    ];
    config.session_id = member.name.to_string();
    config.log_dir = settings.log_dir.clone();
    config.shutdown_timeout = RUNNER_SHUTDOWN_TIMEOUT;
    config.output = if settings.verbose { OutputFormat::Text } else { OutputFormat::WarningsOnly };
    config
}
