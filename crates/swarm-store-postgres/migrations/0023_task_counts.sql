-- Issues #22 and #25. A listing's total and `/api/stats` counted every task
-- (`count(*)`: 205 and 481 ms at a million tasks), so the soak's `GET /api/tasks` grew
-- slower as the table grew. The counts by status are kept instead, as SQLite keeps them
-- (its migration 0017), but not in one row per status that every writer updates: that
-- row's lock would serialize every replica's concurrent task writes. A task write adds
-- rows to `task_count_changes`, which has no index and no key, so writers never wait for
-- each other there; each store folds the changes into `task_counts` every second
-- (`counts.rs`), one statement that deletes what it folds. A count is the sum of both.
CREATE TABLE task_counts (
    status TEXT PRIMARY KEY,
    n      BIGINT NOT NULL
);

CREATE TABLE task_count_changes (
    status TEXT NOT NULL,
    n      BIGINT NOT NULL
);

INSERT INTO task_counts (status, n) SELECT status, count(*) FROM tasks GROUP BY status;

CREATE FUNCTION task_count_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO task_count_changes (status, n) VALUES (NEW.status, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO task_count_changes (status, n) VALUES (OLD.status, -1);
    ELSE
        INSERT INTO task_count_changes (status, n) VALUES (OLD.status, -1), (NEW.status, 1);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER task_counts_insert_delete AFTER INSERT OR DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION task_count_change();
CREATE TRIGGER task_counts_status AFTER UPDATE OF status ON tasks
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION task_count_change();
