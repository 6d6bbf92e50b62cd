//! Running statements: prepared once per connection (rusqlite's statement cache), rows
//! decoded by a function that may refuse them, and a builder for the few statements
//! whose shape depends on the request (filters, guarded updates). Every value is bound.

use rusqlite::{Connection, Params, Row, params_from_iter, types::Value};
use swarm_store::StoreResult;

use crate::error::db;

/// Every row of `sql`, decoded by `decode`.
pub(crate) fn all<T>(
    connection: &Connection,
    sql: &str,
    params: impl Params,
    mut decode: impl FnMut(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut statement = connection.prepare_cached(sql).map_err(db)?;
    let mut rows = statement.query(params).map_err(db)?;
    let mut decoded = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        decoded.push(decode(row)?);
    }
    Ok(decoded)
}

/// The first row of `sql`, if any, decoded by `decode`.
pub(crate) fn optional<T>(
    connection: &Connection,
    sql: &str,
    params: impl Params,
    decode: impl FnOnce(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let mut statement = connection.prepare_cached(sql).map_err(db)?;
    let mut rows = statement.query(params).map_err(db)?;
    match rows.next().map_err(db)? {
        Some(row) => decode(row).map(Some),
        None => Ok(None),
    }
}

/// The single value of a query that always returns one row (`count(*)`, `EXISTS`).
pub(crate) fn scalar<T: rusqlite::types::FromSql>(
    connection: &Connection,
    sql: &str,
    params: impl Params,
) -> StoreResult<T> {
    let mut statement = connection.prepare_cached(sql).map_err(db)?;
    statement.query_row(params, |row| row.get(0)).map_err(db)
}

/// The number of rows changed.
pub(crate) fn execute(connection: &Connection, sql: &str, params: impl Params) -> StoreResult<usize> {
    connection.prepare_cached(sql).map_err(db)?.execute(params).map_err(db)
}

/// SQL assembled piece by piece; `bind` appends a `?` and its value.
#[derive(Debug, Default)]
pub(crate) struct Sql {
    text: String,
    values: Vec<Value>,
}

impl Sql {
    pub(crate) fn new(text: &str) -> Sql {
        Sql { text: text.to_string(), values: Vec::new() }
    }

    pub(crate) fn push(&mut self, text: &str) -> &mut Sql {
        self.text.push_str(text);
        self
    }

    pub(crate) fn bind(&mut self, value: impl Into<Value>) -> &mut Sql {
        self.text.push('?');
        self.values.push(value.into());
        self
    }

    /// `?, ?, ?` for each value: the inside of an `IN (...)`.
    pub(crate) fn bind_list<V: Into<Value>>(&mut self, values: impl IntoIterator<Item = V>) -> &mut Sql {
        for (index, value) in values.into_iter().enumerate() {
            if index > 0 {
                self.text.push_str(", ");
            }
            self.bind(value);
        }
        self
    }

    /// `(column = ? OR column = ? ...)`: a filter on a row found by other means. SQLite
    /// evaluates an `IN` list of more than two bound values through a temporary b-tree
    /// built on every execution, which costs more than the rest of a point `UPDATE`.
    pub(crate) fn bind_any_of<V: Into<Value>>(
        &mut self,
        column: &str,
        values: impl IntoIterator<Item = V>,
    ) -> &mut Sql {
        self.text.push('(');
        for (index, value) in values.into_iter().enumerate() {
            if index > 0 {
                self.text.push_str(" OR ");
            }
            self.text.push_str(column);
            self.text.push_str(" = ");
            self.bind(value);
        }
        self.text.push(')');
        self
    }

    pub(crate) fn all<T>(
        &self,
        connection: &Connection,
        decode: impl FnMut(&Row<'_>) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        all(connection, &self.text, params_from_iter(&self.values), decode)
    }

    pub(crate) fn scalar<T: rusqlite::types::FromSql>(&self, connection: &Connection) -> StoreResult<T> {
        scalar(connection, &self.text, params_from_iter(&self.values))
    }

    /// The virtual machine steps of one run of the statement to its end: work that does
    /// not depend on the machine, for tests that a query's cost does not grow with a table.
    #[cfg(test)]
    pub(crate) fn steps(&self, connection: &Connection) -> i32 {
        let mut statement = connection.prepare(&self.text).unwrap();
        let mut rows = statement.query(params_from_iter(&self.values)).unwrap();
        while rows.next().unwrap().is_some() {}
        drop(rows);
        statement.get_status(rusqlite::StatementStatus::VmStep)
    }

    /// Run a statement without decoding, for callers that inspect the raw error.
    pub(crate) fn execute_raw(&self, connection: &Connection) -> rusqlite::Result<usize> {
        connection.prepare_cached(&self.text)?.execute(params_from_iter(&self.values))
    }
}
