-- Leases on claims (DESIGN.md, "Claims and leases") and the poll's hot paths.

-- The holder's claim on a reviewing or in_progress task runs out at this time unless a
-- heartbeat extends it; NULL in every other status.
ALTER TABLE tasks ADD COLUMN lease_expires_at INTEGER;
-- How often a holder went silent on this task; the rescuer fails it past a bound.
ALTER TABLE tasks ADD COLUMN lease_losses INTEGER NOT NULL DEFAULT 0;
-- The assignee took it from the pool: an expired lease returns it to the pool.
ALTER TABLE tasks ADD COLUMN from_pool INTEGER NOT NULL DEFAULT 0 CHECK (from_pool IN (0, 1));

-- The agent's last registration or heartbeat; silent agents are marked offline.
ALTER TABLE agents ADD COLUMN last_seen_at INTEGER NOT NULL DEFAULT 0;
UPDATE agents SET last_seen_at = last_updated_at;

-- The rescuer's scan: only rows holding a lease are indexed.
CREATE INDEX tasks_lease_expiry ON tasks (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
-- The lead's tasks_finished: finished tasks nobody was told about yet.
CREATE INDEX tasks_unnotified ON tasks (finished_at, id)
    WHERE notified_at IS NULL AND status IN ('completed', 'failed');
-- The oldest offer first.
CREATE INDEX tasks_offered_oldest ON tasks (offered_to, offered_at, created_at) WHERE status = 'offered';
-- The rescuer's silent agents.
CREATE INDEX agents_last_seen ON agents (last_seen_at) WHERE status <> 'offline';
