//! Epics over MCP, with the reference's tool names and arguments: `create-epic`,
//! `list-epics`, `get-epic-details`, `update-epic`, `delete-epic`,
//! `assign-task-to-epic`, `unassign-task-from-epic`. Changing epics is the lead's (the
//! service refuses anyone else too); reading them is everyone's.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use swarm_domain::{
    epic::{EpicDraft, EpicStatus},
    id::{AgentId, TaskId},
};
use swarm_service::{EpicQuery, EpicTask};
use uuid::Uuid;

use crate::{
    context::ToolCall,
    registry::{Audience, ToolSpec},
    reply::{Answer, NoFields, Outcome, Reply},
};

pub fn group() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "create-epic",
            "Create an epic (a project): a unique name and a goal, with an optional description, prd \
             and plan (markdown). It starts as draft; set status active with update-epic to have its \
             progress reported to you (epic_progress_changed). The lead only.",
            Audience::LeadOnly,
            create_epic,
        ),
        ToolSpec::new(
            "list-epics",
            "List epics with their progress (percent of tasks completed) and task counts; filter by \
             status, search (name, description, goal), leadAgentId, createdByAgentId.",
            Audience::Anyone,
            list_epics,
        )
        .read_only(),
        ToolSpec::new(
            "get-epic-details",
            "One epic (epicId or name) with its progress, task counts and tasks.",
            Audience::Anyone,
            get_epic_details,
        )
        .read_only(),
        ToolSpec::new(
            "update-epic",
            "Change an epic (epicId or name): only the fields given; newName renames it. The lead only.",
            Audience::LeadOnly,
            update_epic,
        ),
        ToolSpec::new(
            "delete-epic",
            "Delete an epic (epicId or name); its tasks stay, without an epic. The lead only.",
            Audience::LeadOnly,
            delete_epic,
        ),
        ToolSpec::new(
            "assign-task-to-epic",
            "Put an existing task in an epic (epicId or epicName). The lead only.",
            Audience::LeadOnly,
            assign_task_to_epic,
        ),
        ToolSpec::new(
            "unassign-task-from-epic",
            "Take a task out of its epic; the task itself stays. The lead only.",
            Audience::LeadOnly,
            unassign_task_from_epic,
        ),
    ]
}

fn parse_status(text: Option<String>) -> Result<Option<EpicStatus>, Reply> {
    text.map(|text| EpicStatus::parse(&text)).transpose().map_err(|error| Reply::refused(error.0))
}

/// Flattened into the create and update arguments (serde cannot deny unknown fields
/// through `flatten`: those are ignored).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct EpicFields {
    description: Option<String>,
    /// Product requirements (markdown).
    prd: Option<String>,
    /// Implementation plan (markdown).
    plan: Option<String>,
    /// 0 to 100, default 50.
    #[schemars(range(min = 0, max = 100))]
    priority: Option<i64>,
    tags: Option<Vec<String>>,
    /// The agent leading this epic.
    lead_agent_id: Option<Uuid>,
    slack_channel_id: Option<String>,
    slack_thread_ts: Option<String>,
    github_repo: Option<String>,
    github_milestone: Option<String>,
}

