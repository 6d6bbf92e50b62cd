//! Daily budgets (issue 40), beside [`crate::Store`]: the ceilings an operator sets, the
//! day's spend read from the session costs, and the refusals the poll recorded. The
//! refusal itself is decided inside the poll's claim transaction (each driver's
//! `budgets.rs`, called from its `poll.rs`), not here.

use async_trait::async_trait;
use swarm_domain::{
    budget::{Budget, BudgetKey, BudgetRefusal, UtcDay},
    id::AgentId,
};

use crate::StoreResult;
use swarm_domain::time::Timestamp;

#[async_trait]
pub trait BudgetStore: Send + Sync {
    /// Creates the budget or replaces its ceiling (`created_at` kept), logging
    /// `budget_set` (old → new ceiling), in one transaction.
    async fn budget_put(&self, key: BudgetKey, daily_budget_usd: f64, now: Timestamp) -> StoreResult<Budget>;
    async fn budget_get(&self, key: BudgetKey) -> StoreResult<Option<Budget>>;
    /// Removes it, logging `budget_removed`, in one transaction; `false` (and nothing
    /// logged) when there was none.
    async fn budget_delete(&self, key: BudgetKey, now: Timestamp) -> StoreResult<bool>;
    /// Ordered by scope, then id.
    async fn budget_list(&self) -> StoreResult<Vec<Budget>>;
    /// Newest first, at most `limit`.
    async fn budget_refusals(&self, limit: i64) -> StoreResult<Vec<BudgetRefusal>>;
    /// The session costs recorded during `day`, of one agent or of all.
    async fn budget_spend(&self, agent: Option<AgentId>, day: &UtcDay) -> StoreResult<f64>;
}
