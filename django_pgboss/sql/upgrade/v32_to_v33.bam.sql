-- Schema 32 to 33 (pg-boss 12.22): the flow resolver's claim stamp and its index (job_i9 finds the
-- completed parents whose children wait), and the fetch index job_i5 rebuilt to skip blocked jobs.
-- Frozen.
--
-- This replaces v32_to_v33.sql in the upgrade chain: the three index commands are queued in bam
-- (below) instead of run in the migration's transaction. CONCURRENTLY cannot reshape an index in
-- place, so job_i5 is an ordered drop-then-rebuild pair; until the pair runs, fetches use the old
-- job_i5, which still serves them.
ALTER TABLE {{schema}}.version ADD COLUMN IF NOT EXISTS flow_on timestamp with time zone;
-- clock_timestamp(), not now(): rows one transaction enqueues keep the order they were written in.
ALTER TABLE {{schema}}.bam ALTER COLUMN created_on SET DEFAULT clock_timestamp();

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
    (1, 'flow_resolver_index', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i9 ON {{schema}}.job (name, id) WHERE blocking AND state = 'completed'$cmd$),
    (2, 'fetch_index_drop', $cmd$DROP INDEX CONCURRENTLY IF EXISTS {{schema}}.job_i5$cmd$),
    (3, 'fetch_index', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i5 ON {{schema}}.job (name, start_after) WHERE state < 'active' AND NOT blocked$cmd$)
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
        VALUES (build.name, 33, 'pending', tbl.queue, tbl.table_name,
                {{schema}}.job_table_format(build.command, tbl.table_name), clock_timestamp());
      ELSE
        EXECUTE {{schema}}.job_table_format(replace(build.command, ' CONCURRENTLY', ''), tbl.table_name);
      END IF;
    END LOOP;
  END LOOP;
END
$build$;

UPDATE {{schema}}.version SET version = 33;
