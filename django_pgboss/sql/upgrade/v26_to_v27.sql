-- Schema 26 to 27 (pg-boss 12.6): the background migration table bam and its claim stamp, a job's
-- group (group concurrency) and its index job_i7, and job_common's indexes named after their table,
-- as a queue's own table names its. The job-table helpers this version introduces are in
-- functions_43.sql, applied before every step. Frozen.
ALTER TABLE {{schema}}.version ADD COLUMN IF NOT EXISTS bam_on timestamp with time zone;
CREATE TABLE IF NOT EXISTS {{schema}}.bam (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  version int NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  queue text,
  table_name text NOT NULL,
  command text NOT NULL,
  error text,
  created_on timestamp with time zone NOT NULL DEFAULT now(),
  started_on timestamp with time zone,
  completed_on timestamp with time zone
);
ALTER TABLE {{schema}}.job ADD COLUMN IF NOT EXISTS group_id text;
ALTER TABLE {{schema}}.job ADD COLUMN IF NOT EXISTS group_tier text;
ALTER INDEX IF EXISTS {{schema}}.job_i1 RENAME TO job_common_i1;
ALTER INDEX IF EXISTS {{schema}}.job_i2 RENAME TO job_common_i2;
ALTER INDEX IF EXISTS {{schema}}.job_i3 RENAME TO job_common_i3;
ALTER INDEX IF EXISTS {{schema}}.job_i4 RENAME TO job_common_i4;
ALTER INDEX IF EXISTS {{schema}}.job_i5 RENAME TO job_common_i5;
ALTER INDEX IF EXISTS {{schema}}.job_i6 RENAME TO job_common_i6;
ALTER INDEX IF EXISTS {{schema}}.job_i7 RENAME TO job_common_i7;
-- Built in the transaction on job_common and every queue's own table (see v32_to_v33.sql).
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX IF NOT EXISTS job_i7 ON {{schema}}.job (name, group_id) WHERE state = 'active' AND group_id IS NOT NULL$cmd$);
UPDATE {{schema}}.version SET version = 27;
