-- Leases on claims (DESIGN.md, "Claims and leases") and the poll's hot paths. Mirrors
-- the SQLite migration of the same number.

ALTER TABLE tasks ADD COLUMN lease_expires_at TIMESTAMPTZ;
ALTER TABLE tasks ADD COLUMN lease_losses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN from_pool BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE agents ADD COLUMN last_seen_at TIMESTAMPTZ;
UPDATE agents SET last_seen_at = last_updated_at;
ALTER TABLE agents ALTER COLUMN last_seen_at SET NOT NULL;

CREATE INDEX tasks_lease_expiry_idx ON tasks (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX tasks_unnotified_idx ON tasks (finished_at, id)
    WHERE notified_at IS NULL AND status IN ('completed', 'failed');
CREATE INDEX tasks_offered_oldest_idx ON tasks (offered_to, offered_at, created_at) WHERE status = 'offered';
CREATE INDEX agents_last_seen_idx ON agents (last_seen_at) WHERE status <> 'offline';
