-- Issue #25 (work of dead agents handed on). Mirrors the SQLite migration of the
-- same number.

-- One row per task the rescuer took from an agent that stayed offline: what the lead's
-- `tasks_handed_back` trigger reports, claimed by `notified_at` like `tasks_finished`.
-- The task's own history has the same move as a `task_handed_back` event.
CREATE TABLE task_handoffs (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id        UUID NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    from_agent_id  UUID NOT NULL,
    from_status    TEXT NOT NULL,
    to_status      TEXT NOT NULL,
    reason         TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    notified_at    TIMESTAMPTZ
);
-- The lead's poll probes this on every poll: a partial index keeps it one lookup.
CREATE INDEX task_handoffs_unnotified ON task_handoffs (id) WHERE notified_at IS NULL;
