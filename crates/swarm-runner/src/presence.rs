//! The runner's standing with the hub outside agent runs: registration, heartbeats
//! while anything runs, the agent's own unfinished work at start, and at stop the
//! claims nobody started and a word on why the runner stopped.

use std::{
    collections::VecDeque,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::json;
use swarm_client::{Client, RegisterAgentRequest, TaskQuery};
use swarm_domain::task::TaskStatus;
use tokio_util::sync::CancellationToken;

use crate::{
    RunnerError, Shutdown,
    config::RunnerConfig,
    hub::with_retry,
    run::{Context, Outcome},
    settle,
    view::View,
    work::{TaskOrigin, Work},
};

/// How long the runner's last calls (pausing leftovers, `/close`, its last word) may
/// take at shutdown.
pub(crate) const FAREWELL_DEADLINE: Duration = Duration::from_secs(10);

/// `POST /api/agents` as this agent (a lead for `swarm lead`). Restarts keep the id, so
/// an existing agent comes back `idle`. False when shutdown came first.
pub(crate) async fn register(
    client: &Client,
    config: &RunnerConfig,
    view: &View,
    stop: &CancellationToken,
) -> Result<bool, RunnerError> {
    let request = RegisterAgentRequest {
        name: config.agent_name.clone(),
        is_lead: config.role == crate::Role::Lead,
        max_tasks: Some(i64::from(config.max_concurrent)),
        ..RegisterAgentRequest::default()
    };
    let Some(registered) = with_retry(view, "registering", stop, || client.register_agent(&request)).await
    else {
        return Ok(false);
    };
    let agent = registered.map_err(|source| RunnerError::Register {
        name: config.agent_name.clone(),
        id: config.agent_id,
        source: Box::new(source),
    })?;
    view.info(
        "registered",
        &format!("registered as {} ({}), maxTasks {}", agent.name, agent.id, agent.max_tasks),
        &[("agentId", json!(agent.id)), ("name", json!(agent.name))],
    );
    Ok(true)
}

/// Pings while any agent run is under way, every third of a lease: a poll is a
/// heartbeat too, but the runner does not poll while every slot is busy.
pub(crate) async fn heartbeat(
    client: Client,
    view: View,
    active: Arc<AtomicUsize>,
    every: Duration,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if active.load(Ordering::SeqCst) == 0 {
            continue;
        }
        match client.ping().await {
            Ok(()) if failing => {
                failing = false;
                view.info("hub_back", "the hub answers heartbeats again", &[]);
            }
            Ok(()) => {}
            Err(err) if !failing => {
                failing = true;
                view.warn(
                    "heartbeat_failed",
                    &format!(
                        "heartbeat failed: {err}; the agent's claims run out unless the hub is back in time"
                    ),
                    &[("error", json!(err.to_string()))],
                );
            }
            Err(_) => {}
        }
    }
}

