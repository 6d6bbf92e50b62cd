//! Epics: creating, changing and deleting them (the lead and the operator), reading
//! them with their progress (everyone), and tasks joining and leaving them.

use swarm_domain::{
    epic::{Epic, EpicDraft, EpicStatus, EpicWithProgress},
    id::{AgentId, EpicId, TaskId},
    poll::Wake,
    task::{NewTask, Task, TaskDraft},
};
use swarm_store::{Applied, EpicFilter};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

pub const EPIC_PAGE_MAX: i64 = 1000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpicQuery {
    pub status: Option<EpicStatus>,
    pub search: Option<String>,
    pub lead_agent_id: Option<AgentId>,
    pub created_by_agent_id: Option<AgentId>,
    /// 1 to [`EPIC_PAGE_MAX`]; all when absent.
    pub limit: Option<i64>,
}

/// What `POST /api/epics/:id/tasks` and `assign-task-to-epic` add to an epic.
#[derive(Debug, Clone)]
pub enum EpicTask {
    /// A task that exists joins the epic.
    Existing(TaskId),
    /// A new task is created in the epic, tagged `epic:<name>` as the reference does.
    New(Box<TaskDraft>),
}

/// An epic with its progress and its tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpicDetail {
    pub epic: EpicWithProgress,
    pub tasks: Vec<Task>,
}

impl Service {
    pub async fn epic_create(&self, caller: Caller, draft: EpicDraft) -> ServiceResult<Epic> {
        let creator = self.require_epic_editor(caller, "create").await?;
        self.check_epic_lead(&draft).await?;
        let epic = draft.create(EpicId::new_v7(), creator, self.clock.now())?;
        let epic = self.store.epic_create(&epic).await?;
        self.publish(Change::Epic { epic_id: epic.id });
        Ok(epic)
    }

    pub async fn epic_list(&self, query: EpicQuery) -> ServiceResult<Vec<EpicWithProgress>> {
        let limit = match query.limit {
            None => 0,
            Some(limit) if (1..=EPIC_PAGE_MAX).contains(&limit) => limit,
            Some(_) => {
                return Err(ServiceError::Invalid(format!("limit must be between 1 and {EPIC_PAGE_MAX}")));
            }
        };
        let filter = EpicFilter {
            status: query.status,
            search: query.search.filter(|text| !text.trim().is_empty()),
            lead_agent_id: query.lead_agent_id,
            created_by_agent_id: query.created_by_agent_id,
            limit,
            ..EpicFilter::default()
        };
        Ok(self.store.epic_list(&filter).await?)
    }

    pub async fn epic_get(&self, id: EpicId) -> ServiceResult<EpicWithProgress> {
        self.store.epic_get(id).await?.ok_or_else(|| unknown_epic(id))
    }

    pub async fn epic_detail(&self, id: EpicId) -> ServiceResult<EpicDetail> {
        let (epic, tasks) = self.store.epic_detail(id).await?.ok_or_else(|| unknown_epic(id))?;
        Ok(EpicDetail { epic, tasks })
    }

    /// An epic by id, or by name (the reference's tools accept either).
    pub async fn epic_find(&self, id: Option<&str>, name: Option<&str>) -> ServiceResult<EpicId> {
        if let Some(id) = id.map(str::trim).filter(|id| !id.is_empty()) {
            let id = EpicId::parse(id)?;
            return self.epic_get(id).await.map(|epic| epic.epic.id);
        }
        let Some(name) = name.map(str::trim).filter(|name| !name.is_empty()) else {
            return Err(ServiceError::Invalid("give the epic's id (epicId) or its name".into()));
        };
        let filter = EpicFilter { name: Some(name.to_string()), limit: 1, ..EpicFilter::default() };
        let found = self.store.epic_list(&filter).await?;
        found
            .first()
            .map(|epic| epic.epic.id)
            .ok_or_else(|| ServiceError::NotFound(format!("no epic named {name:?}")))
    }

