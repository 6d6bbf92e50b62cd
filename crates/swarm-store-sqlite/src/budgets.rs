//! Daily budgets (issue 40): the ceilings, the day's spend, the refusals, and the check
//! the poll's claim runs (on the writer, inside its transaction) before it starts work.

use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use swarm_domain::{
    budget::{Budget, BudgetKey, BudgetRefusal, BudgetScope, DaySpend, RefusalCause, UtcDay},
    id::AgentId,
    poll::{Trigger, TriggerKind},
    time::Timestamp,
};
use swarm_store::{BudgetStore, StoreResult};

use crate::{SqliteStore, error::corrupt, rows::Columns, sql};

macro_rules! budget_columns {
    () => {
        "scope, scope_id, daily_budget_usd, created_at, last_updated_at"
    };
}

fn budget_from_row(row: &Row<'_>) -> StoreResult<Budget> {
    let mut column = Columns::new(row);
    let scope: String = column.take("scope")?;
    Ok(Budget {
        scope: BudgetScope::parse(&scope).map_err(|error| corrupt(format!("budget: {error}")))?,
        scope_id: column.take("scope_id")?,
        daily_budget_usd: column.take("daily_budget_usd")?,
        created_at: column.take("created_at")?,
        last_updated_at: column.take("last_updated_at")?,
        spent_today_usd: None,
    })
}

fn refusal_from_row(row: &Row<'_>) -> StoreResult<BudgetRefusal> {
    let mut column = Columns::new(row);
    Ok(BudgetRefusal {
        task_id: column.task_id("task_id")?,
        date: column.take("date")?,
        agent_id: column.agent_id("agent_id")?,
        cause: RefusalCause::parse(&column.take::<String>("cause")?).map_err(|error| corrupt(error.0))?,
        agent_spend_usd: column.take("agent_spend_usd")?,
        agent_budget_usd: column.take("agent_budget_usd")?,
        global_spend_usd: column.take("global_spend_usd")?,
        global_budget_usd: column.take("global_budget_usd")?,
        created_at: column.take("created_at")?,
    })
}

fn get(connection: &Connection, key: BudgetKey) -> StoreResult<Option<Budget>> {
    sql::optional(
        connection,
        concat!("SELECT ", budget_columns!(), " FROM budgets WHERE scope = ?1 AND scope_id = ?2"),
        params![key.scope().as_str(), key.scope_id()],
        budget_from_row,
    )
}

fn put(tx: &Connection, key: BudgetKey, daily_budget_usd: f64, now: Timestamp) -> StoreResult<Budget> {
    let before = get(tx, key)?.map(|budget| budget.daily_budget_usd);
    crate::events::insert(tx, &key.change_event(before, Some(daily_budget_usd)), now)?;
    let stored = sql::optional(
        tx,
        concat!(
            "INSERT INTO budgets (",
            budget_columns!(),
            ") VALUES (?1, ?2, ?3, ?4, ?4)
             ON CONFLICT (scope, scope_id) DO UPDATE
                 SET daily_budget_usd = excluded.daily_budget_usd, last_updated_at = excluded.last_updated_at
             RETURNING ",
            budget_columns!()
        ),
        params![key.scope().as_str(), key.scope_id(), daily_budget_usd, now.unix_millis()],
        budget_from_row,
    )?;
    stored.ok_or_else(|| corrupt("the budget upsert returned no row".into()))
}

/// Session costs recorded in `[start, end)`, of one agent or of all.
fn spend(connection: &Connection, agent: Option<AgentId>, day: &UtcDay) -> StoreResult<f64> {
    let (start, end) = (day.start.unix_millis(), day.end.unix_millis());
    match agent {
        Some(agent) => sql::scalar(
            connection,
            "SELECT COALESCE(SUM(total_cost_usd), 0.0) FROM session_costs
             WHERE agent_id = ?1 AND created_at >= ?2 AND created_at < ?3",
            params![agent.to_string(), start, end],
        ),
        None => sql::scalar(
            connection,
            "SELECT COALESCE(SUM(total_cost_usd), 0.0) FROM session_costs WHERE created_at >= ?1 AND created_at < ?2",
            params![start, end],
        ),
    }
}

/// The ceilings that apply to `agent` and the day's spend against each that is set.
fn day_spend(connection: &Connection, agent: AgentId, day: &UtcDay) -> StoreResult<DaySpend> {
    let ceilings = sql::all(
        connection,
        "SELECT scope, daily_budget_usd FROM budgets
         WHERE (scope = 'global' AND scope_id = '') OR (scope = 'agent' AND scope_id = ?1)",
        [agent.to_string()],
        |row| {
            Ok((
                row.get::<_, String>(0).map_err(crate::error::db)?,
                row.get::<_, f64>(1).map_err(crate::error::db)?,
            ))
        },
    )?;
    let mut spent = DaySpend::default();
    for (scope, ceiling) in ceilings {
        if scope == "global" {
            spent.global_budget = Some(ceiling);
            spent.global_spend = spend(connection, None, day)?;
        } else {
            spent.agent_budget = Some(ceiling);
            spent.agent_spend = spend(connection, Some(agent), day)?;
        }
    }
    Ok(spent)
}

