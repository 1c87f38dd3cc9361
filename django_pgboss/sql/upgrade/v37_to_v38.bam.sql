-- Schema 37 to 38 (pg-boss 12.28): job_i10, the head-of-key index of key_strict_fifo queues, on
-- job_common and on the own table of each key_strict_fifo queue. Frozen.
--
-- This replaces v37_to_v38.sql in the upgrade chain: job_i10 is built through bam (below) instead of
-- in the migration's transaction.

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
    (1, 'key_strict_fifo_head_index', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i10 ON {{schema}}.job (name, singleton_key, state DESC, created_on, id) INCLUDE (start_after) WHERE state < 'active' AND NOT blocked AND policy = 'key_strict_fifo'$cmd$)
  ) AS b(position, name, command) ORDER BY position
  LOOP
    FOR tbl IN
      SELECT NULL::text AS queue, 'job_common'::text AS table_name
      UNION ALL
      SELECT name, table_name FROM {{schema}}.queue WHERE partition = true AND policy = 'key_strict_fifo'
    LOOP
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM {{schema}}.%I)', tbl.table_name) INTO queued;
      queued := queued OR EXISTS (
        SELECT 1 FROM {{schema}}.bam WHERE table_name = tbl.table_name AND status <> 'completed'
      );
      IF queued THEN
        INSERT INTO {{schema}}.bam (name, version, status, queue, table_name, command, created_on)
        VALUES (build.name, 38, 'pending', tbl.queue, tbl.table_name,
                {{schema}}.job_table_format(build.command, tbl.table_name), clock_timestamp());
      ELSE
        EXECUTE {{schema}}.job_table_format(replace(build.command, ' CONCURRENTLY', ''), tbl.table_name);
      END IF;
    END LOOP;
  END LOOP;
END
$build$;

UPDATE {{schema}}.version SET version = 38;
