-- The model a task asks its agent CLI for (issue 41; the reference's task `model`): set once
-- at creation, read by the runner, which passes it to the CLI's own model flag. Mirrors the
-- other store's migration of the same number.
ALTER TABLE tasks ADD COLUMN model TEXT;
