-- Trust (issue 23).

-- A delivery mark may expire: a signed body's hash is remembered for the replay window
-- only, so the same alert sent again tomorrow is new work. NULL: kept for good.
ALTER TABLE webhook_deliveries ADD COLUMN expires_at INTEGER;

-- Agent tokens (AGENT_AUTH=token). Only the SHA-256 of a token is kept (a token is 256
-- random bits, so a fast hash is enough: there is nothing to guess). A revoked token is
-- refused by the next request, on every replica, because every request reads this row.
CREATE TABLE agent_tokens (
    id          TEXT PRIMARY KEY NOT NULL,
    agent_id    TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX agent_tokens_by_agent ON agent_tokens (agent_id, created_at);
