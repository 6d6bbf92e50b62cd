-- What a finishing worker's coordinator is told about (issue 25, the soak's p99): the mail
-- an agent sent that still waits for an answer, or is urgent and unread. The list walked
-- `mail_outbox`, every mail the agent ever sent, to find the few that match, on every
-- finish of an agent with mail it had not read: its cost grew with the agent's history.
-- This partial index holds exactly those rows. SQLite uses a partial index only when the
-- query's WHERE clause has a term that is the index's condition, so `mail.rs` writes the
-- same expression.
CREATE INDEX mail_outbox_pending ON mail (from_agent_id, created_at, id)
    WHERE (awaiting_response = 1 AND answered_at IS NULL) OR (priority = 'urgent' AND status <> 'read');
