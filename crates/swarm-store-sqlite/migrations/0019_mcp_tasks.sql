-- MCP tasks (issue 26, the Tasks extension SEP-2663): a tool call a client reads back with
-- tasks/get. Kept here, not in the process that took the call, so any replica answers for
-- it. Mirrors the PostgreSQL migration of the same number.
CREATE TABLE mcp_tasks (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    tool        TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status = 'working' OR status = 'completed'
                                   OR status = 'failed' OR status = 'cancelled'),
    -- = and OR, not IN: see 0007_cheaper_writes.sql
    outcome     TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    deadline    INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
-- Forgetting the expired ones walks this.
CREATE INDEX mcp_tasks_expiry ON mcp_tasks (expires_at);
