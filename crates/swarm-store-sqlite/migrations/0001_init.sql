-- The first schema of swarm on SQLite. The PostgreSQL backend mirrors these table and
-- column names. Timestamps are unix milliseconds, ids lowercase hyphenated UUID text.

CREATE TABLE agents (
    id              TEXT PRIMARY KEY NOT NULL,
    name            TEXT NOT NULL UNIQUE,
    is_lead         INTEGER NOT NULL DEFAULT 0 CHECK (is_lead IN (0, 1)),
    status          TEXT NOT NULL CHECK (status IN ('idle', 'busy', 'offline')),
    description     TEXT,
    role            TEXT,
    capabilities    TEXT NOT NULL DEFAULT '[]',
    max_tasks       INTEGER NOT NULL DEFAULT 1 CHECK (max_tasks BETWEEN 1 AND 20),
    created_at      INTEGER NOT NULL,
    last_updated_at INTEGER NOT NULL
);

-- The one-lead rule looks up active leads.
CREATE INDEX agents_lead_status ON agents (is_lead, status);

CREATE TABLE tasks (
    id                 TEXT PRIMARY KEY NOT NULL,
    agent_id           TEXT REFERENCES agents (id),
    creator_agent_id   TEXT REFERENCES agents (id),
    task               TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('backlog', 'unassigned', 'offered',
                           'reviewing', 'pending', 'in_progress', 'paused', 'completed',
                           'failed', 'cancelled')),
    source             TEXT NOT NULL,
    task_type          TEXT,
    priority           INTEGER NOT NULL DEFAULT 50 CHECK (priority BETWEEN 0 AND 100),
    offered_to         TEXT REFERENCES agents (id),
    offered_at         INTEGER,
    accepted_at        INTEGER,
    rejection_reason   TEXT,
    created_at         INTEGER NOT NULL,
    last_updated_at    INTEGER NOT NULL,
    finished_at        INTEGER,
    failure_reason     TEXT,
    output             TEXT,
    progress           TEXT,
    notified_at        INTEGER,
    slack_channel_id   TEXT,
    slack_thread_ts    TEXT,
    slack_user_id      TEXT,
    mention_message_id TEXT,
    mention_channel_id TEXT,
    github_repo        TEXT,
    github_event_type  TEXT,
    github_number      INTEGER,
    github_comment_id  INTEGER,
    github_author      TEXT,
    github_url         TEXT
);

-- The poll: best ready task by priority then age, per status.
CREATE INDEX tasks_status_priority ON tasks (status, priority DESC, created_at);
-- An agent's work (capacity, busy/idle) and offers waiting on it.
CREATE INDEX tasks_agent_status ON tasks (agent_id, status);
CREATE INDEX tasks_offered_status ON tasks (offered_to, status);
-- Listing, newest first.
CREATE INDEX tasks_created ON tasks (created_at DESC, id DESC);

CREATE TABLE task_tags (
    task_id  TEXT NOT NULL REFERENCES tasks (id),
    position INTEGER NOT NULL,
    tag      TEXT NOT NULL,
    PRIMARY KEY (task_id, tag)
);

-- Filtering by tag is an index probe, not a scan.
CREATE INDEX task_tags_tag ON task_tags (tag, task_id);

CREATE TABLE task_dependencies (
    task_id            TEXT NOT NULL REFERENCES tasks (id),
    depends_on_task_id TEXT NOT NULL REFERENCES tasks (id),
    position           INTEGER NOT NULL,
    PRIMARY KEY (task_id, depends_on_task_id)
);

CREATE INDEX task_dependencies_depends_on ON task_dependencies (depends_on_task_id);

-- No foreign keys: the history must outlive what it talks about.
CREATE TABLE events (
    id         TEXT PRIMARY KEY NOT NULL,
    event_type TEXT NOT NULL,
    agent_id   TEXT,
    task_id    TEXT,
    old_value  TEXT,
    new_value  TEXT,
    metadata   TEXT,
    created_at INTEGER NOT NULL
);

CREATE INDEX events_created ON events (created_at, id);
CREATE INDEX events_agent_created ON events (agent_id, created_at);
CREATE INDEX events_task_created ON events (task_id, created_at);

CREATE TABLE session_logs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL,
    iteration   INTEGER NOT NULL,
    task_id     TEXT,
    cli         TEXT,
    line_number INTEGER NOT NULL,
    content     TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE INDEX session_logs_task ON session_logs (task_id, id);
-- Appends continue the line numbers of their (session, iteration).
CREATE INDEX session_logs_session ON session_logs (session_id, iteration, line_number);

CREATE TABLE session_costs (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id         TEXT NOT NULL,
    agent_id           TEXT NOT NULL,
    task_id            TEXT,
    total_cost_usd     REAL NOT NULL,
    input_tokens       INTEGER,
    output_tokens      INTEGER,
    cache_read_tokens  INTEGER,
    cache_write_tokens INTEGER,
    duration_ms        INTEGER,
    num_turns          INTEGER,
    model              TEXT,
    is_error           INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    created_at         INTEGER NOT NULL
);

CREATE INDEX session_costs_task ON session_costs (task_id);
CREATE INDEX session_costs_agent_created ON session_costs (agent_id, created_at);
