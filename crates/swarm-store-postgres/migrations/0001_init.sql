-- The first schema of swarm on PostgreSQL. It mirrors the SQLite schema table for table
-- and column for column; only the types differ (UUID, TIMESTAMPTZ, arrays, JSONB).

CREATE TABLE agents (
    id              UUID PRIMARY KEY,
    name            TEXT NOT NULL,
    is_lead         BOOLEAN NOT NULL DEFAULT FALSE,
    status          TEXT NOT NULL DEFAULT 'idle'
                    CONSTRAINT agents_status_check CHECK (status IN ('idle', 'busy', 'offline')),
    description     TEXT,
    role            TEXT,
    capabilities    TEXT[] NOT NULL DEFAULT '{}',
    max_tasks       INTEGER NOT NULL DEFAULT 1
                    CONSTRAINT agents_max_tasks_check CHECK (max_tasks BETWEEN 1 AND 20),
    created_at      TIMESTAMPTZ NOT NULL,
    last_updated_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT agents_name_key UNIQUE (name)
);

-- The one-lead rule looks up active leads.
CREATE INDEX agents_lead_status_idx ON agents (is_lead, status);

CREATE TABLE tasks (
    id                 UUID PRIMARY KEY,
    agent_id           UUID CONSTRAINT tasks_agent_id_fkey REFERENCES agents (id),
    creator_agent_id   UUID CONSTRAINT tasks_creator_agent_id_fkey REFERENCES agents (id),
    task               TEXT NOT NULL,
    status             TEXT NOT NULL
                       CONSTRAINT tasks_status_check CHECK (status IN (
                           'backlog', 'unassigned', 'offered', 'reviewing', 'pending',
                           'in_progress', 'paused', 'completed', 'failed', 'cancelled')),
    source             TEXT NOT NULL DEFAULT 'api',
    task_type          TEXT,
    priority           INTEGER NOT NULL DEFAULT 50
                       CONSTRAINT tasks_priority_check CHECK (priority BETWEEN 0 AND 100),
    offered_to         UUID CONSTRAINT tasks_offered_to_fkey REFERENCES agents (id),
    offered_at         TIMESTAMPTZ,
    accepted_at        TIMESTAMPTZ,
    rejection_reason   TEXT,
    created_at         TIMESTAMPTZ NOT NULL,
    last_updated_at    TIMESTAMPTZ NOT NULL,
    finished_at        TIMESTAMPTZ,
    failure_reason     TEXT,
    output             TEXT,
    progress           TEXT,
    notified_at        TIMESTAMPTZ,
    slack_channel_id   TEXT,
    slack_thread_ts    TEXT,
    slack_user_id      TEXT,
    mention_message_id TEXT,
    mention_channel_id TEXT,
    github_repo        TEXT,
    github_event_type  TEXT,
    github_number      BIGINT,
    github_comment_id  BIGINT,
    github_author      TEXT,
    github_url         TEXT
);

-- The poll: best ready pool or pending task first.
CREATE INDEX tasks_status_priority_idx ON tasks (status, priority DESC, created_at);
-- An agent's work and its in_progress count (capacity).
CREATE INDEX tasks_agent_status_idx ON tasks (agent_id, status);
CREATE INDEX tasks_offered_to_status_idx ON tasks (offered_to, status);
-- Listing, newest first.
CREATE INDEX tasks_created_idx ON tasks (created_at DESC, id DESC);

-- One row per tag so that "tasks tagged x" is an index probe, not a scan of a list column.
CREATE TABLE task_tags (
    task_id  UUID NOT NULL CONSTRAINT task_tags_task_id_fkey REFERENCES tasks (id),
    position INTEGER NOT NULL,
    tag      TEXT NOT NULL,
    CONSTRAINT task_tags_pkey PRIMARY KEY (task_id, tag)
);
CREATE INDEX task_tags_tag_idx ON task_tags (tag, task_id);

CREATE TABLE task_dependencies (
    task_id            UUID NOT NULL
                       CONSTRAINT task_dependencies_task_id_fkey REFERENCES tasks (id),
    depends_on_task_id UUID NOT NULL
                       CONSTRAINT task_dependencies_depends_on_task_id_fkey REFERENCES tasks (id),
    position           INTEGER NOT NULL,
    CONSTRAINT task_dependencies_pkey PRIMARY KEY (task_id, depends_on_task_id)
);
-- Which tasks wait on this one.
CREATE INDEX task_dependencies_depends_on_idx ON task_dependencies (depends_on_task_id);

-- History outlives what it describes, so no foreign keys here.
CREATE TABLE events (
    id         UUID PRIMARY KEY,
    event_type TEXT NOT NULL,
    agent_id   UUID,
    task_id    UUID,
    old_value  TEXT,
    new_value  TEXT,
    metadata   JSONB,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX events_created_idx ON events (created_at DESC, id DESC);
CREATE INDEX events_agent_created_idx ON events (agent_id, created_at);
CREATE INDEX events_task_created_idx ON events (task_id, created_at);

-- Written by runners, which may report lines for tasks this hub no longer knows: no keys.
CREATE TABLE session_logs (
    id          BIGSERIAL PRIMARY KEY,
    session_id  TEXT NOT NULL,
    iteration   BIGINT NOT NULL,
    task_id     UUID,
    cli         TEXT,
    line_number BIGINT NOT NULL,
    content     TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_logs_task_idx ON session_logs (task_id, id);
-- Where the next append of a (session, iteration) continues.
CREATE INDEX session_logs_session_idx ON session_logs (session_id, iteration, line_number);

CREATE TABLE session_costs (
    id                 BIGSERIAL PRIMARY KEY,
    session_id         TEXT NOT NULL,
    agent_id           UUID NOT NULL,
    task_id            UUID,
    total_cost_usd     DOUBLE PRECISION NOT NULL,
    input_tokens       BIGINT,
    output_tokens      BIGINT,
    cache_read_tokens  BIGINT,
    cache_write_tokens BIGINT,
    duration_ms        BIGINT,
    num_turns          BIGINT,
    model              TEXT,
    is_error           BOOLEAN NOT NULL DEFAULT FALSE,
    created_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_costs_created_idx ON session_costs (created_at DESC, id DESC);
CREATE INDEX session_costs_task_idx ON session_costs (task_id, created_at DESC);
CREATE INDEX session_costs_agent_idx ON session_costs (agent_id, created_at DESC);
