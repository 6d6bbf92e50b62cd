-- Retention (issue 22): the indexes its batches walk, oldest first, so that a batch reads
-- about as many rows as it removes. Mirrors the PostgreSQL migration of the same number.
-- Appends land on the last page of the first one, so the busiest table pays little for it.
CREATE INDEX session_logs_created ON session_logs (created_at);
-- Read mail by when it was read, and the replies that keep a read message.
CREATE INDEX mail_read ON mail (read_at) WHERE status = 'read';
CREATE INDEX mail_replies ON mail (in_reply_to) WHERE in_reply_to IS NOT NULL;
-- Slack's once-only marks by age.
CREATE INDEX slack_marks_created ON slack_marks (created_at);
-- Finished tasks by when they ended (only for an operator who removes them), and what
-- keeps one: an awaiting session's parent, an inbox message delegated to it.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX task_awaits_parent ON task_awaits (parent_task_id);
CREATE INDEX inbox_messages_delegated ON inbox_messages (delegated_to_task_id)
    WHERE delegated_to_task_id IS NOT NULL;
-- Handled inbox messages by age.
CREATE INDEX inbox_messages_handled ON inbox_messages (last_updated_at)
    WHERE status IN ('read', 'responded', 'delegated');
