-- Evidence of shipped work (issue 47): the pull and merge request URLs a task's agent
-- reported (in its progress or its output), each once, in the order first seen. Shown
-- in the task's JSON (`pullRequestUrls`), on the dashboard and in tracker comments.
-- Mirrors the PostgreSQL migration of the same number.
CREATE TABLE task_pull_requests (
    task_id      TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    url          TEXT NOT NULL,
    recorded_at  INTEGER NOT NULL,
    PRIMARY KEY (task_id, url)
);
