//! What the two drivers' SQL shares and what does not depend on the database: the
//! statements' plans, with each driver writing only its placeholders (`?1` or `$1`) and
//! binding values in its own column types. A plan changed here changes both drivers.

pub mod held_claims;
pub mod task_update;

use swarm_domain::poll::TriggerKind;

/// ` NOT EXISTS (...)`: every dependency of the task `$task` (a table or its alias) is
/// `completed`, which is what makes a task ready to start. A literal, so that drivers
/// can `concat!` it into static SQL.
#[macro_export]
macro_rules! sql_dependencies_completed {
    ($task:literal) => {
        concat!(
            " NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks dt ON dt.id = d.depends_on_task_id \
              WHERE d.task_id = ",
            $task,
            ".id AND dt.status <> 'completed')"
        )
    };
}

/// How a driver writes the n-th bound parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `?1`
    Sqlite,
    /// `$1`
    Postgres,
}

impl Dialect {
    /// The placeholder of parameter `n`, counted from 1.
    pub fn param(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }
}

/// What the poll view's `EXISTS` columns found for an agent, one flag a column.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollFlags {
    pub offered: bool,
    pub pending: bool,
    pub urgent_mail: bool,
    pub results: bool,
    pub inbox: bool,
    pub mentions: bool,
    pub finished: bool,
    pub handed_back: bool,
    pub epic_progress: bool,
    pub pool: bool,
}

impl PollFlags {
    /// The kinds that have a candidate, for [`crate::PollView::waiting`]. A pool task
    /// both can be claimed and counts for `pool_tasks_available`.
    pub fn waiting(self) -> Vec<TriggerKind> {
        let found = [
            (self.offered, TriggerKind::TaskOffered),
            (self.pending, TriggerKind::TaskAssigned),
            (self.urgent_mail, TriggerKind::UrgentMail),
            (self.results, TriggerKind::TaskResult),
            (self.inbox, TriggerKind::SlackInboxMessage),
            (self.mentions, TriggerKind::UnreadMentions),
            (self.handed_back, TriggerKind::TasksHandedBack),
            (self.finished, TriggerKind::TasksFinished),
            (self.epic_progress, TriggerKind::EpicProgressChanged),
            (self.pool, TriggerKind::PoolTask),
            (self.pool, TriggerKind::PoolTasksAvailable),
        ];
        found.into_iter().filter(|(yes, _)| *yes).map(|(_, kind)| kind).collect()
    }
}
