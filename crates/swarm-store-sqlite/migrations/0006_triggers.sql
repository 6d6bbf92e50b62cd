-- Triggers (cron, interval, once, webhook, github, manual), the agent sessions of
-- persistent triggers, who awaits which task's result, and webhook deliveries seen.
-- Mirrors the PostgreSQL migration of the same number.

CREATE TABLE triggers (
    id               TEXT PRIMARY KEY NOT NULL,
    name             TEXT NOT NULL UNIQUE,
    description      TEXT,
    type             TEXT NOT NULL CHECK (type IN ('cron', 'interval', 'once', 'webhook', 'github', 'manual')),
    schedule         TEXT,
    timezone         TEXT NOT NULL DEFAULT 'UTC',
    interval_seconds INTEGER,
    run_at           INTEGER,
    webhook_secret   TEXT,
    webhook_public   INTEGER NOT NULL DEFAULT 0,
    github_bot       TEXT,
    -- 'pool', 'lead' or an agent id.
    target           TEXT NOT NULL,
    prompt           TEXT NOT NULL DEFAULT '',
    task_type        TEXT,
    -- JSON array of strings.
    tags             TEXT NOT NULL DEFAULT '[]',
    priority         INTEGER NOT NULL DEFAULT 50,
    session_mode     TEXT NOT NULL CHECK (session_mode IN ('ephemeral', 'persistent')),
    enabled          INTEGER NOT NULL DEFAULT 1,
    last_run_at      INTEGER,
    run_count        INTEGER NOT NULL DEFAULT 0,
    next_run_at      INTEGER,
    created_by       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- The scheduler's scan: enabled triggers with a slot.
CREATE INDEX triggers_due ON triggers (next_run_at) WHERE enabled = 1 AND next_run_at IS NOT NULL;

CREATE TABLE trigger_sessions (
    trigger_name TEXT NOT NULL,
    session_key  TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (trigger_name, session_key)
);

-- A task created from a trigger session, awaited by that session's agent. The poll's
-- `task_result` trigger claims a finished one (processing_since, lease); the runner
-- acknowledges it (delivered_at) after resuming the session with the result.
CREATE TABLE task_awaits (
    task_id          TEXT PRIMARY KEY NOT NULL REFERENCES tasks (id),
    agent_id         TEXT NOT NULL REFERENCES agents (id),
    parent_task_id   TEXT NOT NULL REFERENCES tasks (id),
    trigger_name     TEXT NOT NULL,
    session_key      TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    delivered_at     INTEGER,
    processing_since INTEGER,
    lease_expires_at INTEGER
);

CREATE INDEX task_awaits_open ON task_awaits (agent_id) WHERE delivered_at IS NULL AND processing_since IS NULL;
CREATE INDEX task_awaits_lease_expiry ON task_awaits (lease_expires_at) WHERE lease_expires_at IS NOT NULL;

-- Deliveries already turned into tasks (`X-GitHub-Delivery`): a replay fires nothing.
CREATE TABLE webhook_deliveries (
    trigger_id  TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (trigger_id, delivery_id)
);

ALTER TABLE tasks ADD COLUMN trigger_name TEXT;
ALTER TABLE tasks ADD COLUMN session_key TEXT;
