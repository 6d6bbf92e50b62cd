-- Agent mail: append-only messages between agents, with the recipient's delivery state
-- and, for mail awaiting a response, when it was answered. Mirrors the SQLite
-- migration of the same number.

CREATE TABLE mail (
    id                UUID PRIMARY KEY,
    from_agent_id     UUID NOT NULL REFERENCES agents (id),
    to_agent_id       UUID NOT NULL REFERENCES agents (id),
    type              TEXT NOT NULL,
    subject           TEXT NOT NULL,
    body              TEXT NOT NULL,
    priority          TEXT NOT NULL CHECK (priority IN ('urgent', 'normal', 'low')),
    -- 0 urgent, 1 normal, 2 low: delivery order.
    priority_rank     INTEGER NOT NULL CHECK (priority_rank BETWEEN 0 AND 2),
    awaiting_response BOOLEAN NOT NULL DEFAULT FALSE,
    in_reply_to       UUID REFERENCES mail (id),
    status            TEXT NOT NULL DEFAULT 'unread' CHECK (status IN ('unread', 'processing', 'read')),
    read_at           TIMESTAMPTZ,
    answered_at       TIMESTAMPTZ,
    processing_since  TIMESTAMPTZ,
    lease_expires_at  TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL
);

-- The recipient's undelivered mail by priority: the unread counts, the poll's
-- `urgent_mail` probe and delivery in order are index scans of this.
CREATE INDEX mail_undelivered ON mail (to_agent_id, priority_rank, created_at, id)
    WHERE status <> 'read';
-- Mailbox pages and `swarm mail log`.
CREATE INDEX mail_inbox ON mail (to_agent_id, created_at, id);
CREATE INDEX mail_outbox ON mail (from_agent_id, created_at, id);
-- The sender's waiting state.
CREATE INDEX mail_awaiting ON mail (from_agent_id)
    WHERE awaiting_response AND answered_at IS NULL;
-- The rescuer's scan.
CREATE INDEX mail_lease_expiry ON mail (lease_expires_at) WHERE lease_expires_at IS NOT NULL;

-- The runner process holding a lead-side claim (`X-Runner-ID`): its heartbeats extend
-- it, another runner's of the same agent do not, so a crashed runner's claims run out.
ALTER TABLE inbox_messages ADD COLUMN lease_holder UUID;
ALTER TABLE channel_reads ADD COLUMN lease_holder UUID;
ALTER TABLE mail ADD COLUMN lease_holder UUID;
