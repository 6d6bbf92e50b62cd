-- What every process on this database must agree on, written by the hub at start
-- (`Service::hub_settings_publish`): the identity mode (AGENT_AUTH) and the lease and
-- hand-back policy. `swarm mcp`, which opens the database without a hub's flags, reads
-- them instead of its own defaults, so it can neither trust a stdio caller that a token
-- hub would refuse nor rescue claims on a policy the hub was not given.
CREATE TABLE hub_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
