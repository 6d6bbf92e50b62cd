-- Steering messages (issue 40): words for a task's running agent. Mirrors the
-- SQLite migration of the same number.
--
-- status: pending -> delivered -> handled, or pending -> promoted (it became the
-- follow-up task promoted_task_id) or cancelled; every change is guarded by its
-- from-status. promoted_task_id has no foreign key: the follow-up is inserted in the
-- same transaction after the guarded update that names it.
CREATE TABLE steering_messages (
    id                   UUID PRIMARY KEY,
    task_id              UUID NOT NULL
                         CONSTRAINT steering_messages_task_id_fkey REFERENCES tasks (id) ON DELETE CASCADE,
    message              TEXT NOT NULL,
    mode                 TEXT NOT NULL CONSTRAINT steering_messages_mode_check CHECK (mode IN ('steer', 'queue')),
    status               TEXT NOT NULL DEFAULT 'pending'
                         CONSTRAINT steering_messages_status_check
                         CHECK (status IN ('pending', 'delivered', 'handled', 'promoted', 'cancelled')),
    source               TEXT NOT NULL,
    created_by_agent_id  UUID,
    promoted_task_id     UUID,
    created_at           TIMESTAMPTZ NOT NULL,
    delivered_at         TIMESTAMPTZ,
    handled_at           TIMESTAMPTZ
);
CREATE INDEX steering_messages_task ON steering_messages (task_id, created_at);
