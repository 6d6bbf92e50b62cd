-- Daily budgets (issue 40). Mirrors the SQLite migration of the same number.
--
-- budgets: a ceiling in USD on one UTC day's session costs, for the hub ('global', id '')
-- or one agent ('agent', the agent's id as text).
CREATE TABLE budgets (
    scope             TEXT NOT NULL CHECK (scope IN ('global', 'agent')),
    scope_id          TEXT NOT NULL,
    daily_budget_usd  DOUBLE PRECISION NOT NULL CHECK (daily_budget_usd >= 0),
    created_at        TIMESTAMPTZ NOT NULL,
    last_updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (scope, scope_id)
);

-- budget_refusals: a poll that would have started this task for this agent was refused
-- by a budget; one row per (agent, task, UTC day), however often the runner asks again.
CREATE TABLE budget_refusals (
    agent_id           UUID NOT NULL,
    task_id            UUID NOT NULL,
    date               TEXT NOT NULL,
    cause              TEXT NOT NULL CHECK (cause IN ('global', 'agent')),
    agent_spend_usd    DOUBLE PRECISION,
    agent_budget_usd   DOUBLE PRECISION,
    global_spend_usd   DOUBLE PRECISION,
    global_budget_usd  DOUBLE PRECISION,
    created_at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (agent_id, task_id, date)
);
CREATE INDEX budget_refusals_time ON budget_refusals (created_at);
