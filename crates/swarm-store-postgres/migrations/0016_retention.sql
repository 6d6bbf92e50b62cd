-- Retention (issue 22): the indexes its batches walk, oldest first, so that a batch reads
-- about as many rows as it removes. Mirrors the SQLite migration of the same number.
CREATE INDEX session_logs_created_idx ON session_logs (created_at);
CREATE INDEX mail_read_idx ON mail (read_at) WHERE status = 'read';
CREATE INDEX mail_replies_idx ON mail (in_reply_to) WHERE in_reply_to IS NOT NULL;
CREATE INDEX slack_marks_created_idx ON slack_marks (created_at);
CREATE INDEX tasks_finished_idx ON tasks (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX task_awaits_parent_idx ON task_awaits (parent_task_id);
CREATE INDEX inbox_messages_delegated_idx ON inbox_messages (delegated_to_task_id)
    WHERE delegated_to_task_id IS NOT NULL;
CREATE INDEX inbox_messages_handled_idx ON inbox_messages (last_updated_at)
    WHERE status IN ('read', 'responded', 'delegated');