impl EpicFields {
    fn draft(self, name: Option<String>, goal: Option<String>, status: Option<EpicStatus>) -> EpicDraft {
        EpicDraft {
            name,
            goal,
            description: self.description,
            prd: self.prd,
            plan: self.plan,
            status,
            priority: self.priority,
            tags: self.tags,
            lead_agent_id: self.lead_agent_id.map(|id| Some(AgentId::from_uuid(id))),
            slack_channel_id: self.slack_channel_id,
            slack_thread_ts: self.slack_thread_ts,
            github_repo: self.github_repo,
            github_milestone: self.github_milestone,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct CreateEpicArguments {
    /// A unique name, 1 to 200 characters.
    name: String,
    /// What the epic is for.
    goal: String,
    #[serde(flatten)]
    fields: EpicFields,
}

async fn create_epic(call: ToolCall, args: CreateEpicArguments) -> Outcome<EpicOutput> {
    let draft = args.fields.draft(Some(args.name), Some(args.goal), None);
    let epic = call.service.epic_create(call.caller(), draft).await?;
    let message = format!("epic {:?} created ({}), status {}", epic.name, epic.id, epic.status.as_str());
    Ok(Answer::new(message, EpicOutput { epic }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListEpicsArguments {
    /// draft, active, paused, completed or cancelled.
    #[schemars(regex(pattern = "^(draft|active|paused|completed|cancelled)$"))]
    status: Option<String>,
    /// Text in the name, description or goal.
    search: Option<String>,
    lead_agent_id: Option<Uuid>,
    created_by_agent_id: Option<Uuid>,
    /// 1 to 100, default 25.
    #[schemars(range(min = 1, max = 100))]
    limit: Option<i64>,
}

async fn list_epics(call: ToolCall, args: ListEpicsArguments) -> Outcome<EpicListOutput> {
    let limit = args.limit.unwrap_or(25);
    if !(1..=100).contains(&limit) {
        return Err(Reply::refused("limit must be between 1 and 100"));
    }
    let query = EpicQuery {
        status: parse_status(args.status)?,
        search: args.search,
        lead_agent_id: args.lead_agent_id.map(AgentId::from_uuid),
        created_by_agent_id: args.created_by_agent_id.map(AgentId::from_uuid),
        limit: Some(limit),
    };
    let epics = call.service.epic_list(query).await?;
    Ok(Answer::new(format!("{} epic(s)", epics.len()), EpicListOutput { total: epics.len() as u64, epics }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EpicRefArguments {
    epic_id: Option<Uuid>,
    /// The epic's name (instead of epicId).
    name: Option<String>,
}

async fn get_epic_details(call: ToolCall, args: EpicRefArguments) -> Outcome<EpicDetailsOutput> {
    let id = call
        .service
        .epic_find(args.epic_id.map(|id| id.to_string()).as_deref(), args.name.as_deref())
        .await?;
    let detail = call.service.epic_detail(id).await?;
    let message = format!(
        "epic {:?}: {}% ({} of {} tasks completed)",
        detail.epic.epic.name,
        detail.epic.progress,
        detail.epic.task_stats.completed,
        detail.epic.task_stats.total
    );
    Ok(Answer::new(message, EpicDetailsOutput { epic: detail.epic, tasks: detail.tasks }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateEpicArguments {
    epic_id: Option<Uuid>,
    /// The epic's name (instead of epicId), to find it.
    name: Option<String>,
    /// A new name.
    new_name: Option<String>,
    goal: Option<String>,
    /// draft, active, paused, completed or cancelled.
    #[schemars(regex(pattern = "^(draft|active|paused|completed|cancelled)$"))]
    status: Option<String>,
    #[serde(flatten)]
    fields: EpicFields,
}

async fn update_epic(call: ToolCall, args: UpdateEpicArguments) -> Outcome<EpicOutput> {
    let id = call
        .service
        .epic_find(args.epic_id.map(|id| id.to_string()).as_deref(), args.name.as_deref())
        .await?;
    let draft = args.fields.draft(args.new_name, args.goal, parse_status(args.status)?);
    let epic = call.service.epic_update(call.caller(), id, draft).await?;
    Ok(Answer::new(
        format!("epic {:?} updated, status {}", epic.name, epic.status.as_str()),
        EpicOutput { epic },
    ))
}

async fn delete_epic(call: ToolCall, args: EpicRefArguments) -> Outcome<NoFields> {
    let id = call
        .service
        .epic_find(args.epic_id.map(|id| id.to_string()).as_deref(), args.name.as_deref())
        .await?;
    let epic = call.service.epic_delete(call.caller(), id).await?;
    Ok(Answer::done(format!("epic {:?} deleted; its {} task(s) stay", epic.epic.name, epic.task_stats.total)))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AssignArguments {
    task_id: Uuid,
    epic_id: Option<Uuid>,
    /// The epic's name (instead of epicId).
    epic_name: Option<String>,
}

async fn assign_task_to_epic(call: ToolCall, args: AssignArguments) -> Outcome<TaskOutput> {
    let epic = call
        .service
        .epic_find(args.epic_id.map(|id| id.to_string()).as_deref(), args.epic_name.as_deref())
        .await?;
    let request = EpicTask::Existing(TaskId::from_uuid(args.task_id));
    let (task, _) = call.service.epic_add_task(call.caller(), epic, request).await?;
    Ok(Answer::new(format!("task {} is in epic {epic}", task.id), TaskOutput { task }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UnassignArguments {
    task_id: Uuid,
}

async fn unassign_task_from_epic(call: ToolCall, args: UnassignArguments) -> Outcome<TaskOutput> {
    let task = call.service.task_set_epic(call.caller(), TaskId::from_uuid(args.task_id), None).await?;
    Ok(Answer::new(format!("task {} is in no epic", task.id), TaskOutput { task }))
}

// The result fields of the epic tools, for their output schemas.
#[derive(Serialize, utoipa::ToSchema)]
struct EpicOutput {
    epic: swarm_domain::epic::Epic,
}

#[derive(Serialize, utoipa::ToSchema)]
struct EpicListOutput {
    total: u64,
    epics: Vec<swarm_domain::epic::EpicWithProgress>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct EpicDetailsOutput {
    epic: swarm_domain::epic::EpicWithProgress,
    tasks: Vec<swarm_domain::task::Task>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TaskOutput {
    task: swarm_domain::task::Task,
}
