-- Schema 42 (pg-boss 12.33, 12.34) to 43 (12.35): the throughput window on the queue row and in the
-- stats history, the dead-letter copy's source output and chain root, and job_i12 over the root.
-- Frozen.
--
-- Every added column is nullable or has a constant default, so no table is rewritten; existing rows
-- are not backfilled (a snapshot keeps null deltas, an old dead-letter copy has no root, and its
-- first redrive falls back to source_id, as in pg-boss).
ALTER TABLE {{schema}}.queue
  ADD COLUMN created_delta int NOT NULL DEFAULT 0,
  ADD COLUMN completed_delta int NOT NULL DEFAULT 0,
  ADD COLUMN failed_delta int NOT NULL DEFAULT 0,
  ADD COLUMN delta_on timestamp with time zone,
  ADD COLUMN delta_seconds int;
ALTER TABLE {{schema}}.queue_stats
  ADD COLUMN created_delta int,
  ADD COLUMN completed_delta int,
  ADD COLUMN failed_delta int,
  ADD COLUMN delta_seconds int,
  ADD COLUMN delta_on timestamp with time zone;
ALTER TABLE {{schema}}.job
  ADD COLUMN IF NOT EXISTS source_output jsonb,
  ADD COLUMN IF NOT EXISTS source_root_id uuid;
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX IF NOT EXISTS job_i12 ON {{schema}}.job (source_root_id) WHERE source_root_id IS NOT NULL$cmd$);
UPDATE {{schema}}.version SET version = 43;
