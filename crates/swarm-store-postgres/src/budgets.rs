//! Daily budgets (issue 40): the ceilings, the day's spend, the refusals, and the check
//! the poll's claim runs inside its transaction before it starts work. The claim has
//! already locked the agent's row, so two polls of one agent decide one after the other.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row, postgres::PgRow};
use swarm_domain::{
    budget::{Budget, BudgetKey, BudgetRefusal, BudgetScope, DaySpend, RefusalCause, UtcDay},
    id::{AgentId, TaskId},
    poll::{Trigger, TriggerKind},
    time::Timestamp,
};
use swarm_store::{BudgetStore, StoreResult};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db},
};

macro_rules! budget_columns {
    () => {
        "scope, scope_id, daily_budget_usd, created_at, last_updated_at"
    };
}

fn millis(row: &PgRow, name: &str) -> sqlx::Result<i64> {
    Ok(row.try_get::<DateTime<Utc>, _>(name)?.timestamp_millis())
}

fn budget_from_row(row: PgRow) -> sqlx::Result<Budget> {
    let scope: String = row.try_get("scope")?;
    Ok(Budget {
        scope: BudgetScope::parse(&scope).map_err(|error| corrupt("scope", error))?,
        scope_id: row.try_get("scope_id")?,
        daily_budget_usd: row.try_get("daily_budget_usd")?,
        created_at: millis(&row, "created_at")?,
        last_updated_at: millis(&row, "last_updated_at")?,
        spent_today_usd: None,
    })
}

fn refusal_from_row(row: PgRow) -> sqlx::Result<BudgetRefusal> {
    let cause: String = row.try_get("cause")?;
    Ok(BudgetRefusal {
        task_id: TaskId::from_uuid(row.try_get("task_id")?),
        date: row.try_get("date")?,
        agent_id: AgentId::from_uuid(row.try_get("agent_id")?),
        cause: RefusalCause::parse(&cause).map_err(|error| corrupt("cause", error))?,
        agent_spend_usd: row.try_get("agent_spend_usd")?,
        agent_budget_usd: row.try_get("agent_budget_usd")?,
        global_spend_usd: row.try_get("global_spend_usd")?,
        global_budget_usd: row.try_get("global_budget_usd")?,
        created_at: millis(&row, "created_at")?,
    })
}

/// Session costs recorded in `[start, end)`, of one agent or of all.
async fn spend(connection: &mut PgConnection, agent: Option<AgentId>, day: &UtcDay) -> StoreResult<f64> {
    sqlx::query_scalar(
        "SELECT COALESCE(SUM(total_cost_usd), 0)::DOUBLE PRECISION FROM session_costs
         WHERE ($1::UUID IS NULL OR agent_id = $1) AND created_at >= $2 AND created_at < $3",
    )
    .bind(agent.map(|agent| agent.as_uuid()))
    .bind(day.start.datetime())
    .bind(day.end.datetime())
    .fetch_one(connection)
    .await
    .map_err(db)
}

/// The ceilings that apply to `agent` and the day's spend against each that is set.
async fn day_spend(tx: &mut PgConnection, agent: AgentId, day: &UtcDay) -> StoreResult<DaySpend> {
    let ceilings: Vec<(String, f64)> = sqlx::query_as(
        "SELECT scope, daily_budget_usd FROM budgets
         WHERE (scope = 'global' AND scope_id = '') OR (scope = 'agent' AND scope_id = $1)",
    )
    .bind(agent.to_string())
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut spent = DaySpend::default();
    for (scope, ceiling) in ceilings {
        if scope == "global" {
            spent.global_budget = Some(ceiling);
            spent.global_spend = spend(tx, None, day).await?;
        } else {
            spent.agent_budget = Some(ceiling);
            spent.agent_spend = spend(tx, Some(agent), day).await?;
        }
    }
    Ok(spent)
}

/// The task a claim of `kind` would start for `agent` now, if any (the claim's own pick,
/// without its lock: nothing is taken).
async fn candidate(tx: &mut PgConnection, kind: TriggerKind, agent: AgentId) -> StoreResult<Option<Uuid>> {
    let sql = match kind {
        TriggerKind::TaskAssigned => concat!(
            "SELECT t.id FROM tasks t WHERE t.agent_id = $1 AND t.status = 'pending' AND",
            swarm_store::sql_dependencies_completed!("t"),
            " ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1"
        ),
        TriggerKind::PoolTask => concat!(
            "SELECT t.id FROM tasks t WHERE t.status = 'unassigned' AND $1::UUID IS NOT NULL AND",
            swarm_store::sql_dependencies_completed!("t"),
            " ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1"
        ),
        _ => return Ok(None),
    };
    sqlx::query_scalar(sql).bind(agent.as_uuid()).fetch_optional(&mut *tx).await.map_err(db)
}

