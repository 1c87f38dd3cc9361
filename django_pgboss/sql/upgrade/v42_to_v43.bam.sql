-- Schema 42 (pg-boss 12.33, 12.34) to 43 (12.35): the throughput window on the queue row and in the
-- stats history, the dead-letter copy's source output and chain root, and job_i12 over the root.
-- Frozen.
--
-- This replaces v42_to_v43.sql in the upgrade chain: job_i12 is built through bam (below) instead of
-- in the migration's transaction.
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

-- The index builds go through bam, as pg-boss 12.38's migration queues them: a table that holds
-- rows, or that bam still has unfinished commands for (they must run first), gets each command queued,
-- built concurrently by the monitor's bam pass (or a pg-boss instance's) after the migration commits,
-- so no build holds a write lock on a table while it scans it; until then the drift check reports the
-- index as still building. A table that holds no row gets its index here, as create_queue() builds a
-- new partition's: there is nothing to scan. Each row is stamped with clock_timestamp(), so the
-- commands of one table run in the order they are queued, and a command waits for the earlier
-- commands of its migration on its table (pg-boss's rule, plans/bam.py).
DO $build$
DECLARE
  build record;
  tbl record;
  queued boolean;
BEGIN
  FOR build IN SELECT * FROM (VALUES
    (1, 'source_root_index_build', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i12 ON {{schema}}.job (source_root_id) WHERE source_root_id IS NOT NULL$cmd$)
  ) AS b(position, name, command) ORDER BY position
  LOOP
    FOR tbl IN
      SELECT NULL::text AS queue, 'job_common'::text AS table_name
      UNION ALL
      SELECT name, table_name FROM {{schema}}.queue WHERE partition = true
    LOOP
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM {{schema}}.%I)', tbl.table_name) INTO queued;
      queued := queued OR EXISTS (
        SELECT 1 FROM {{schema}}.bam WHERE table_name = tbl.table_name AND status <> 'completed'
      );
      IF queued THEN
        INSERT INTO {{schema}}.bam (name, version, status, queue, table_name, command, created_on)
        VALUES (build.name, 43, 'pending', tbl.queue, tbl.table_name,
                {{schema}}.job_table_format(build.command, tbl.table_name), clock_timestamp());
      ELSE
        EXECUTE {{schema}}.job_table_format(replace(build.command, ' CONCURRENTLY', ''), tbl.table_name);
      END IF;
    END LOOP;
  END LOOP;
END
$build$;

UPDATE {{schema}}.version SET version = 43;
