-- MCP tasks (issue 26, the Tasks extension SEP-2663): a tool call a client reads back with
-- tasks/get. Kept here, not in the process that took the call, so any replica answers for
-- it. Mirrors the SQLite migration of the same number.
CREATE TABLE mcp_tasks (
    id          UUID PRIMARY KEY,
    agent_id    UUID NOT NULL,
    tool        TEXT NOT NULL,
    arguments   JSONB NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('working', 'completed', 'failed', 'cancelled')),
    outcome     JSONB,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    deadline    TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
-- Forgetting the expired ones walks this.
CREATE INDEX mcp_tasks_expiry ON mcp_tasks (expires_at);
