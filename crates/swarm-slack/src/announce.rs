//! The living message of each Slack task (issue 42): once a task from a Slack thread is
//! taken, one status message is posted in its thread and edited (`chat.update`) as the
//! task moves; its ending (output, failure, cancellation) is rendered into it once.
//!
//! Once, across restarts and replicas: the store's guards decide who posts the message
//! (its row), whose `ts` it keeps, and who renders the ending. A crash between a claim and
//! Slack's answer loses that one post or ending: at most once, by design.
//!
//! Coalesced: one loop per process edits one message at a time, a message at most once per
//! [`EDIT_EVERY`], and only when what it shows changed; the changes that arrive meanwhile
//! fold into the next edit, so a chatty agent costs a few edits, not one per note. Any
//! process may change a task (a replica, `swarm mcp`), so a periodic sweep finds those;
//! this process's own changes come from its change stream at once.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use swarm_domain::{
    id::TaskId,
    task::{Task, TaskStatus},
};
use swarm_service::{Change, Service, TaskListQuery, slack_api::SlackUpdate};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::blocks::{self, StatusView};

const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// The shortest time between two edits of one message (Slack allows about one write a
/// second per channel, and 50 `chat.update` a minute).
const EDIT_EVERY: Duration = Duration::from_secs(2);
const ENDINGS_BATCH: i64 = 20;
/// Slack tasks under way that a sweep looks at (newest first).
const RUNNING_SWEEP_BATCH: i64 = 100;

pub async fn run(service: Service, app_url: Option<String>) {
    let mut living = Living { service, app_url, shown: HashMap::new(), dirty: HashSet::new() };
    let mut changes = living.service.subscribe();
    let mut ticks = tokio::time::interval(SWEEP_EVERY.min(EDIT_EVERY) / 2);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sweep: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            change = changes.recv() => match change {
                Ok(change) => living.note(&change),
                Err(RecvError::Lagged(_)) => last_sweep = None,
                Err(RecvError::Closed) => return,
            },
        }
        // Whatever else arrived while this loop was waiting on Slack folds into this round.
        loop {
            match changes.try_recv() {
                Ok(change) => living.note(&change),
                Err(TryRecvError::Lagged(_)) => last_sweep = None,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
        if last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
            living.sweep().await;
            last_sweep = Some(Instant::now());
            living.service.note_slack_sweep();
        }
        living.flush().await;
    }
}

/// What this process last showed in a message: memory only speeds things up (a restart
/// edits each running task's message once more, to the same content).
struct Shown {
    digest: u64,
    at: Instant,
}

struct Living {
    service: Service,
    app_url: Option<String>,
    shown: HashMap<TaskId, Shown>,
    /// Tasks whose message may be behind.
    dirty: HashSet<TaskId>,
}

impl Living {
    fn note(&mut self, change: &Change) {
        if let Change::Task { task_id } = change {
            self.dirty.insert(*task_id);
        }
    }

    async fn sweep(&mut self) {
        match self.service.slack_status_unfinalized(ENDINGS_BATCH).await {
            Ok(tasks) => self.dirty.extend(tasks.iter().map(|task| task.id)),
            Err(error) => tracing::warn!(%error, "cannot look for Slack task endings to render"),
        }
        let query = TaskListQuery {
            statuses: vec![TaskStatus::InProgress, TaskStatus::Paused],
            source: Some("slack".to_string()),
            limit: Some(RUNNING_SWEEP_BATCH),
            ..TaskListQuery::default()
        };
        match self.service.task_list(query).await {
            Ok((tasks, _)) => self.dirty.extend(tasks.iter().map(|task| task.id)),
            Err(error) => tracing::warn!(%error, "cannot look for Slack tasks under way"),
        }
    }

    async fn flush(&mut self) {
        let dirty: Vec<TaskId> = self.dirty.iter().copied().collect();
        for id in dirty {
            let task = match self.service.task_get(id).await {
                Ok(task)
                    if task.origin.slack_channel_id.is_some() && task.origin.slack_thread_ts.is_some() =>
                {
                    task
                }
                _ => {
                    self.dirty.remove(&id);
                    continue;
                }
            };
            let done = if task.status.is_finished() {
                self.render_ending(&task).await;
                true
            } else if matches!(task.status, TaskStatus::InProgress | TaskStatus::Paused) {
                self.render_running(&task).await
            } else {
                true
            };
            if done {
                self.dirty.remove(&id);
            }
        }
    }

    async fn view(&self, task: &Task) -> (String, serde_json::Value) {
        let agent_name = self.service.task_assignee_name(task).await.ok().flatten();
        let cost_usd = self.service.task_cost_usd(task.id).await.unwrap_or(0.0);
        let task_url =
            self.app_url.as_ref().map(|url| format!("{}/#/tasks/{}", url.trim_end_matches('/'), task.id));
        let view = StatusView { task, agent_name: agent_name.as_deref(), cost_usd, task_url };
        blocks::render(&view)
    }

