-- Steering messages (issue 40): words for a task's running agent. Mirrors the
-- PostgreSQL migration of the same number.
--
-- status: pending -> delivered -> handled, or pending -> promoted (it became the
-- follow-up task promoted_task_id) or cancelled; every change is guarded by its
-- from-status. promoted_task_id has no foreign key: the follow-up is inserted in the
-- same transaction after the guarded update that names it.
CREATE TABLE steering_messages (
    id                   TEXT PRIMARY KEY NOT NULL,
    task_id              TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    message              TEXT NOT NULL,
    mode                 TEXT NOT NULL CHECK (mode = 'steer' OR mode = 'queue'),
    -- ORs, not IN: SQLite builds a temporary list for an IN check on every write.
    status               TEXT NOT NULL DEFAULT 'pending'
                         CHECK (status = 'pending' OR status = 'delivered' OR status = 'handled'
                                OR status = 'promoted' OR status = 'cancelled'),
    source               TEXT NOT NULL,
    created_by_agent_id  TEXT,
    promoted_task_id     TEXT,
    created_at           INTEGER NOT NULL,
    delivered_at         INTEGER,
    handled_at           INTEGER
);
CREATE INDEX steering_messages_task ON steering_messages (task_id, created_at);
