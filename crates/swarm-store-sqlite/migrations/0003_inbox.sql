-- The lead's inbox (Slack messages routed to the lead) and the Slack bridge's once-only
-- marks. Mirrors the PostgreSQL migration of the same number.

CREATE TABLE inbox_messages (
    id                   TEXT PRIMARY KEY NOT NULL,
    agent_id             TEXT NOT NULL REFERENCES agents (id),
    content              TEXT NOT NULL,
    source               TEXT NOT NULL DEFAULT 'slack',
    status               TEXT NOT NULL CHECK (status IN ('unread', 'processing', 'read',
                             'responded', 'delegated')),
    slack_channel_id     TEXT,
    slack_thread_ts      TEXT,
    slack_user_id        TEXT,
    matched_text         TEXT,
    delegated_to_task_id TEXT REFERENCES tasks (id),
    response_text        TEXT,
    -- While processing: the poll's claim runs out at this time unless the lead heartbeats.
    lease_expires_at     INTEGER,
    created_at           INTEGER NOT NULL,
    last_updated_at      INTEGER NOT NULL
);

-- The poll: a lead's oldest unread messages.
CREATE INDEX inbox_messages_agent_status ON inbox_messages (agent_id, status, created_at, id);
-- The rescuer's scan.
CREATE INDEX inbox_messages_lease_expiry ON inbox_messages (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

-- (kind, key) taken once: Slack event ids handled, task outcomes and progress notes posted.
CREATE TABLE slack_marks (
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
);

-- Slack tasks whose outcome may still need posting.
CREATE INDEX tasks_slack_finished ON tasks (finished_at, id)
    WHERE slack_channel_id IS NOT NULL AND status IN ('completed', 'failed');