/// Inside a poll's claim, before a kind that starts work: when a daily budget that applies
/// to `agent` is reached and there is a task to start, record the refusal (once per
/// agent, task and UTC day) and return the `budget_refused` trigger instead. `None`: the
/// claim may go ahead.
pub(crate) async fn refuse_if_spent(
    tx: &mut PgConnection,
    kind: TriggerKind,
    agent: AgentId,
    now: Timestamp,
) -> StoreResult<Option<Trigger>> {
    let day = UtcDay::of(now);
    let Some(refused) = day_spend(tx, agent, &day).await?.refused(&day) else {
        return Ok(None);
    };
    let Some(task_id) = candidate(tx, kind, agent).await? else {
        return Ok(None);
    };
    let record = BudgetRefusal::new(agent, TaskId::from_uuid(task_id), &refused, &day, now);
    sqlx::query(
        "INSERT INTO budget_refusals (agent_id, task_id, date, cause, agent_spend_usd, agent_budget_usd,
                                      global_spend_usd, global_budget_usd, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (agent_id, task_id, date) DO NOTHING",
    )
    .bind(agent.as_uuid())
    .bind(task_id)
    .bind(&record.date)
    .bind(record.cause.as_str())
    .bind(record.agent_spend_usd)
    .bind(record.agent_budget_usd)
    .bind(record.global_spend_usd)
    .bind(record.global_budget_usd)
    .bind(now.datetime())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    Ok(Some(Trigger::BudgetRefused(refused)))
}

#[async_trait]
impl BudgetStore for PgStore {
    async fn budget_put(&self, key: BudgetKey, daily_budget_usd: f64, now: Timestamp) -> StoreResult<Budget> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // Locks the row (when there is one): the old ceiling logged is the one replaced.
        let before: Option<f64> = sqlx::query_scalar(
            "SELECT daily_budget_usd FROM budgets WHERE scope = $1 AND scope_id = $2 FOR UPDATE",
        )
        .bind(key.scope().as_str())
        .bind(key.scope_id())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        let budget = sqlx::query(concat!(
            "INSERT INTO budgets (",
            budget_columns!(),
            ") VALUES ($1, $2, $3, $4, $4)
             ON CONFLICT (scope, scope_id) DO UPDATE
                 SET daily_budget_usd = excluded.daily_budget_usd, last_updated_at = excluded.last_updated_at
             RETURNING ",
            budget_columns!()
        ))
        .bind(key.scope().as_str())
        .bind(key.scope_id())
        .bind(daily_budget_usd)
        .bind(now.datetime())
        .try_map(budget_from_row)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        crate::events::insert(&mut tx, &key.change_event(before, Some(daily_budget_usd)), now).await?;
        tx.commit().await.map_err(db)?;
        Ok(budget)
    }

    async fn budget_get(&self, key: BudgetKey) -> StoreResult<Option<Budget>> {
        sqlx::query(concat!("SELECT ", budget_columns!(), " FROM budgets WHERE scope = $1 AND scope_id = $2"))
            .bind(key.scope().as_str())
            .bind(key.scope_id())
            .try_map(budget_from_row)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)
    }

    async fn budget_delete(&self, key: BudgetKey, now: Timestamp) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let removed: Option<f64> = sqlx::query_scalar(
            "DELETE FROM budgets WHERE scope = $1 AND scope_id = $2 RETURNING daily_budget_usd",
        )
        .bind(key.scope().as_str())
        .bind(key.scope_id())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        let Some(ceiling) = removed else {
            return Ok(false);
        };
        crate::events::insert(&mut tx, &key.change_event(Some(ceiling), None), now).await?;
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    async fn budget_list(&self) -> StoreResult<Vec<Budget>> {
        sqlx::query(concat!("SELECT ", budget_columns!(), " FROM budgets ORDER BY scope, scope_id"))
            .try_map(budget_from_row)
            .fetch_all(&self.pool)
            .await
            .map_err(db)
    }

    async fn budget_refusals(&self, limit: i64) -> StoreResult<Vec<BudgetRefusal>> {
        sqlx::query(
            "SELECT task_id, date, agent_id, cause, agent_spend_usd, agent_budget_usd, global_spend_usd,
                    global_budget_usd, created_at
             FROM budget_refusals ORDER BY created_at DESC, agent_id, task_id LIMIT $1",
        )
        .bind(limit.max(0))
        .try_map(refusal_from_row)
        .fetch_all(&self.pool)
        .await
        .map_err(db)
    }

    async fn budget_spend(&self, agent: Option<AgentId>, day: &UtcDay) -> StoreResult<f64> {
        let mut connection = self.pool.acquire().await.map_err(db)?;
        spend(&mut connection, agent, day).await
    }
}
