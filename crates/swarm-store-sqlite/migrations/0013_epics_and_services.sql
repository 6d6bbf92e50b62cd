-- Issue #21 (drop-in for the reference's users): epics and the services registry.
-- Mirrors the PostgreSQL migration of the same number.

CREATE TABLE epics (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL UNIQUE,
    goal                TEXT NOT NULL,
    description         TEXT,
    prd                 TEXT,
    plan                TEXT,
    status              TEXT NOT NULL DEFAULT 'draft',
    priority            INTEGER NOT NULL DEFAULT 50,
    tags                TEXT NOT NULL DEFAULT '[]',
    created_by_agent_id TEXT REFERENCES agents(id),
    lead_agent_id       TEXT REFERENCES agents(id),
    channel_id          TEXT,
    slack_channel_id    TEXT,
    slack_thread_ts     TEXT,
    github_repo         TEXT,
    github_milestone    TEXT,
    created_at          INTEGER NOT NULL,
    last_updated_at     INTEGER NOT NULL,
    started_at          INTEGER,
    completed_at        INTEGER,
    -- Bumped by the trigger below each time one of its tasks finishes; the lead's
    -- `epic_progress_changed` claim moves `progress_notified` up to it.
    progress_changes    INTEGER NOT NULL DEFAULT 0,
    progress_notified   INTEGER NOT NULL DEFAULT 0,
    progress_notified_at INTEGER
);
CREATE INDEX epics_unnotified ON epics (id) WHERE progress_changes > progress_notified;

ALTER TABLE tasks ADD COLUMN epic_id TEXT REFERENCES epics(id);
CREATE INDEX tasks_epic ON tasks (epic_id) WHERE epic_id IS NOT NULL;

-- In the database, not in each statement that finishes a task (poll claims, finishes,
-- the rescuer, hand-backs): the count moves in the same transaction as the task,
-- whichever path finished it.
CREATE TRIGGER tasks_epic_progress AFTER UPDATE OF status ON tasks
WHEN NEW.epic_id IS NOT NULL AND NEW.status IN ('completed', 'failed') AND OLD.status <> NEW.status
BEGIN
    UPDATE epics SET progress_changes = progress_changes + 1 WHERE id = NEW.epic_id;
END;

CREATE TABLE services (
    id                TEXT PRIMARY KEY,
    agent_id          TEXT NOT NULL REFERENCES agents(id),
    name              TEXT NOT NULL,
    port              INTEGER NOT NULL DEFAULT 3000,
    description       TEXT,
    url               TEXT,
    health_check_path TEXT NOT NULL DEFAULT '/health',
    status            TEXT NOT NULL DEFAULT 'starting',
    script            TEXT NOT NULL,
    cwd               TEXT,
    interpreter       TEXT,
    args              TEXT,
    env               TEXT,
    metadata          TEXT NOT NULL DEFAULT '{}',
    created_at        INTEGER NOT NULL,
    last_updated_at   INTEGER NOT NULL,
    UNIQUE (agent_id, name)
);
