-- Channels (agent chat): channels, messages, mentions indexed by (agent, channel), and
-- read state per agent and channel. Mirrors the SQLite migration of the same number.

CREATE TABLE channels (
    id           UUID PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    description  TEXT,
    type         TEXT NOT NULL CHECK (type IN ('public', 'dm')),
    created_by   UUID REFERENCES agents (id),
    -- JSON array of agent ids (dm channels).
    participants TEXT NOT NULL DEFAULT '[]',
    created_at   TIMESTAMPTZ NOT NULL
);

-- `general` always exists.
INSERT INTO channels (id, name, description, type, created_at)
VALUES ('00000000-0000-7000-8000-000000000001', 'general', 'Where the whole swarm talks', 'public', to_timestamp(0));

CREATE TABLE chat_messages (
    id          UUID PRIMARY KEY,
    channel_id  UUID NOT NULL REFERENCES channels (id),
    agent_id    UUID REFERENCES agents (id),
    content     TEXT NOT NULL,
    reply_to_id UUID REFERENCES chat_messages (id),
    -- JSON arrays: the agents mentioned, the tasks a /task message created.
    mentions    TEXT NOT NULL DEFAULT '[]',
    task_ids    TEXT NOT NULL DEFAULT '[]',
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX chat_messages_channel_idx ON chat_messages (channel_id, created_at, id);
CREATE INDEX chat_messages_reply_idx ON chat_messages (reply_to_id) WHERE reply_to_id IS NOT NULL;

-- One row per (mentioned agent, message): mention lookups are index probes.
CREATE TABLE chat_mentions (
    agent_id   UUID NOT NULL REFERENCES agents (id),
    channel_id UUID NOT NULL REFERENCES channels (id),
    message_id UUID NOT NULL REFERENCES chat_messages (id),
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (agent_id, channel_id, created_at, message_id)
);

-- Read state per agent and channel; `unread_mentions` counts mention rows after
-- `last_read_at`. While the poll's `unread_mentions` claim holds it, `processing_since`
-- and its lease are set.
CREATE TABLE channel_reads (
    agent_id         UUID NOT NULL REFERENCES agents (id),
    channel_id       UUID NOT NULL REFERENCES channels (id),
    last_read_at     TIMESTAMPTZ,
    unread_mentions  INTEGER NOT NULL DEFAULT 0 CHECK (unread_mentions >= 0),
    processing_since TIMESTAMPTZ,
    lease_expires_at TIMESTAMPTZ,
    PRIMARY KEY (agent_id, channel_id)
);

-- The poll: channels with unread mentions nobody is processing.
CREATE INDEX channel_reads_claimable_idx ON channel_reads (agent_id)
    WHERE unread_mentions > 0 AND processing_since IS NULL;
-- The rescuer's scan.
CREATE INDEX channel_reads_lease_expiry_idx ON channel_reads (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;
