-- Schema 32 to 33 (pg-boss 12.22): the flow resolver's claim stamp and its index (job_i9 finds the
-- completed parents whose children wait), and the fetch index job_i5 rebuilt to skip blocked jobs.
-- Frozen.
--
-- pg-boss builds these indexes later and concurrently (its bam queue); here they are built in the
-- migration's transaction, on job_common and every partitioned queue's table, so the schema is
-- complete when migrate returns. That holds a write lock on each job table while its index builds.
ALTER TABLE {{schema}}.version ADD COLUMN IF NOT EXISTS flow_on timestamp with time zone;
-- clock_timestamp(), not now(): rows one transaction enqueues keep the order they were written in.
ALTER TABLE {{schema}}.bam ALTER COLUMN created_on SET DEFAULT clock_timestamp();
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX IF NOT EXISTS job_i9 ON {{schema}}.job (name, id) WHERE blocking AND state = 'completed'$cmd$);
SELECT {{schema}}.job_table_run($cmd$DROP INDEX IF EXISTS {{schema}}.job_i5$cmd$);
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX IF NOT EXISTS job_i5 ON {{schema}}.job (name, start_after) WHERE state < 'active' AND NOT blocked$cmd$);
UPDATE {{schema}}.version SET version = 33;