    /// Change the fields `changes` sets. A change that crossed another one is refused
    /// (409), never merged silently.
    pub async fn epic_update(&self, caller: Caller, id: EpicId, changes: EpicDraft) -> ServiceResult<Epic> {
        self.require_epic_editor(caller, "change").await?;
        self.check_epic_lead(&changes).await?;
        let current = self.epic_get(id).await?.epic;
        let read_at = current.last_updated_at;
        // Two changes in one millisecond would look like none to the guard.
        let now = self.clock.now().max(read_at.plus_millis(1));
        let updated = changes.apply_to(&current, now)?;
        match self.store.epic_update(&updated, read_at).await? {
            Applied::Changed { before, after } => {
                self.publish(Change::Epic { epic_id: id });
                if after.status == EpicStatus::Active && before.status != EpicStatus::Active {
                    // Tasks may have finished while it was not active: the lead's parked
                    // poll may have something to claim now.
                    self.wake(&[Wake::Leads]).await;
                }
                Ok(after)
            }
            Applied::Refused { .. } => Err(ServiceError::Conflict(format!(
                "epic {id} was changed by someone else meanwhile: read it again and retry"
            ))),
            Applied::NotFound => Err(unknown_epic(id)),
        }
    }

    /// Delete the epic; its tasks stay, without an epic.
    pub async fn epic_delete(&self, caller: Caller, id: EpicId) -> ServiceResult<EpicWithProgress> {
        self.require_epic_editor(caller, "delete").await?;
        let epic = self.epic_get(id).await?;
        if !self.store.epic_delete(id, self.clock.now()).await? {
            return Err(unknown_epic(id));
        }
        self.publish(Change::Epic { epic_id: id });
        Ok(epic)
    }

    /// Add a task to the epic: an existing one joins it, or a new one is created in it.
    /// `true` when the task was created.
    pub async fn epic_add_task(
        &self,
        caller: Caller,
        epic: EpicId,
        task: EpicTask,
    ) -> ServiceResult<(Task, bool)> {
        let creator = self.require_epic_editor(caller, "add tasks to").await?;
        let current = self.epic_get(epic).await?.epic;
        match task {
            EpicTask::Existing(task) => Ok((self.task_set_epic(caller, task, Some(epic)).await?, false)),
            EpicTask::New(draft) => {
                let mut draft = *draft;
                draft.epic_id = Some(epic);
                let tag = format!("epic:{}", current.name);
                if !draft.tags.contains(&tag) {
                    draft.tags.push(tag);
                }
                let new_task = NewTask::parse(draft, creator)?;
                let task = self.store.task_create(&new_task, self.clock.now()).await?;
                self.task_changed(&task, None).await;
                self.publish(Change::Epic { epic_id: epic });
                Ok((task, true))
            }
        }
    }

    /// Put a task in an epic, or take it out (`None`). Doing what is already so is no
    /// error: the task is returned as it is.
    pub async fn task_set_epic(
        &self,
        caller: Caller,
        task: TaskId,
        epic: Option<EpicId>,
    ) -> ServiceResult<Task> {
        let actor = self.require_epic_editor(caller, "move tasks between").await?;
        if let Some(epic) = epic {
            self.epic_get(epic).await?;
        }
        match self.store.task_set_epic(task, epic, actor, self.clock.now()).await? {
            Applied::Changed { before, after } => {
                self.publish(Change::Task { task_id: task });
                for epic in [before.epic_id, after.epic_id].into_iter().flatten() {
                    self.publish(Change::Epic { epic_id: epic });
                }
                Ok(after)
            }
            Applied::Refused { current } => Ok(current),
            Applied::NotFound => Err(ServiceError::NotFound(format!("task {task} not found"))),
        }
    }

    /// Creating and changing epics is for the lead and the operator (a worker's prompt
    /// may be injected; the plan of the swarm is not its to rewrite). The agent, if any.
    async fn require_epic_editor(&self, caller: Caller, verb: &str) -> ServiceResult<Option<AgentId>> {
        match self.caller_agent(caller).await? {
            None => Ok(None),
            Some(agent) if agent.is_lead => Ok(Some(agent.id)),
            Some(_) => {
                Err(ServiceError::Forbidden(format!("only the lead or the operator may {verb} epics")))
            }
        }
    }

    async fn check_epic_lead(&self, draft: &EpicDraft) -> ServiceResult<()> {
        if let Some(Some(lead)) = draft.lead_agent_id
            && self.store.agent_get(lead).await?.is_none()
        {
            return Err(ServiceError::Invalid(format!("leadAgentId: agent {lead} does not exist")));
        }
        Ok(())
    }
}

fn unknown_epic(id: EpicId) -> ServiceError {
    ServiceError::NotFound(format!("Epic not found: {id}"))
}
