//! `swarm task create|list|show|finish|cancel|release|reassign|steer`.

use std::io::Read;

use anyhow::Context;
use clap::{Args, Subcommand};
use swarm_client::{Client, CreateTaskRequest, FinishStatus, TaskQuery};
use swarm_domain::{
    id::{IdSuffix, TaskId},
    task::{Task, TaskStatus},
};

use super::{
    HubArgs, JSON_HELP, agent_names, hub_failure,
    output::{self, EVENT_HEADERS, TASK_HEADERS},
    resolve_agent,
};

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Create a task: in the pool (default), assigned (--agent), offered (--offer-to)
    /// or in the backlog (--backlog)
    ///
    /// Prints the new task (id, status, priority, text) and the commands to follow it;
    /// --quiet prints its id alone, for scripts (`id=$(swarm task create -q "...")`);
    /// --json prints the whole task.
    Create(CreateArgs),
    /// List tasks, newest first, with optional filters
    ///
    /// Shows id, status, priority, agent (its assignee, or who it is offered to) and
    /// the start of the text. --json prints `{tasks, total}`.
    List(ListArgs),
    /// Show every field of a task, then its history (newest first)
    Show(ShowArgs),
    /// Finish an in_progress task as completed (default) or failed
    ///
    /// Finishing a task that is already finished changes nothing and says so. The
    /// hub refuses (403) to finish a task assigned to another agent than the one
    /// given by --agent-id.
    Finish(FinishArgs),
    /// Cancel a task that is not finished yet
    ///
    /// Cancelling a task that is already finished changes nothing and says so.
    Cancel(CancelArgs),
    /// Hand a gone (offline) agent's task back to the pool
    ///
    /// For pending, in_progress, paused or offered tasks whose agent is offline (the hub
    /// answers 409 while it is online). With --agent-id, an agent gives back its own task.
    Release(HandOnArgs),
    /// Give a gone (offline) agent's task, or a pool or backlog task, to another agent
    ///
    /// The task becomes pending for --to. The hub answers 409 while the agent holding
    /// it is online.
    Reassign(ReassignArgs),
    /// Send words to the agent working a task, while it works
    ///
    /// --mode queue (default): the agent sees them when its turn ends and goes on with
    /// them; --mode steer: at its next tool call. Claude Code takes them through its hooks,
    /// Codex by resuming its session (docs/running-agents.md#steering). A finished task
    /// takes no steering: the message becomes a follow-up task for the same agent, or
    /// with --fail-if-finished the hub refuses (409). The operator, the lead (--agent-id)
    /// or the task's creator may steer.
    Steer(crate::steer::SteerArgs),
}

