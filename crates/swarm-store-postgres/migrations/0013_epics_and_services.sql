-- Issue #21 (drop-in for the reference's users): epics and the services registry.
-- Mirrors the SQLite migration of the same number.

CREATE TABLE epics (
    id                  UUID PRIMARY KEY,
    name                TEXT NOT NULL CONSTRAINT epics_name_key UNIQUE,
    goal                TEXT NOT NULL,
    description         TEXT,
    prd                 TEXT,
    plan                TEXT,
    status              TEXT NOT NULL DEFAULT 'draft',
    priority            INTEGER NOT NULL DEFAULT 50,
    tags                TEXT[] NOT NULL DEFAULT '{}',
    created_by_agent_id UUID REFERENCES agents(id),
    lead_agent_id       UUID REFERENCES agents(id),
    channel_id          UUID,
    slack_channel_id    TEXT,
    slack_thread_ts     TEXT,
    github_repo         TEXT,
    github_milestone    TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    last_updated_at     TIMESTAMPTZ NOT NULL,
    started_at          TIMESTAMPTZ,
    completed_at        TIMESTAMPTZ,
    -- Bumped by the trigger below each time one of its tasks finishes; the lead's
    -- `epic_progress_changed` claim moves `progress_notified` up to it.
    progress_changes    BIGINT NOT NULL DEFAULT 0,
    progress_notified   BIGINT NOT NULL DEFAULT 0,
    progress_notified_at TIMESTAMPTZ
);
CREATE INDEX epics_unnotified ON epics (id) WHERE progress_changes > progress_notified;

ALTER TABLE tasks ADD COLUMN epic_id UUID REFERENCES epics(id);
CREATE INDEX tasks_epic ON tasks (epic_id) WHERE epic_id IS NOT NULL;

-- In the database, not in each statement that finishes a task (poll claims, finishes,
-- the rescuer, hand-backs): the count moves in the same transaction as the task,
-- whichever path finished it. The epic row is locked after the task row, the order
-- every other writer of both keeps.
CREATE FUNCTION tasks_epic_progress() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE epics SET progress_changes = progress_changes + 1 WHERE id = NEW.epic_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER tasks_epic_progress AFTER UPDATE OF status ON tasks
FOR EACH ROW
WHEN (NEW.epic_id IS NOT NULL AND NEW.status IN ('completed', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION tasks_epic_progress();

CREATE TABLE services (
    id                UUID PRIMARY KEY,
    agent_id          UUID NOT NULL REFERENCES agents(id),
    name              TEXT NOT NULL,
    port              INTEGER NOT NULL DEFAULT 3000,
    description       TEXT,
    url               TEXT,
    health_check_path TEXT NOT NULL DEFAULT '/health',
    status            TEXT NOT NULL DEFAULT 'starting',
    script            TEXT NOT NULL,
    cwd               TEXT,
    interpreter       TEXT,
    args              TEXT[],
    env               JSONB,
    metadata          JSONB NOT NULL DEFAULT '{}',
    created_at        TIMESTAMPTZ NOT NULL,
    last_updated_at   TIMESTAMPTZ NOT NULL,
    CONSTRAINT services_agent_name_key UNIQUE (agent_id, name)
);
