//! Daily budgets (issue 40): who may see and set them. The refusal itself happens in the
//! poll's claim (`poll.rs` over each store's claim transaction).
//!
//! Only the operator (the hub's key) sets or removes a budget: a ceiling an agent could
//! raise would stop nothing, and the lead is an agent too. Reading is open to the
//! operator and the lead for every budget; a worker sees the global budget and its own.

use swarm_domain::{
    agent::Agent,
    budget::{
        Budget, BudgetKey, BudgetRefusal, DailyBudgetUsd, REFUSALS_LIMIT_DEFAULT, REFUSALS_LIMIT_MAX, UtcDay,
    },
    id::AgentId,
};

use crate::{Caller, Change, Service, ServiceError, ServiceResult};

/// Who is reading: everything, or a worker's own view.
enum Reader {
    All,
    Worker(AgentId),
}

impl Reader {
    fn may_read(&self, key: BudgetKey) -> bool {
        match (self, key) {
            (Reader::All, _) | (Reader::Worker(_), BudgetKey::Global) => true,
            (Reader::Worker(own), BudgetKey::Agent(agent)) => *own == agent,
        }
    }
}

impl Service {
    /// Sets (creates or replaces) a daily ceiling; the next poll sees it.
    pub async fn budget_put(
        &self,
        caller: Caller,
        key: BudgetKey,
        ceiling: DailyBudgetUsd,
    ) -> ServiceResult<Budget> {
        require_operator(caller, "set")?;
        if let BudgetKey::Agent(agent) = key {
            self.store.agent_get(agent).await?.ok_or_else(|| {
                ServiceError::NotFound(format!(
                    "agent {agent} is not registered: a budget is set for an agent that exists (GET /api/agents lists them)"
                ))
            })?;
        }
        let budget = self.store.budget_put(key, ceiling.get(), self.clock.now()).await?;
        self.publish(Change::Budget { scope: key.scope(), scope_id: key.scope_id() });
        self.with_spend(budget).await
    }

    pub async fn budget_get(&self, caller: Caller, key: BudgetKey) -> ServiceResult<Budget> {
        let reader = self.reader(caller).await?;
        if !reader.may_read(key) {
            return Err(ServiceError::Forbidden("a worker reads the global budget and its own only".into()));
        }
        let budget = self.store.budget_get(key).await?.ok_or_else(|| not_configured(key))?;
        self.with_spend(budget).await
    }

    /// Removes a ceiling: its scope is unlimited from the next poll on.
    pub async fn budget_delete(&self, caller: Caller, key: BudgetKey) -> ServiceResult<()> {
        require_operator(caller, "remove")?;
        if !self.store.budget_delete(key, self.clock.now()).await? {
            return Err(not_configured(key));
        }
        self.publish(Change::Budget { scope: key.scope(), scope_id: key.scope_id() });
        Ok(())
    }

    /// Every budget the caller may read, by scope then id, each with today's spend.
    pub async fn budget_list(&self, caller: Caller) -> ServiceResult<Vec<Budget>> {
        let reader = self.reader(caller).await?;
        let mut budgets = Vec::new();
        for budget in self.store.budget_list().await? {
            if key_of(&budget).is_some_and(|key| reader.may_read(key)) {
                budgets.push(self.with_spend(budget).await?);
            }
        }
        Ok(budgets)
    }

    /// The refusals recorded, newest first (a worker: its own).
    pub async fn budget_refusals(
        &self,
        caller: Caller,
        limit: Option<i64>,
    ) -> ServiceResult<Vec<BudgetRefusal>> {
        let limit = limit.unwrap_or(REFUSALS_LIMIT_DEFAULT);
        if !(1..=REFUSALS_LIMIT_MAX).contains(&limit) {
            return Err(ServiceError::Invalid(format!("limit must be between 1 and {REFUSALS_LIMIT_MAX}")));
        }
        let reader = self.reader(caller).await?;
        let refusals = self.store.budget_refusals(limit).await?;
        Ok(match reader {
            Reader::All => refusals,
            Reader::Worker(own) => refusals.into_iter().filter(|refusal| refusal.agent_id == own).collect(),
        })
    }

    async fn reader(&self, caller: Caller) -> ServiceResult<Reader> {
        Ok(match self.caller_agent(caller).await? {
            None => Reader::All,
            Some(Agent { is_lead: true, .. }) => Reader::All,
            Some(agent) => Reader::Worker(agent.id),
        })
    }

    /// The budget with what its scope spent so far today (UTC).
    async fn with_spend(&self, budget: Budget) -> ServiceResult<Budget> {
        let agent = key_of(&budget).and_then(|key| match key {
            BudgetKey::Agent(agent) => Some(agent),
            BudgetKey::Global => None,
        });
        let spent = self.store.budget_spend(agent, &UtcDay::of(self.clock.now())).await?;
        Ok(Budget { spent_today_usd: Some(spent), ..budget })
    }
}

fn key_of(budget: &Budget) -> Option<BudgetKey> {
    match budget.scope {
        swarm_domain::budget::BudgetScope::Global => Some(BudgetKey::Global),
        swarm_domain::budget::BudgetScope::Agent => {
            AgentId::parse(&budget.scope_id).ok().map(BudgetKey::Agent)
        }
    }
}

fn require_operator(caller: Caller, verb: &str) -> ServiceResult<()> {
    match caller {
        Caller::Operator => Ok(()),
        Caller::Agent(_) => Err(ServiceError::Forbidden(format!(
            "only the operator (the hub's key) may {verb} a budget: an agent may not change its own ceiling"
        ))),
    }
}

fn not_configured(key: BudgetKey) -> ServiceError {
    let which = match key {
        BudgetKey::Global => "no global budget is set".to_string(),
        BudgetKey::Agent(agent) => format!("no budget is set for agent {agent}"),
    };
    ServiceError::NotFound(format!("{which} (PUT /api/budgets/... sets one)"))
}
