//! Reading columns back into domain types. A value the domain does not accept (an
//! unknown status, a malformed id) fails the read with a backend error instead of
//! panicking: the file may have been written by another version of swarm.

use rusqlite::{Row, types::FromSql};
use swarm_domain::{
    id::{AgentId, TaskId},
    time::Timestamp,
};
use swarm_store::StoreResult;

use crate::error::{corrupt, db};

pub(crate) fn column<T: FromSql>(row: &Row<'_>, name: &str) -> StoreResult<T> {
    row.get(name).map_err(db)
}

pub(crate) fn agent_id(text: &str) -> StoreResult<AgentId> {
    AgentId::parse(text).map_err(|error| corrupt(error.0))
}

pub(crate) fn task_id(text: &str) -> StoreResult<TaskId> {
    TaskId::parse(text).map_err(|error| corrupt(error.0))
}

pub(crate) fn get_agent_id(row: &Row<'_>, name: &str) -> StoreResult<AgentId> {
    agent_id(&column::<String>(row, name)?)
}

pub(crate) fn get_opt_agent_id(row: &Row<'_>, name: &str) -> StoreResult<Option<AgentId>> {
    column::<Option<String>>(row, name)?.as_deref().map(agent_id).transpose()
}

pub(crate) fn get_task_id(row: &Row<'_>, name: &str) -> StoreResult<TaskId> {
    task_id(&column::<String>(row, name)?)
}

pub(crate) fn get_opt_task_id(row: &Row<'_>, name: &str) -> StoreResult<Option<TaskId>> {
    column::<Option<String>>(row, name)?.as_deref().map(task_id).transpose()
}

pub(crate) fn timestamp(millis: i64) -> StoreResult<Timestamp> {
    Timestamp::from_unix_millis(millis).ok_or_else(|| corrupt(format!("timestamp out of range: {millis}")))
}

pub(crate) fn get_timestamp(row: &Row<'_>, name: &str) -> StoreResult<Timestamp> {
    timestamp(column::<i64>(row, name)?)
}

pub(crate) fn get_bool(row: &Row<'_>, name: &str) -> StoreResult<bool> {
    Ok(column::<i64>(row, name)? != 0)
}

/// The columns of a row read in the order of the `SELECT` list, by position: a lookup by
/// name searches every column name of the statement, which on a task row (34 columns)
/// costs more than the rest of the read. Each read names its column, and debug builds
/// (every test run) check that the name is the one at that position.
pub(crate) struct Columns<'a, 'r> {
    row: &'a Row<'r>,
    next: usize,
}

impl<'a, 'r> Columns<'a, 'r> {
    pub(crate) fn new(row: &'a Row<'r>) -> Self {
        Columns { row, next: 0 }
    }

    pub(crate) fn take<T: FromSql>(&mut self, name: &str) -> StoreResult<T> {
        let index = self.next;
        self.next += 1;
        debug_assert_eq!(
            self.row.as_ref().column_name(index).ok(),
            Some(name),
            "column {index} of the SELECT list is not {name}"
        );
        self.row.get(index).map_err(db)
    }

    pub(crate) fn agent_id(&mut self, name: &str) -> StoreResult<AgentId> {
        agent_id(&self.take::<String>(name)?)
    }

    pub(crate) fn opt_agent_id(&mut self, name: &str) -> StoreResult<Option<AgentId>> {
        self.take::<Option<String>>(name)?.as_deref().map(agent_id).transpose()
    }

    pub(crate) fn task_id(&mut self, name: &str) -> StoreResult<TaskId> {
        task_id(&self.take::<String>(name)?)
    }

    pub(crate) fn opt_task_id(&mut self, name: &str) -> StoreResult<Option<TaskId>> {
        self.take::<Option<String>>(name)?.as_deref().map(task_id).transpose()
    }

    pub(crate) fn timestamp(&mut self, name: &str) -> StoreResult<Timestamp> {
        timestamp(self.take(name)?)
    }

    pub(crate) fn opt_timestamp(&mut self, name: &str) -> StoreResult<Option<Timestamp>> {
        self.take::<Option<i64>>(name)?.map(timestamp).transpose()
    }

    pub(crate) fn bool(&mut self, name: &str) -> StoreResult<bool> {
        Ok(self.take::<i64>(name)? != 0)
    }

    /// A JSON array of strings (capabilities, `json_group_array` of tags or ids).
    pub(crate) fn strings(&mut self, name: &str) -> StoreResult<Vec<String>> {
        match self.take::<Option<String>>(name)? {
            None => Ok(Vec::new()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|error| corrupt(format!("column {name} is not a JSON array of strings: {error}"))),
        }
    }
}
