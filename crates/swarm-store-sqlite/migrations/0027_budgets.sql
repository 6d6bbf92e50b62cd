-- Daily budgets (issue 40). Mirrors the PostgreSQL migration of the same number.
--
-- budgets: a ceiling in USD on one UTC day's session costs, for the hub ('global', id '')
-- or one agent ('agent', the agent's id). Stamps in epoch milliseconds, like the rest.
CREATE TABLE budgets (
    scope             TEXT NOT NULL CHECK (scope IN ('global', 'agent')),
    scope_id          TEXT NOT NULL,
    daily_budget_usd  REAL NOT NULL CHECK (daily_budget_usd >= 0),
    created_at        INTEGER NOT NULL,
    last_updated_at   INTEGER NOT NULL,
    PRIMARY KEY (scope, scope_id)
);

-- budget_refusals: a poll that would have started this task for this agent was refused
-- by a budget; one row per (agent, task, UTC day), however often the runner asks again.
CREATE TABLE budget_refusals (
    agent_id           TEXT NOT NULL,
    task_id            TEXT NOT NULL,
    date               TEXT NOT NULL,
    cause              TEXT NOT NULL CHECK (cause IN ('global', 'agent')),
    agent_spend_usd    REAL,
    agent_budget_usd   REAL,
    global_spend_usd   REAL,
    global_budget_usd  REAL,
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (agent_id, task_id, date)
);
CREATE INDEX budget_refusals_time ON budget_refusals (created_at);

-- The hub's spend of a day is a range of session costs by time, read in the claim of a
-- poll while a global budget is set.
CREATE INDEX session_costs_created ON session_costs (created_at);
