-- Indexes that every status change had to move for nothing; the SQLite migration of the
-- same number makes the same changes (and two that only SQLite needs).
-- Offers: only offered tasks have `offered_to`; every lookup asks for one agent's.
DROP INDEX tasks_offered_to_status_idx;
CREATE INDEX tasks_offered_to_status_idx ON tasks (offered_to, status) WHERE offered_to IS NOT NULL;
-- Leads: the only lookup is "another live lead"; a worker's busy/idle no longer moves it.
DROP INDEX agents_lead_status_idx;
CREATE INDEX agents_lead_status_idx ON agents (status) WHERE is_lead;
