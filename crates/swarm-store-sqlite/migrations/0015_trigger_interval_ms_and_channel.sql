-- Issue #21 (drop-in for the reference's users). Mirrored in the other driver's
-- migration of the same number.

-- The reference's schedules count intervals in milliseconds (`intervalMs`, e.g. 1500):
-- whole seconds lost the rest.
ALTER TABLE triggers RENAME COLUMN interval_seconds TO interval_ms;
UPDATE triggers SET interval_ms = interval_ms * 1000 WHERE interval_ms IS NOT NULL;

-- The Inbox-MCP seed's channel: the `source` of the tasks a trigger files and its
-- prompt's {{channel}}; NULL keeps the trigger type's.
ALTER TABLE triggers ADD COLUMN channel TEXT;
