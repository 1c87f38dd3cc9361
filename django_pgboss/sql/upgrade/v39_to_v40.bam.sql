-- Schema 39 to 40 (pg-boss 12.30): the monitor's per-queue claim and the stats backoff stamp, and the
-- fetch index job_i11 (priority order) in place of job_i5, built before job_i5 is dropped. Frozen.
--
-- This replaces v39_to_v40.sql in the upgrade chain: the build and the retire are queued in bam
-- (below) instead of run in the migration's transaction. The retire waits for the build on its
-- table (the rule of plans/bam.py), so job_i5 is never dropped beside a job_i11 that failed.
ALTER TABLE {{schema}}.version ADD COLUMN IF NOT EXISTS monitor_backoff_on timestamp with time zone;
ALTER TABLE {{schema}}.queue ADD COLUMN IF NOT EXISTS monitor_claim_on timestamp with time zone;
-- Seeded from the last pass, so the first monitor pass after the upgrade does not find every queue
-- due at once.
UPDATE {{schema}}.queue SET monitor_claim_on = monitor_on WHERE monitor_claim_on IS NULL;

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
    (1, 'fetch_index_priority_build', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i11 ON {{schema}}.job (name, priority DESC, created_on, start_after) WHERE state < 'active' AND NOT blocked$cmd$),
    (2, 'fetch_index_retire', $cmd$DROP INDEX CONCURRENTLY IF EXISTS {{schema}}.job_i5$cmd$)
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
        VALUES (build.name, 40, 'pending', tbl.queue, tbl.table_name,
                {{schema}}.job_table_format(build.command, tbl.table_name), clock_timestamp());
      ELSE
        EXECUTE {{schema}}.job_table_format(replace(build.command, ' CONCURRENTLY', ''), tbl.table_name);
      END IF;
    END LOOP;
  END LOOP;
END
$build$;

UPDATE {{schema}}.version SET version = 40;