/// The task a claim of `kind` would start for `agent` now, if any (the claim's own pick).
fn candidate(tx: &Connection, kind: TriggerKind, agent: AgentId) -> StoreResult<Option<String>> {
    let first_id = |row: &Row<'_>| row.get(0).map_err(crate::error::db);
    match kind {
        TriggerKind::TaskAssigned => sql::optional(
            tx,
            concat!(
                "SELECT t.id FROM tasks t WHERE t.agent_id = ?1 AND t.status = 'pending' AND",
                swarm_store::sql_dependencies_completed!("t"),
                " ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1"
            ),
            [agent.to_string()],
            first_id,
        ),
        TriggerKind::PoolTask => sql::optional(
            tx,
            concat!(
                "SELECT t.id FROM tasks t INDEXED BY tasks_pool WHERE t.status = 'unassigned' AND",
                swarm_store::sql_dependencies_completed!("t"),
                " ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1"
            ),
            [],
            first_id,
        ),
        _ => Ok(None),
    }
}

/// Inside a poll's claim, before a kind that starts work: when a daily budget that applies
/// to `agent` is reached and there is a task to start, record the refusal (once per
/// agent, task and UTC day) and return the `budget_refused` trigger instead. `None`: the
/// claim may go ahead.
pub(crate) fn refuse_if_spent(
    tx: &Connection,
    kind: TriggerKind,
    agent: AgentId,
    now: Timestamp,
) -> StoreResult<Option<Trigger>> {
    let day = UtcDay::of(now);
    let Some(refused) = day_spend(tx, agent, &day)?.refused(&day) else {
        return Ok(None);
    };
    let Some(task_id) = candidate(tx, kind, agent)? else {
        return Ok(None);
    };
    let task_id = crate::rows::task_id(&task_id)?;
    let record = BudgetRefusal::new(agent, task_id, &refused, &day, now);
    sql::execute(
        tx,
        "INSERT INTO budget_refusals (agent_id, task_id, date, cause, agent_spend_usd, agent_budget_usd,
                                      global_spend_usd, global_budget_usd, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (agent_id, task_id, date) DO NOTHING",
        params![
            record.agent_id.to_string(),
            record.task_id.to_string(),
            record.date,
            record.cause.as_str(),
            record.agent_spend_usd,
            record.agent_budget_usd,
            record.global_spend_usd,
            record.global_budget_usd,
            record.created_at
        ],
    )?;
    Ok(Some(Trigger::BudgetRefused(refused)))
}

#[async_trait]
impl BudgetStore for SqliteStore {
    async fn budget_put(&self, key: BudgetKey, daily_budget_usd: f64, now: Timestamp) -> StoreResult<Budget> {
        self.database.write(move |tx| put(tx, key, daily_budget_usd, now)).await
    }

    async fn budget_get(&self, key: BudgetKey) -> StoreResult<Option<Budget>> {
        self.database.read(|connection| get(connection, key))
    }

    async fn budget_delete(&self, key: BudgetKey, now: Timestamp) -> StoreResult<bool> {
        self.database
            .write(move |tx| {
                let removed = sql::optional(
                    tx,
                    "DELETE FROM budgets WHERE scope = ?1 AND scope_id = ?2 RETURNING daily_budget_usd",
                    params![key.scope().as_str(), key.scope_id()],
                    |row| row.get::<_, f64>(0).map_err(crate::error::db),
                )?;
                let Some(ceiling) = removed else {
                    return Ok(false);
                };
                crate::events::insert(tx, &key.change_event(Some(ceiling), None), now)?;
                Ok(true)
            })
            .await
    }

    async fn budget_list(&self) -> StoreResult<Vec<Budget>> {
        self.database.read(|connection| {
            sql::all(
                connection,
                concat!("SELECT ", budget_columns!(), " FROM budgets ORDER BY scope, scope_id"),
                [],
                budget_from_row,
            )
        })
    }

    async fn budget_refusals(&self, limit: i64) -> StoreResult<Vec<BudgetRefusal>> {
        self.database.read(|connection| {
            sql::all(
                connection,
                "SELECT task_id, date, agent_id, cause, agent_spend_usd, agent_budget_usd, global_spend_usd,
                        global_budget_usd, created_at
                 FROM budget_refusals ORDER BY created_at DESC, agent_id, task_id LIMIT ?1",
                [limit.max(0)],
                refusal_from_row,
            )
        })
    }

    async fn budget_spend(&self, agent: Option<AgentId>, day: &UtcDay) -> StoreResult<f64> {
        self.database.read(|connection| spend(connection, agent, day))
    }
}
