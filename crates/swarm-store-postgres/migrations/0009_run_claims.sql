-- A lead-side claim belongs to the agent run that took it (issue 20). When the run ends
-- the runner releases what it left undone, and a claim offered again and again without
-- being handled is set aside as a dead letter instead of being offered for ever.
-- Mirrors the SQLite migration of the same number.

-- How many times a poll has handed each item over. Counted by the claim, compared with
-- the hub's MAX_DELIVERIES when a claim is released or runs out.
ALTER TABLE inbox_messages ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channel_reads ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE mail ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_awaits ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;

-- Set aside after MAX_DELIVERIES: the poll no longer hands these over. An inbox message
-- has its own status for it (`dead_letter`, below); the others keep their state and
-- carry the time they were set aside.
ALTER TABLE channel_reads ADD COLUMN dead_lettered_at TIMESTAMPTZ;
ALTER TABLE mail ADD COLUMN dead_lettered_at TIMESTAMPTZ;
ALTER TABLE task_awaits ADD COLUMN dead_lettered_at TIMESTAMPTZ;

-- Task results are held by the runner that claimed them, like the other lead-side
-- claims: another runner of the agent does not keep a dead runner's claim alive.
ALTER TABLE task_awaits ADD COLUMN lease_holder UUID;

ALTER TABLE inbox_messages DROP CONSTRAINT inbox_messages_status_check;
ALTER TABLE inbox_messages ADD CONSTRAINT inbox_messages_status_check
    CHECK (status IN ('unread', 'processing', 'read', 'responded', 'delegated', 'dead_letter'));

-- The dashboard's and the operator's list of dead letters.
CREATE INDEX inbox_messages_dead_letters_idx ON inbox_messages (agent_id, created_at)
    WHERE status = 'dead_letter';
