-- Tasks by status, kept by triggers (issue 22, the scale run). `count(*)` reads every
-- entry of an index: the total of a task listing took 40-60 ms with 1,000,000 tasks, on
-- every page of the dashboard's task list and every `GET /api/tasks`, and `/api/stats`
-- (the overview, `/metrics`, the charts' history) counted them all by status. A listing
-- with no filter but statuses, and the stats, read these ten rows instead.
--
-- It costs each status change one more page per commit (every write of a group changes
-- the same one). PostgreSQL counts as before: a row every writer updates would serialize
-- its concurrent transactions on that row's lock.
CREATE TABLE task_counts (
    status TEXT PRIMARY KEY NOT NULL,
    n      INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO task_counts (status, n)
    SELECT status, (SELECT count(*) FROM tasks t WHERE t.status = s.status)
    FROM (SELECT 'backlog' AS status UNION ALL SELECT 'unassigned' UNION ALL SELECT 'offered'
          UNION ALL SELECT 'reviewing' UNION ALL SELECT 'pending' UNION ALL SELECT 'in_progress'
          UNION ALL SELECT 'paused' UNION ALL SELECT 'completed' UNION ALL SELECT 'failed'
          UNION ALL SELECT 'cancelled') AS s;

CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks
BEGIN
    UPDATE task_counts SET n = n + 1 WHERE status = NEW.status;
END;

CREATE TRIGGER task_counts_update AFTER UPDATE OF status ON tasks
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE status = OLD.status;
    UPDATE task_counts SET n = n + 1 WHERE status = NEW.status;
END;

CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE status = OLD.status;
END;
