-- The lead's inbox (Slack messages routed to the lead) and the Slack bridge's once-only
-- marks. Mirrors the SQLite migration of the same number.

CREATE TABLE inbox_messages (
    id                   UUID PRIMARY KEY,
    agent_id             UUID NOT NULL CONSTRAINT inbox_messages_agent_id_fkey REFERENCES agents (id),
    content              TEXT NOT NULL,
    source               TEXT NOT NULL DEFAULT 'slack',
    status               TEXT NOT NULL
                         CONSTRAINT inbox_messages_status_check CHECK (status IN (
                             'unread', 'processing', 'read', 'responded', 'delegated')),
    slack_channel_id     TEXT,
    slack_thread_ts      TEXT,
    slack_user_id        TEXT,
    matched_text         TEXT,
    delegated_to_task_id UUID CONSTRAINT inbox_messages_task_fkey REFERENCES tasks (id),
    response_text        TEXT,
    lease_expires_at     TIMESTAMPTZ,
    created_at           TIMESTAMPTZ NOT NULL,
    last_updated_at      TIMESTAMPTZ NOT NULL
);

CREATE INDEX inbox_messages_agent_status_idx ON inbox_messages (agent_id, status, created_at, id);
CREATE INDEX inbox_messages_lease_expiry_idx ON inbox_messages (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

CREATE TABLE slack_marks (
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, key)
);

CREATE INDEX tasks_slack_finished_idx ON tasks (finished_at, id)
    WHERE slack_channel_id IS NOT NULL AND status IN ('completed', 'failed');
