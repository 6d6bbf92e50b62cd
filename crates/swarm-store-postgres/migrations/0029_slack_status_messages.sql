-- The living Slack message of a task (issue 42). Mirrors the SQLite migration of the
-- same number.
--
-- One row per Slack task that has a status message in its thread: inserting it is the
-- claim to post (ON CONFLICT DO NOTHING), message_ts is written once Slack answers
-- (WHERE message_ts IS NULL), finalized_at once the ending is rendered
-- (WHERE finalized_at IS NULL): each happens once across restarts and replicas.
CREATE TABLE slack_status_messages (
    task_id       UUID PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    channel_id    TEXT NOT NULL,
    message_ts    TEXT,
    finalized_at  TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL
);
