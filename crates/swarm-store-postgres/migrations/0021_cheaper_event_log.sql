-- Issue #22. Every claim cycle logs five events (six from the pool), and each went into
-- the table and all four of its indexes: 20 of the cycle's 35 index entries were the
-- event log's (pg_walinspect over a bench run, BENCHMARKS.md). Two of the four were never
-- read on that path, and two held entries no query can ask for.
--
-- 1. No unique index on the event id, as on SQLite (its migration 0007): nothing looks an
--    event up by id (the log is read by time, by agent and by task), and the ids are
--    UUIDv7 minted by the hub. Retention finds the rows it deletes by their `ctid`.
ALTER TABLE events DROP CONSTRAINT events_pkey;
-- 2. An agent's busy/idle flips name no task (two events in five), and a task created by
--    the operator names no agent: those entries served no lookup.
DROP INDEX events_agent_created_idx;
CREATE INDEX events_agent_created_idx ON events (agent_id, created_at) WHERE agent_id IS NOT NULL;
DROP INDEX events_task_created_idx;
CREATE INDEX events_task_created_idx ON events (task_id, created_at) WHERE task_id IS NOT NULL;
