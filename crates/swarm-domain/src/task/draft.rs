//! A new task: what a caller asks for ([`TaskDraft`]) validated once into what the
//! store inserts ([`NewTask`]), and the checks of the free-text fields every change
//! shares.

use crate::{
    Invalid,
    event::{EventType, NewEvent},
    id::{AgentId, EpicId, TaskId},
    reject_nul,
    time::Timestamp,
};

use super::{
    DEPENDENCIES_MAX, OUTPUT_MAX_CHARS, PRIORITY_DEFAULT, TAGS_MAX, TASK_TEXT_MAX_CHARS, Task, TaskOrigin,
    TaskStatus,
};

/// A task to create, validated: build it with [`NewTask::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    pub id: TaskId,
    pub task: String,
    pub status: TaskStatus,
    pub agent_id: Option<AgentId>,
    pub creator_agent_id: Option<AgentId>,
    pub offered_to: Option<AgentId>,
    pub source: String,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub priority: i32,
    pub depends_on: Vec<TaskId>,
    pub epic_id: Option<EpicId>,
    pub origin: TaskOrigin,
}

/// What a caller asks for when creating a task, before validation.
#[derive(Debug, Clone, Default)]
pub struct TaskDraft {
    pub task: String,
    pub agent_id: Option<AgentId>,
    pub offered_to: Option<AgentId>,
    pub backlog: bool,
    pub source: Option<String>,
    pub task_type: Option<String>,
    pub tags: Vec<String>,
    pub priority: Option<i64>,
    pub depends_on: Vec<TaskId>,
    pub epic_id: Option<EpicId>,
    pub origin: TaskOrigin,
}

impl NewTask {
    /// The first status is the reference's (docs/state_machine.md): offered, else assigned (pending), else
    /// backlog when asked for, else the pool (unassigned).
    pub fn parse(draft: TaskDraft, creator: Option<AgentId>) -> Result<Self, Invalid> {
        let text = parse_task_text(&draft.task)?;
        if draft.agent_id.is_some() && draft.offered_to.is_some() {
            return Err(Invalid::new("give agentId (assign) or offeredTo (offer), not both"));
        }
        if draft.backlog && (draft.agent_id.is_some() || draft.offered_to.is_some()) {
            return Err(Invalid::new("a backlog task cannot be assigned or offered yet"));
        }
        let status = match (&draft.offered_to, &draft.agent_id, draft.backlog) {
            (Some(_), _, _) => TaskStatus::Offered,
            (None, Some(_), _) => TaskStatus::Pending,
            (None, None, true) => TaskStatus::Backlog,
            (None, None, false) => TaskStatus::Unassigned,
        };
        let priority = match draft.priority {
            None => PRIORITY_DEFAULT,
            Some(p) if (0..=100).contains(&p) => p as i32,
            Some(p) => return Err(Invalid(format!("priority must be between 0 and 100, got {p}"))),
        };
        let source = parse_word("source", draft.source.as_deref().unwrap_or("api"))?;
        let task_type = draft.task_type.as_deref().map(|t| parse_word("taskType", t)).transpose()?;
        let mut origin = draft.origin;
        origin.model = origin.model.as_deref().map(parse_model).transpose()?;
        Ok(NewTask {
            id: TaskId::new_v7(),
            task: text,
            status,
            agent_id: draft.agent_id,
            creator_agent_id: creator,
            offered_to: draft.offered_to,
            source,
            task_type,
            tags: parse_tags(draft.tags)?,
            priority,
            depends_on: parse_dependencies(draft.depends_on)?,
            epic_id: draft.epic_id,
            origin,
        })
    }
}

impl NewTask {
    /// The task as stored at `now`, for a store that has just inserted it and need not
    /// read it back. A repeated tag or dependency is kept once, at its first position.
    pub fn created(&self, now: Timestamp) -> Task {
        fn first_of_each<T: Clone + PartialEq>(items: &[T]) -> Vec<T> {
            let mut kept: Vec<T> = Vec::with_capacity(items.len());
            for item in items {
                if !kept.contains(item) {
                    kept.push(item.clone());
                }
            }
            kept
        }
        Task {
            id: self.id,
            agent_id: self.agent_id,
            creator_agent_id: self.creator_agent_id,
            task: self.task.clone(),
            status: self.status,
            source: self.source.clone(),
            task_type: self.task_type.clone(),
            tags: first_of_each(&self.tags),
            priority: self.priority,
            depends_on: first_of_each(&self.depends_on),
            offered_to: self.offered_to,
            offered_at: (self.status == TaskStatus::Offered).then_some(now),
            accepted_at: None,
            rejection_reason: None,
            created_at: now,
            last_updated_at: now,
            finished_at: None,
            failure_reason: None,
            output: None,
            progress: None,
            notified_at: None,
            lease_expires_at: None,
            lease_losses: 0,
            epic_id: self.epic_id,
            origin: self.origin.clone(),
        }
    }

