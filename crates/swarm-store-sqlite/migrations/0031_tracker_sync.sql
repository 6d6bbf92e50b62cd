-- Issue trackers (GitLab, Linear, Jira: issue 47). Mirrors the PostgreSQL migration of
-- the same number.
--
-- tracker_sync is the reference's table (provider, entity type, swarm id, external id,
-- identifier and URL, last delivery id): one row links a task to the tracker item it
-- came from. It also carries the task's report back to the tracker, done once across
-- restarts and replicas: a reporter takes the row with a lease (report_holder,
-- report_lease_until; taken only while reported_at IS NULL and no live lease), posts,
-- then sets reported_at (WHERE reported_at IS NULL). A crash between the post and that
-- mark is covered by the provider: before posting it looks for the task's marker in the
-- item's comments. last_synced_status moves a tracker state once per step
-- (WHERE last_synced_status IS <the step read>).
--
-- The reference has UNIQUE (provider, entityType, externalId); several tasks may come
-- from one item here (a second mention on the same issue), so that pair is an index.
CREATE TABLE tracker_sync (
    provider             TEXT NOT NULL,
    entity_type          TEXT NOT NULL DEFAULT 'task' CHECK (entity_type IN ('task')),
    provider_entity_type TEXT,
    swarm_id             TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    external_id          TEXT NOT NULL,
    external_identifier  TEXT,
    external_url         TEXT,
    last_delivery_id     TEXT,
    last_synced_status   TEXT,
    last_synced_at       INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    report_holder        TEXT,
    report_lease_until   INTEGER,
    report_attempts      INTEGER NOT NULL DEFAULT 0,
    report_error         TEXT,
    reported_at          INTEGER,
    PRIMARY KEY (provider, swarm_id)
);
CREATE INDEX tracker_sync_external ON tracker_sync (provider, external_id);
CREATE INDEX tracker_sync_unreported ON tracker_sync (swarm_id) WHERE reported_at IS NULL;

-- Tracker deliveries already received (GitLab's X-Gitlab-Event-UUID, Linear-Delivery,
-- Jira's webhook identifier): a replay changes nothing. Written in the transaction that
-- creates the delivery's task, or alone for a delivery that creates none.
CREATE TABLE tracker_deliveries (
    provider     TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (provider, delivery_id)
);
