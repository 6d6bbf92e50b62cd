-- A lead-side claim belongs to the agent run that took it (issue 20). When the run ends
-- the runner releases what it left undone, and a claim offered again and again without
-- being handled is set aside as a dead letter instead of being offered for ever.
-- Mirrors the PostgreSQL migration of the same number.

-- How many times a poll has handed each item over. Counted by the claim, compared with
-- the hub's MAX_DELIVERIES when a claim is released or runs out.
ALTER TABLE inbox_messages ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channel_reads ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE mail ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_awaits ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;

-- Set aside after MAX_DELIVERIES: the poll no longer hands these over. An inbox message
-- has its own status for it (`dead_letter`, below); the others keep their state and
-- carry the time they were set aside.
ALTER TABLE channel_reads ADD COLUMN dead_lettered_at INTEGER;
ALTER TABLE mail ADD COLUMN dead_lettered_at INTEGER;
ALTER TABLE task_awaits ADD COLUMN dead_lettered_at INTEGER;

-- Task results are held by the runner that claimed them, like the other lead-side
-- claims: another runner of the agent does not keep a dead runner's claim alive.
ALTER TABLE task_awaits ADD COLUMN lease_holder TEXT;

-- `dead_letter` joins the inbox statuses. The stored CREATE TABLE text is edited in
-- place, as in 0007 (rows stay valid: the constraint only widens); the CREATE INDEX
-- below changes the schema cookie so every connection reloads the schema.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql,
       'OR status = ''responded'' OR status = ''delegated'')',
       'OR status = ''responded'' OR status = ''delegated'' OR status = ''dead_letter'')')
 WHERE type = 'table' AND name = 'inbox_messages';
PRAGMA writable_schema = OFF;

-- The dashboard's and the operator's list of dead letters.
CREATE INDEX inbox_messages_dead_letters ON inbox_messages (agent_id, created_at)
    WHERE status = 'dead_letter';
