-- Schema 39 to 40 (pg-boss 12.30): the monitor's per-queue claim and the stats backoff stamp, and the
-- fetch index job_i11 (priority order) in place of job_i5, built before job_i5 is dropped. Frozen.
ALTER TABLE {{schema}}.version ADD COLUMN IF NOT EXISTS monitor_backoff_on timestamp with time zone;
ALTER TABLE {{schema}}.queue ADD COLUMN IF NOT EXISTS monitor_claim_on timestamp with time zone;
-- Seeded from the last pass, so the first monitor pass after the upgrade does not find every queue
-- due at once.
UPDATE {{schema}}.queue SET monitor_claim_on = monitor_on WHERE monitor_claim_on IS NULL;
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX IF NOT EXISTS job_i11 ON {{schema}}.job (name, priority DESC, created_on, start_after) WHERE state < 'active' AND NOT blocked$cmd$);
SELECT {{schema}}.job_table_run($cmd$DROP INDEX IF EXISTS {{schema}}.job_i5$cmd$);
UPDATE {{schema}}.version SET version = 40;
