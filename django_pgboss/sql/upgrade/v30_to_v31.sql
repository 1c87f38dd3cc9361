-- Schema 30 to 31 (pg-boss 12.19): flows, a job that waits for others (blocked, the count it still
-- waits for, the edges in job_dependency) and one that others wait for (blocking). pg-boss leaves
-- the fetch index's rebuild to version 33, which rebuilds it again: so does this. Frozen.
ALTER TABLE {{schema}}.job ADD COLUMN blocked boolean NOT NULL DEFAULT false;
ALTER TABLE {{schema}}.job ADD COLUMN blocking boolean NOT NULL DEFAULT false;
ALTER TABLE {{schema}}.job ADD COLUMN pending_dependencies int NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {{schema}}.job_dependency (
  child_name text NOT NULL,
  child_id uuid NOT NULL,
  parent_name text NOT NULL,
  parent_id uuid NOT NULL,
  PRIMARY KEY (child_name, child_id, parent_name, parent_id)
);
CREATE INDEX IF NOT EXISTS job_dep_parent_idx ON {{schema}}.job_dependency (parent_name, parent_id);
UPDATE {{schema}}.version SET version = 31;
