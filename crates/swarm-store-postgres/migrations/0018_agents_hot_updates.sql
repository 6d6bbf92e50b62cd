-- Issue #22. An agent's busy/idle flip (two per claim cycle) was never a HOT update: both
-- partial indexes named `status` (one as its key, one in its predicate), so every flip
-- added an entry to all four indexes and left a dead row version behind, which every
-- later lookup of the agent by id stepped over until autovacuum came by (once a minute
-- at most): after a minute of claim cycles, 34 agents had 7,311 dead versions. With no
-- index naming `status`, a flip stays on its page (fillfactor leaves room for it), touches
-- no index, and the page prunes its dead versions itself.
DROP INDEX agents_last_seen_idx;
CREATE INDEX agents_last_seen_idx ON agents (last_seen_at);
DROP INDEX agents_lead_status_idx;
CREATE INDEX agents_lead_idx ON agents (is_lead) WHERE is_lead;
ALTER TABLE agents SET (fillfactor = 50);