    /// Post or edit the message of a task under way; `false` while it must be looked at
    /// again soon (an edit held back to coalesce).
    async fn render_running(&mut self, task: &Task) -> bool {
        let row = match self.service.slack_status_get(task.id).await {
            Ok(row) => row,
            Err(error) => {
                tracing::warn!(%error, task = %task.id, "cannot read a Slack status message");
                return false;
            }
        };
        // Another process holds the claim and posts: the sweep looks again once it has.
        if row.as_ref().is_some_and(|row| row.finalized_at.is_some() || row.message_ts.is_none()) {
            return true;
        }
        let (text, blocks) = self.view(task).await;
        let digest = blocks::digest(&text, &blocks);
        let Some(row) = row else {
            match self.service.slack_status_claim(task).await {
                Ok(true) => self.post(task, &text, &blocks, digest).await,
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, task = %task.id, "cannot claim a Slack status message"),
            }
            return true;
        };
        let Some(ts) = row.message_ts else { return true };
        if let Some(shown) = self.shown.get(&task.id) {
            if shown.digest == digest {
                return true;
            }
            if shown.at.elapsed() < EDIT_EVERY {
                return false;
            }
        }
        self.edit(task, &row.channel_id, &ts, text, blocks, digest).await;
        true
    }

    async fn post(&mut self, task: &Task, text: &str, blocks: &serde_json::Value, digest: u64) {
        let ts = match self.service.slack_post_blocks_for_task(task, text, blocks).await {
            Ok(ts) => ts,
            Err(error) => {
                tracing::warn!(%error, task = %task.id, "could not post a Slack task's status message");
                return;
            }
        };
        match self.service.slack_status_posted(task.id, &ts).await {
            Ok(true) => {
                self.shown.insert(task.id, Shown { digest, at: Instant::now() });
            }
            // Another process posted the task's message meanwhile (its ending came first):
            // this one would be a second message.
            Ok(false) => self.delete(task, &ts).await,
            Err(error) => tracing::warn!(%error, task = %task.id, "cannot record a Slack status message"),
        }
    }

    async fn delete(&self, task: &Task, ts: &str) {
        let (Some(api), Some(channel)) = (self.service.slack_api(), &task.origin.slack_channel_id) else {
            return;
        };
        if let Err(error) = api.delete_message(channel, ts).await {
            tracing::warn!(%error, task = %task.id, "could not delete a second Slack status message");
        }
    }

    async fn edit(
        &mut self,
        task: &Task,
        channel: &str,
        ts: &str,
        text: String,
        blocks: serde_json::Value,
        digest: u64,
    ) {
        let update =
            SlackUpdate { channel: channel.to_string(), ts: ts.to_string(), text, blocks: Some(blocks) };
        match self.service.slack_status_update(&update).await {
            Ok(()) => {
                self.shown.insert(task.id, Shown { digest, at: Instant::now() });
            }
            Err(error) => tracing::warn!(%error, task = %task.id, "could not edit a Slack status message"),
        }
    }

    /// Render a finished task's ending, once: into its message, or as a new message when
    /// it never had one.
    async fn render_ending(&mut self, task: &Task) {
        let edited_here = self.shown.remove(&task.id).is_some();
        let taken = match self.service.slack_status_finalize(task).await {
            Ok(taken) => taken,
            Err(error) => {
                tracing::warn!(%error, task = %task.id, "cannot claim a Slack task's ending");
                return;
            }
        };
        // Another process rendered the ending; an edit of ours may have landed after it,
        // so this process puts the ending back (the same content: no second message).
        if !taken && !edited_here {
            return;
        }
        let row = match self.service.slack_status_get(task.id).await {
            Ok(Some(row)) => row,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, task = %task.id, "cannot read a Slack status message");
                return;
            }
        };
        let (text, blocks) = self.view(task).await;
        match row.message_ts {
            Some(ts) => {
                let update = SlackUpdate { channel: row.channel_id, ts, text, blocks: Some(blocks) };
                if let Err(error) = self.service.slack_status_update(&update).await {
                    tracing::warn!(%error, task = %task.id, "could not render a Slack task's ending");
                }
            }
            None if taken => match self.service.slack_post_blocks_for_task(task, &text, &blocks).await {
                Ok(ts) => {
                    if let Err(error) = self.service.slack_status_posted(task.id, &ts).await {
                        tracing::warn!(%error, task = %task.id, "cannot record a Slack status message");
                    }
                }
                Err(error) => tracing::warn!(%error, task = %task.id, "could not post a Slack task's ending"),
            },
            None => {}
        }
    }
}
