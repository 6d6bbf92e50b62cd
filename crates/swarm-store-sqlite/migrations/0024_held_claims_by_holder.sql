-- What an agent holds, for its heartbeat (issue 25, the soak's p99). Every heartbeat extends
-- the leases of the claims the agent holds (`held_claims::extend_leases`), on the writer.
-- For mail it walked `mail_inbox`, every mail the agent ever received, to find the few being
-- processed (SQLite does not infer from `status = 'processing'` that `mail_undelivered`,
-- `WHERE status <> 'read'`, applies): in the soak, 2 ms with 2,000 mails each and 11.6 ms
-- with 10,000, about 40 times a minute, every write queued behind it. For task results it
-- scanned the whole table. These partial indexes hold exactly the claimed rows, under the
-- same condition the statements write (`swarm_store::sql::held_claims`).
CREATE INDEX mail_held ON mail (to_agent_id) WHERE status = 'processing';
CREATE INDEX task_awaits_held ON task_awaits (agent_id)
    WHERE processing_since IS NOT NULL AND delivered_at IS NULL;
