-- Fewer pages per commit. A SQLite commit writes every page it changed, whole, to the
-- WAL. An index whose key starts with the agent has one hot page per agent, so with 32
-- agents at work a commit of 20 writes wrote about 50 such pages: two thirds of its 77
-- (BENCHMARKS.md, "Stop 16"). Two indexes did that on every status change.
--
-- PostgreSQL logs the changed tuples, not whole pages, so its schema keeps both indexes.

-- 1. Tasks by agent. The claim and capacity queries ask for an agent's `pending` and
--    `in_progress` tasks; they get an index of those alone, a few entries per agent that
--    share a page or two. It holds the claim order, so that the claim of an agent's next
--    task reads one entry instead of scanning every agent's pending tasks for its own
--    (what the status index gave) and sorting them. Listings by agent use an index that
--    a status change does not move: it changes when a task is given to an agent.
DROP INDEX tasks_agent_status;
CREATE INDEX tasks_agent_working ON tasks (agent_id, status, priority DESC, created_at, id)
    WHERE status = 'pending' OR status = 'in_progress';
CREATE INDEX tasks_agent_created ON tasks (agent_id, created_at) WHERE agent_id IS NOT NULL;

-- 2. The pool in claim order. The status index stops at `created_at`, so a pool claim
--    sorted the tasks of equal priority and time by id in a temporary b-tree, every
--    time; this index holds the whole order and only the pool's tasks.
CREATE INDEX tasks_pool ON tasks (priority DESC, created_at, id) WHERE status = 'unassigned';

-- 3. The event log by agent. Events get a number that VACUUM keeps (`seq`, an alias of the
--    rowid), and the index by agent becomes a table that the writer fills in batches, a
--    few times a second (`events::index_agent_events`): a batch writes each agent's page
--    once instead of once per commit. A listing by agent reads the batches through this
--    index and the few events after the last batch by number (`events::list`).
CREATE TABLE events_numbered (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL,
    event_type TEXT NOT NULL,
    agent_id   TEXT,
    task_id    TEXT,
    old_value  TEXT,
    new_value  TEXT,
    metadata   TEXT,
    created_at INTEGER NOT NULL
);
INSERT INTO events_numbered (seq, id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at)
    SELECT rowid, id, event_type, agent_id, task_id, old_value, new_value, metadata, created_at
    FROM events ORDER BY rowid;
DROP TABLE events;
ALTER TABLE events_numbered RENAME TO events;
CREATE INDEX events_created ON events (created_at, id);
-- Two events in five (an agent's busy/idle flips) are about no task.
CREATE INDEX events_task_created ON events (task_id, created_at) WHERE task_id IS NOT NULL;

CREATE TABLE agent_events (
    agent_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    event_seq  INTEGER NOT NULL,
    PRIMARY KEY (agent_id, created_at, event_seq)
) WITHOUT ROWID;
INSERT INTO agent_events (agent_id, created_at, event_seq)
    SELECT agent_id, created_at, seq FROM events WHERE agent_id IS NOT NULL;

-- Every event up to `through_seq` is in `agent_events`; none after it is.
CREATE TABLE agent_events_indexed (
    singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
    through_seq INTEGER NOT NULL
);
INSERT INTO agent_events_indexed (singleton, through_seq)
    SELECT 1, coalesce(max(seq), 0) FROM events;