#[derive(Debug, Args)]
pub struct HandOnArgs {
    /// Id of the task, whole or its end as lists show it (`9c41d0e2`)
    #[arg(value_name = "TASK_ID", value_parser = parse_task_ref)]
    id: TaskRef,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct ReassignArgs {
    /// The agent (name or id) that takes the task
    #[arg(long, value_name = "AGENT")]
    to: String,
    #[command(flatten)]
    task: HandOnArgs,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// What to do, in plain words; `-` reads it from stdin
    #[arg(value_name = "TEXT")]
    text: String,
    /// Assign the task to this agent (name or id): it starts as pending
    #[arg(long, value_name = "AGENT", conflicts_with_all = ["offer_to", "backlog"])]
    agent: Option<String>,
    /// Offer the task to this agent (name or id), who may accept or reject it
    #[arg(long, value_name = "AGENT", conflicts_with = "backlog")]
    offer_to: Option<String>,
    /// Priority from 0 to 100; higher runs first [hub default: 50]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..=100))]
    priority: Option<i64>,
    /// A tag; repeat for several
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Kind of task, e.g. `bugfix` or `review` (letters, digits, `_-.:`)
    #[arg(long = "type", value_name = "TYPE")]
    task_type: Option<String>,
    /// Id of a task that must be completed before this one can start (whole or its end
    /// as lists show it); repeat for several
    #[arg(long, value_name = "TASK_ID", value_parser = parse_task_ref)]
    depends_on: Vec<TaskRef>,
    /// Put the task in the backlog, where no agent picks it up yet
    #[arg(long)]
    backlog: bool,
    /// The model its agent CLI runs it with, given to the CLI's own model flag (`opus`,
    /// `gpt-5.5`, `anthropic/claude-sonnet-4-5`) [default: the runner's --model, else the CLI's]
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Print the new task's id alone, for scripts
    #[arg(short, long, conflicts_with = "json")]
    quiet: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only tasks in this status; repeat or separate with commas for several
    /// (backlog, unassigned, offered, reviewing, pending, in_progress, paused,
    /// completed, failed, cancelled)
    #[arg(long, value_name = "STATUS", value_delimiter = ',', value_parser = parse_status)]
    status: Vec<TaskStatus>,
    /// Only tasks assigned to this agent (name or id)
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    /// Only tasks whose text contains this (case-insensitive)
    #[arg(long, value_name = "TEXT")]
    search: Option<String>,
    /// Only tasks of this kind (as given by `task create --type`)
    #[arg(long = "type", value_name = "TYPE")]
    task_type: Option<String>,
    /// Only tasks carrying this tag; repeat or separate with commas to require several
    #[arg(long = "tag", value_name = "TAG", value_delimiter = ',')]
    tags: Vec<String>,
    /// Show at most this many tasks (1 to 1000)
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    limit: u32,
    /// Skip this many tasks first (for the next page)
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: u32,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Id of the task, whole or its end as lists show it (`9c41d0e2`)
    #[arg(value_name = "TASK_ID", value_parser = parse_task_ref)]
    id: TaskRef,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct FinishArgs {
    /// Id of the task, whole or its end as lists show it (`9c41d0e2`)
    #[arg(value_name = "TASK_ID", value_parser = parse_task_ref)]
    id: TaskRef,
    /// Mark the task failed instead of completed
    #[arg(long)]
    failed: bool,
    /// The result of the work, kept with a completed task
    #[arg(long, value_name = "TEXT", conflicts_with = "failed")]
    output: Option<String>,
    /// Why the task failed (with --failed)
    #[arg(long, value_name = "TEXT", requires = "failed")]
    reason: Option<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Id of the task, whole or its end as lists show it (`9c41d0e2`)
    #[arg(value_name = "TASK_ID", value_parser = parse_task_ref)]
    id: TaskRef,
    /// Why the task is cancelled; kept as its failure reason
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
    #[command(flatten)]
    hub: HubArgs,
}

pub async fn run_task(command: TaskCommand) -> anyhow::Result<()> {
    match command {
        TaskCommand::Create(args) => task_create(args).await,
        TaskCommand::List(args) => task_list(args).await,
        TaskCommand::Show(args) => task_show(args).await,
        TaskCommand::Finish(args) => task_finish(args).await,
        TaskCommand::Cancel(args) => task_cancel(args).await,
        TaskCommand::Release(args) => task_hand_on(args, None).await,
        TaskCommand::Reassign(args) => task_hand_on(args.task, Some(args.to)).await,
        TaskCommand::Steer(args) => crate::steer::task_steer(args).await,
    }
}

/// `release` (to the pool) or `reassign` (to `to`).
async fn task_hand_on(args: HandOnArgs, to: Option<String>) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let id = resolve_task(&client, &args.id).await?;
    let answer = match to {
        Some(to) => {
            let agent = resolve_agent(&client, &to).await?;
            client.reassign_task(id, agent).await
        }
        None => client.release_task(id).await,
    }
    .map_err(|err| {
        hub_failure(format!("cannot hand on task {id}"), err, |status| match status {
            409 => Some(format!("see `swarm task show {id}`: only work of an offline agent is handed on")),
            _ => refusal_tip(&client, id, status),
        })
    })?;
    if args.json {
        return output::print_json(&answer);
    }
    output::emit(&format!("task {} is now {}\n", answer.task.id, answer.task.status))
}

async fn task_create(args: CreateArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let text = if args.text == "-" { read_stdin()? } else { args.text };
    let agent_id = match &args.agent {
        Some(agent) => Some(resolve_agent(&client, agent).await?),
        None => None,
    };
    let offered_to = match &args.offer_to {
        Some(agent) => Some(resolve_agent(&client, agent).await?),
        None => None,
    };
    let mut depends_on = Vec::with_capacity(args.depends_on.len());
    for task in &args.depends_on {
        depends_on.push(resolve_task(&client, task).await?);
    }
    let request = CreateTaskRequest {
        task: text,
        agent_id,
        offered_to,
        task_type: args.task_type,
        tags: args.tags,
        priority: args.priority,
        depends_on,
        source: None,
        status: args.backlog.then_some(swarm_client::InitialStatus::Backlog),
        model: args.model,
    };
    let task = client
        .create_task(&request)
        .await
        .map_err(|err| hub_failure("cannot create the task".to_string(), err, |_| None))?;
    if args.json {
        return output::print_json(&task);
    }
    if args.quiet {
        return output::emit(&format!("{}\n", task.id));
    }
    let waits_for = match task.status {
        TaskStatus::Unassigned => "in the pool: the first worker with a free slot takes it",
        TaskStatus::Pending => "assigned: its agent starts it at its next poll",
        TaskStatus::Offered => "offered: its agent accepts or rejects it",
        TaskStatus::Backlog => "in the backlog: no agent takes it until it leaves the backlog",
        _ => "",
    };
    output::emit(&format!(
        "created task {id}\n{fields}\n{waits_for}\nnext: `swarm task show {id}` follows it; `swarm worker` runs an agent that takes work\n",
        id = task.id,
        fields = output::fields(&[
            ("status", task.status.to_string()),
            ("priority", task.priority.to_string()),
            ("task", output::excerpt(&task.task, 200)),
        ]),
    ))
}

async fn task_list(args: ListArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let agent_id = match &args.agent {
        Some(agent) => Some(resolve_agent(&client, agent).await?),
        None => None,
    };
    let query = TaskQuery {
        status: args.status,
        agent_id,
        search: args.search.filter(|search| !search.is_empty()),
        source: None,
        task_type: args.task_type,
        tags: args.tags,
        limit: Some(args.limit),
        offset: Some(args.offset),
    };
    let list = client.list_tasks(&query).await.context("cannot list tasks")?;
    if args.json {
        return output::print_json(&list);
    }
    if list.tasks.is_empty() {
        return output::emit(&match list.total {
            0 => "no tasks\n".to_string(),
            total => format!("no tasks at offset {} ({total} in all)\n", args.offset),
        });
    }
    let names = agent_names(&client).await;
    let mut text = output::table(&TASK_HEADERS, &output::task_rows(&list.tasks, &names));
    text.push_str(&output::page_note(args.offset, list.tasks.len(), list.total));
    output::emit(&text)
}

async fn task_show(args: ShowArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let id = resolve_task(&client, &args.id).await?;
    let detail = client
        .get_task(id)
        .await
        .map_err(|err| hub_failure(format!("cannot show task {id}"), err, not_found_tip))?;
    if args.json {
        return output::print_json(&detail);
    }
    let names = agent_names(&client).await;
    let mut text = output::task_fields(&detail.task, &names);
    if !detail.logs.is_empty() {
        text.push_str("\nhistory (newest first):\n");
        text.push_str(&output::table(&EVENT_HEADERS, &output::event_rows(&detail.logs, &names)));
    }
    output::emit(&text)
}

async fn task_finish(args: FinishArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let id = resolve_task(&client, &args.id).await?;
    let status = if args.failed { FinishStatus::Failed } else { FinishStatus::Completed };
    let answer = client
        .finish_task(id, status, args.output.as_deref(), args.reason.as_deref())
        .await
        .map_err(|err| {
            hub_failure(format!("cannot finish task {id}"), err, |status| refusal_tip(&client, id, status))
        })?;
    if args.json {
        return output::print_json(&answer);
    }
    // The hub answers the reference's runner with success for a task not yet started
    // (nothing changes); a person asked for an ending that did not happen.
    if answer.already_finished && !answer.task.status.is_finished() {
        anyhow::bail!(
            "task {id} is {}: only a task in progress can be finished; nothing changed \
             (`swarm task cancel {id}` withdraws it)",
            answer.task.status
        );
    }
    output::emit(&finish_outcome(&answer.task, answer.already_finished))
}

async fn task_cancel(args: CancelArgs) -> anyhow::Result<()> {
    let client = args.hub.connect()?;
    let id = resolve_task(&client, &args.id).await?;
    let answer = client.cancel_task(id, args.reason.as_deref()).await.map_err(|err| {
        hub_failure(format!("cannot cancel task {id}"), err, |status| refusal_tip(&client, id, status))
    })?;
    if args.json {
        return output::print_json(&answer);
    }
    output::emit(&finish_outcome(&answer.task, answer.already_finished))
}

fn finish_outcome(task: &Task, already_finished: bool) -> String {
    if already_finished {
        format!("task {} was already finished ({}); nothing changed\n", task.id, task.status)
    } else {
        format!("task {} is now {}\n", task.id, task.status)
    }
}

fn not_found_tip(status: u16) -> Option<String> {
    (status == 404).then(|| "check the id with `swarm task list`".to_string())
}

/// What to do when the hub refuses to finish or cancel a task.
pub(crate) fn refusal_tip(client: &Client, id: TaskId, status: u16) -> Option<String> {
    match status {
        403 if client.agent_id().is_none() => Some(format!(
            "act as the agent allowed to do this with --agent-id or AGENT_ID (see `swarm task show {id}`)"
        )),
        403 => Some(format!(
            "--agent-id / AGENT_ID names an agent that may not do this; see `swarm task show {id}`"
        )),
        _ => not_found_tip(status),
    }
}

/// A task as a person named it: its whole id, or the end of one.
#[derive(Debug, Clone)]
pub(crate) enum TaskRef {
    Whole(TaskId),
    Suffix(IdSuffix),
}

pub(crate) fn parse_task_ref(text: &str) -> Result<TaskRef, String> {
    match TaskId::parse(text) {
        Ok(id) => Ok(TaskRef::Whole(id)),
        Err(_) => IdSuffix::parse(text).map(TaskRef::Suffix).map_err(|err| err.to_string()),
    }
}

/// The task id `task` names; the end of one is looked up on the hub, which says when no
/// task or several end so.
pub(crate) async fn resolve_task(client: &Client, task: &TaskRef) -> anyhow::Result<TaskId> {
    match task {
        TaskRef::Whole(id) => Ok(*id),
        TaskRef::Suffix(suffix) => client.resolve_task_id(suffix).await.map_err(|err| {
            hub_failure(format!("cannot find task {}", suffix.as_str()), err, |status| match status {
                404 => Some("check the id with `swarm task list`".to_string()),
                409 => Some("give more digits of the id, or the whole id".to_string()),
                _ => None,
            })
        }),
    }
}

fn parse_status(text: &str) -> Result<TaskStatus, String> {
    TaskStatus::parse(text.trim()).map_err(|err| err.to_string())
}

fn read_stdin() -> anyhow::Result<String> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).context("cannot read the task text from stdin")?;
    Ok(text)
}