    /// What the event log records when this task is created: `task_created` by its
    /// creator, and `task_offered` naming the agent when it is an offer.
    pub fn creation_events(&self) -> Vec<NewEvent> {
        let status = Some(self.status.as_str());
        let mut events = vec![NewEvent::change(
            EventType::TaskCreated,
            self.creator_agent_id,
            Some(self.id),
            None,
            status,
        )];
        if self.status == TaskStatus::Offered {
            events.push(NewEvent::change(
                EventType::TaskOffered,
                self.offered_to,
                Some(self.id),
                None,
                status,
            ));
        }
        events
    }
}

/// A task's text: trimmed, not empty, bounded, no NUL.
pub fn parse_task_text(text: &str) -> Result<String, Invalid> {
    let text = text.trim();
    reject_nul("task", text)?;
    if text.is_empty() {
        return Err(Invalid::new("task must not be empty"));
    }
    if text.chars().count() > TASK_TEXT_MAX_CHARS {
        return Err(Invalid(format!("task must be at most {TASK_TEXT_MAX_CHARS} characters")));
    }
    Ok(text.to_string())
}

/// A model name as the agent CLIs take it: `opus`, `gpt-5.5`, `anthropic/claude-sonnet-4-5`,
/// `claude-opus-4-5[1m]`. One word: it becomes one argument of the CLI's model flag.
pub fn parse_model(text: &str) -> Result<String, Invalid> {
    let text = text.trim();
    let ok = !text.is_empty()
        && text.len() <= 200
        && text.chars().all(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\'' | '`' | '\\'));
    if ok {
        Ok(text.to_string())
    } else {
        Err(Invalid(format!(
            "model must be one word of 1 to 200 printable ASCII characters without quotes, as the agent \
             CLI's model flag takes it (e.g. opus, gpt-5.5, anthropic/claude-sonnet-4-5), got {text:?}"
        )))
    }
}

fn parse_word(field: &str, text: &str) -> Result<String, Invalid> {
    let text = text.trim();
    let ok = !text.is_empty()
        && text.len() <= 64
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
    if ok {
        Ok(text.to_string())
    } else {
        Err(Invalid(format!("{field} must be 1 to 64 letters, digits or _-.: characters, got {text:?}")))
    }
}

pub fn parse_tags(tags: Vec<String>) -> Result<Vec<String>, Invalid> {
    if tags.len() > TAGS_MAX {
        return Err(Invalid(format!("at most {TAGS_MAX} tags")));
    }
    let mut parsed: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        let tag = tag.trim();
        reject_nul("tags", tag)?;
        if tag.is_empty() || tag.chars().count() > 100 {
            return Err(Invalid::new("each tag must be 1 to 100 characters"));
        }
        if !parsed.iter().any(|t| t == tag) {
            parsed.push(tag.to_string());
        }
    }
    Ok(parsed)
}

fn parse_dependencies(depends_on: Vec<TaskId>) -> Result<Vec<TaskId>, Invalid> {
    if depends_on.len() > DEPENDENCIES_MAX {
        return Err(Invalid(format!("at most {DEPENDENCIES_MAX} dependencies")));
    }
    let mut parsed = Vec::with_capacity(depends_on.len());
    for id in depends_on {
        if !parsed.contains(&id) {
            parsed.push(id);
        }
    }
    Ok(parsed)
}

/// Check a free-text field (output, reasons, progress) for size.
pub fn parse_note(field: &str, text: Option<String>) -> Result<Option<String>, Invalid> {
    match text {
        Some(text) if text.chars().count() > OUTPUT_MAX_CHARS => {
            Err(Invalid(format!("{field} must be at most {OUTPUT_MAX_CHARS} characters")))
        }
        Some(text) => reject_nul(field, &text).map(|()| Some(text)),
        None => Ok(None),
    }
}
