-- The newest reference runner's bookkeeping (issue 48). Mirrors the PostgreSQL migration
-- of the same number.
--
-- runner_records: what a runner reports about an agent or a task and reads back, one JSON
-- document per (area, owner, name): an agent's credential status and profile files, a
-- task's provider session and context-usage snapshots, an agent's active sessions.
CREATE TABLE runner_records (
    area        TEXT NOT NULL,
    owner_id    TEXT NOT NULL,
    name        TEXT NOT NULL,
    body        TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (area, owner_id, name)
);
-- Listing an area across owners, newest first (the dashboard's credential column).
CREATE INDEX runner_records_area_time ON runner_records (area, updated_at);

-- worker_events: the reference's event log (`POST /api/events`, `/api/events/batch`),
-- as the runner writes it, read back by `GET /api/events?...`.
CREATE TABLE worker_events (
    id               TEXT PRIMARY KEY,
    category         TEXT NOT NULL,
    event            TEXT NOT NULL,
    status           TEXT NOT NULL,
    source           TEXT NOT NULL,
    agent_id         TEXT,
    task_id          TEXT,
    session_id       TEXT,
    parent_event_id  TEXT,
    numeric_value    REAL,
    duration_ms      INTEGER,
    data             TEXT,
    created_at       INTEGER NOT NULL
);
CREATE INDEX worker_events_time ON worker_events (created_at);
CREATE INDEX worker_events_event_agent ON worker_events (event, agent_id, created_at);
CREATE INDEX worker_events_task ON worker_events (task_id, created_at);