/// The agent's own unfinished work from a previous run: tasks still `in_progress` for
/// it (the runner died; their leases have not run out yet), then paused ones. Held tasks
/// beyond the runner's slots are paused now: they would wait unheartbeated and lose their
/// lease while waiting, and come back as paused work instead.
pub(crate) async fn held_work(context: &Context, shutdown: &Shutdown, slots: usize) -> VecDeque<Work> {
    let me = context.config.agent_id;
    let query = TaskQuery {
        status: vec![TaskStatus::InProgress],
        agent_id: Some(me),
        limit: Some(1000),
        ..TaskQuery::default()
    };
    let view = &context.view;
    let client = &context.client;
    let paused = match with_retry(view, "looking for paused tasks", &shutdown.graceful, || {
        client.paused_tasks()
    })
    .await
    {
        Some(Ok(tasks)) => tasks,
        Some(Err(err)) => {
            view.warn("held_work_failed", &format!("cannot list this agent's paused tasks: {err}"), &[]);
            Vec::new()
        }
        None => return VecDeque::new(),
    };
    let held =
        match with_retry(view, "looking for held tasks", &shutdown.graceful, || client.list_tasks(&query))
            .await
        {
            Some(Ok(list)) => list.tasks,
            Some(Err(err)) => {
                view.warn("held_work_failed", &format!("cannot list this agent's tasks: {err}"), &[]);
                Vec::new()
            }
            None => return VecDeque::new(),
        };
    let mut work = VecDeque::new();
    let mut overflow = Vec::new();
    for (n, task) in held.into_iter().enumerate() {
        if n < slots {
            work.push_back(Work::Task { task, origin: TaskOrigin::Held });
        } else if settle::pause_task(context, task.id).await == Outcome::Paused {
            overflow.push(Work::Resume { task });
        }
    }
    work.extend(overflow);
    work.extend(paused.into_iter().map(|task| Work::Resume { task }));
    if !work.is_empty() {
        let labels: Vec<String> =
            work.iter().map(|work| format!("{} ({})", work.label(), work.kind())).collect();
        view.info(
            "held_work",
            &format!("picking up this agent's unfinished work first: {}", labels.join(", ")),
            &[("tasks", json!(labels))],
        );
    }
    work
}

/// Says on the hub why this agent takes no more work: a message in `general` from the
/// agent, which goes offline right after, so the dashboard shows both.
pub(crate) async fn tell_the_hub(context: &Context, reason: &str) {
    let content = format!(
        "{} stopped taking work: {reason}. Its tasks went back to the queue; fix the environment \
         (`swarm doctor` on its machine) and start it again.",
        context.config.agent_name
    );
    let body = json!({ "content": content });
    // On the agent record too (`statusReason`), where the dashboard shows it; the hub
    // clears it when the agent takes work again.
    let reason_path = format!("/api/agents/{}/status-reason", context.config.agent_id);
    let reason_body = json!({ "reason": reason });
    let record = context.client.post_json::<_, serde_json::Value>(&reason_path, &reason_body);
    match tokio::time::timeout(FAREWELL_DEADLINE, record).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => {
            context.view.warn("tell_failed", &format!("cannot record why on the hub: {err}"), &[])
        }
        Err(_) => context.view.warn("tell_failed", "cannot record why on the hub: it did not answer", &[]),
    }
    let post = async {
        let list: serde_json::Value = context.client.get_json("/api/channels", &[]).await?;
        let general = list["channels"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|channel| channel["name"] == "general")
            .and_then(|channel| channel["id"].as_str().map(str::to_string))
            .unwrap_or_else(|| "general".into());
        let path = format!("/api/channels/{general}/messages");
        context.client.post_json::<_, serde_json::Value>(&path, &body).await
    };
    match tokio::time::timeout(FAREWELL_DEADLINE, post).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => context.view.warn("tell_failed", &format!("cannot say so on the hub: {err}"), &[]),
        Err(_) => context.view.warn("tell_failed", "cannot say so on the hub: it did not answer", &[]),
    }
}

/// Pauses any task still `in_progress` for this agent once every run has ended: claims
/// an abandoned poll may have made. The next runner start resumes them.
pub(crate) async fn pause_leftovers(context: &Context) {
    let query = TaskQuery {
        status: vec![TaskStatus::InProgress],
        agent_id: Some(context.config.agent_id),
        limit: Some(1000),
        ..TaskQuery::default()
    };
    let pause_all = async {
        let Ok(list) = context.client.list_tasks(&query).await else {
            return;
        };
        for task in list.tasks {
            let outcome = settle::pause_task(context, task.id).await;
            context.view.info(
                "task_paused",
                &format!("task {} was claimed but not started: {outcome}", task.id),
                &[("taskId", json!(task.id))],
            );
        }
    };
    if tokio::time::timeout(FAREWELL_DEADLINE, pause_all).await.is_err() {
        context.view.warn(
            "pause_failed",
            "the hub did not answer; claims left running out through their leases",
            &[],
        );
    }
}
