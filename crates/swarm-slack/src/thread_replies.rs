//! A person's reply in the thread of a Slack task (issue 42): while the task is not
//! finished it steers the worker on it (`Service::steer_task`, listed in the task's
//! steering messages and delivered to the run); once the task is finished it becomes a
//! follow-up task for the same agent with the thread's context, or a message to the lead
//! when that agent is gone. The reply is marked as received in the thread: a reaction
//! when it steers, a short answer when it became new work.
//!
//! Only allowlisted users get here (the bridge filters first, as for mentions).

use swarm_domain::{
    agent::AgentStatus,
    inbox::SlackContext,
    steering::{OnUnsupported, SteerMode, SteerOutcome},
    task::{Task, TaskStatus},
};
use swarm_service::{Caller, TaskListQuery};

use crate::bridge::Bridge;

/// The reaction on a reply that reached the worker (`:speech_balloon:`).
pub const RECEIVED_REACTION: &str = "speech_balloon";
/// How many of the newest Slack tasks a reply's thread is looked for among.
const THREAD_TASKS_LOOKED_AT: i64 = 100;

/// A reply in a thread: where it is and who wrote what.
pub struct Reply<'a> {
    pub channel: &'a str,
    pub thread_ts: &'a str,
    pub ts: &'a str,
    pub user: &'a str,
    pub text: &'a str,
}

impl Bridge {
    /// The newest task from this thread: one under way first, else a finished one.
    pub(crate) async fn thread_task(&self, channel: &str, thread: &str) -> Result<Option<Task>, String> {
        let under_way =
            vec![TaskStatus::InProgress, TaskStatus::Paused, TaskStatus::Pending, TaskStatus::Reviewing];
        let finished = vec![TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled];
        for statuses in [under_way, finished] {
            let query = TaskListQuery {
                source: Some("slack".into()),
                statuses,
                limit: Some(THREAD_TASKS_LOOKED_AT),
                ..TaskListQuery::default()
            };
            let (tasks, _) = self.service.task_list(query).await.map_err(|e| e.to_string())?;
            let found = tasks.into_iter().find(|task| {
                task.origin.slack_channel_id.as_deref() == Some(channel)
                    && task.origin.slack_thread_ts.as_deref() == Some(thread)
            });
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Hand a reply in `task`'s thread to the task's worker, or on.
    pub(crate) async fn thread_reply(&self, task: Task, reply: &Reply<'_>) -> Result<(), String> {
        if !task.status.is_finished() {
            let message = swarm_domain::untrusted::fence("slack", Some(reply.user), reply.text);
            let steered = self
                .service
                .steer_task(
                    Caller::Operator,
                    task.id,
                    &message,
                    SteerMode::Queue,
                    OnUnsupported::Degrade,
                    "slack",
                )
                .await
                .map_err(|e| e.to_string())?;
            if steered.outcome != SteerOutcome::Promoted {
                self.react(reply, RECEIVED_REACTION).await;
                return Ok(());
            }
            // It finished meanwhile: the message became a follow-up task.
            self.acknowledge(
                reply.channel,
                reply.thread_ts,
                ":speech_balloon: Your message became a follow-up task.",
            )
            .await;
            return Ok(());
        }
        let history = self.thread_history(reply.channel, reply.thread_ts, reply.ts).await;
        let content = match history {
            Some(history) => format!("{}\n\nThread history:\n{history}", reply.text),
            None => reply.text.to_string(),
        };
        let agents = self.service.agent_list().await.map_err(|e| e.to_string())?;
        let worker = task.agent_id.and_then(|id| {
            agents.iter().find(|agent| agent.id == id && agent.status != AgentStatus::Offline)
        });
        if let Some(worker) = worker {
            let message = swarm_domain::untrusted::fence("slack", Some(reply.user), &content);
            self.service
                .steer_task(
                    Caller::Operator,
                    task.id,
                    &message,
                    SteerMode::Queue,
                    OnUnsupported::Degrade,
                    "slack",
                )
                .await
                .map_err(|e| e.to_string())?;
            let text = format!(":speech_balloon: Sent to *{}* as a follow-up task.", worker.name);
            self.acknowledge(reply.channel, reply.thread_ts, &text).await;
            return Ok(());
        }
        let Some(lead) = agents.iter().find(|agent| agent.is_lead && agent.status != AgentStatus::Offline)
        else {
            self.acknowledge(
                reply.channel,
                reply.thread_ts,
                "No one is online to take this; try again later.",
            )
            .await;
            return Ok(());
        };
        let slack = SlackContext {
            slack_channel_id: Some(reply.channel.to_string()),
            slack_thread_ts: Some(reply.thread_ts.to_string()),
            slack_user_id: Some(reply.user.to_string()),
        };
        let why = format!("thread reply after task {} ({})", task.id, task.status);
        self.service.inbox_receive(lead.id, &content, slack, Some(why)).await.map_err(|e| e.to_string())?;
        let text = format!(":speech_balloon: The agent on this task is gone: sent to *{}*.", lead.name);
        self.acknowledge(reply.channel, reply.thread_ts, &text).await;
        Ok(())
    }

    async fn react(&self, reply: &Reply<'_>, name: &str) {
        if let Err(error) =
            swarm_service::slack_api::SlackApi::add_reaction(&*self.api, reply.channel, reply.ts, name).await
        {
            tracing::warn!(%error, "could not mark a Slack reply as received");
        }
    }
}

/// Whether a reply names its own target (`swarm#<id>`, `swarm#all`): routing decides then.
pub fn names_a_target(text: &str) -> bool {
    text.to_lowercase().contains("swarm#")
}
