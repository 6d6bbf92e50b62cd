-- What an agent holds, for its heartbeat (issue 25, the soak's p99). Every heartbeat extends
-- the leases of the claims the agent holds (`held_claims::extend_leases`). For task results
-- that was a sequential scan of `task_awaits`, which grows with every delegation awaited.
-- For mail, PostgreSQL finds the held rows through `mail_undelivered` once it has statistics
-- on the table; without them it may walk the recipient's whole mailbox, as SQLite did (2 ms at
-- 2,000 mails each, 11.6 ms at 10,000, on its one writer). These partial indexes hold exactly
-- the claimed rows, under the same condition the statements write
-- (`swarm_store::sql::held_claims`), on both stores.
CREATE INDEX mail_held ON mail (to_agent_id) WHERE status = 'processing';
CREATE INDEX task_awaits_held ON task_awaits (agent_id)
    WHERE processing_since IS NOT NULL AND delivered_at IS NULL;
