//! `swarm task steer <id> <message>`: words for the agent working a task (issue 40).

use clap::Args;
use swarm_client::SteerRequest;
use swarm_domain::steering::{OnUnsupported, SteerMode, SteerOutcome};

use super::{
    HubArgs, JSON_HELP, hub_failure, output,
    task::{TaskRef, parse_task_ref, refusal_tip, resolve_task},
};

#[derive(Debug, Args)]
pub struct SteerArgs {
    /// Id of the task, whole or its end as lists show it (`9c41d0e2`)
    #[arg(value_name = "TASK_ID", value_parser = parse_task_ref)]
    id: TaskRef,
    /// What the agent should hear
    #[arg(value_name = "MESSAGE")]
    message: String,
    /// queue: when the agent's turn ends; steer: at its next tool call
    #[arg(long, value_name = "MODE", default_value = "queue", value_parser = parse_mode)]
    mode: SteerMode,
    /// Refuse (409) instead of making a follow-up task when the task is finished
    #[arg(long)]
    fail_if_finished: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

fn parse_mode(text: &str) -> Result<SteerMode, String> {
    SteerMode::parse(text).map_err(|err| err.to_string())
}

pub async fn task_steer(args: SteerArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let id = resolve_task(&client, &args.id).await?;
    let on_unsupported = if args.fail_if_finished { OnUnsupported::Fail } else { OnUnsupported::Degrade };
    let request = SteerRequest {
        message: &args.message,
        mode: Some(args.mode),
        on_unsupported: Some(on_unsupported),
        source: Some("cli"),
    };
    let answer = client.steer_task(id, &request).await.map_err(|err| {
        hub_failure(format!("cannot steer task {id}"), err, |status| match status {
            409 => Some(format!(
                "the task is finished; leave out --fail-if-finished to send the message as a follow-up \
                 task, or see `swarm task show {id}`"
            )),
            _ => refusal_tip(&client, id, status),
        })
    })?;
    if args.json {
        return output::print_json(&answer);
    }
    let id_text = answer.steering_message_id.map(|m| format!(" (message {m})")).unwrap_or_default();
    let degraded = answer
        .degraded_from
        .map(|from| {
            format!("; sent as {} instead of {from}: the task has not started", answer.effective_mode)
        })
        .unwrap_or_default();
    let text = match (answer.outcome, answer.promoted_task_id) {
        (SteerOutcome::Promoted, Some(follow_up)) => format!(
            "task {id} is finished: the message is now the follow-up task {follow_up}{id_text} \
             (`swarm task show {follow_up}`)\n"
        ),
        (SteerOutcome::Steered, _) => {
            format!("steering for task {id} recorded{id_text}: the agent sees it at its next tool call\n")
        }
        _ => format!(
            "steering for task {id} recorded{id_text}: the agent sees it when its turn ends{degraded}\n"
        ),
    };
    output::emit(&text)
}
