-- Issue #20 (the waiting pattern) and #19 (why an agent stopped). Mirrors the
-- PostgreSQL migration of the same number.

-- Mail that wakes its recipient through the poll (`urgent_mail`): urgent mail, and any
-- reply to mail the recipient sent awaiting a response, whatever its priority. Decided
-- when the mail is appended, so the poll's probe stays one partial-index lookup.
ALTER TABLE mail ADD COLUMN wakes INTEGER NOT NULL DEFAULT 0 CHECK (wakes IN (0, 1));
UPDATE mail SET wakes = 1
WHERE priority_rank = 0
   OR EXISTS (SELECT 1 FROM mail p
              WHERE p.id = mail.in_reply_to AND p.awaiting_response = 1
                AND p.from_agent_id = mail.to_agent_id);
CREATE INDEX mail_waking ON mail (to_agent_id, created_at, id) WHERE wakes = 1 AND status = 'unread';

-- Why the agent stopped taking work (set by its runner, cleared when it takes work).
ALTER TABLE agents ADD COLUMN status_reason TEXT;
-- The pending mail its coordinator was last told about when it stopped (a digest of
-- the mail ids), so a Stop hook that fires again with nothing new tells nobody twice.
ALTER TABLE agents ADD COLUMN stop_alert_key TEXT;
