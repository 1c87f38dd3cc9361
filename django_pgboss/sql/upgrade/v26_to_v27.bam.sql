-- Schema 26 to 27 (pg-boss 12.6): the background migration table bam and its claim stamp, a job's
-- group (group concurrency) and its index job_i7, and job_common's indexes named after their table,
-- as a queue's own table names its. The job-table helpers this version introduces are in
-- functions_43.sql, applied before every step. Frozen.
--
-- This replaces v26_to_v27.sql in the upgrade chain: job_i7 is built through bam (below) instead of
-- in the migration's transaction.
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
    (1, 'group_concurency_index', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i7 ON {{schema}}.job (name, group_id) WHERE state = 'active' AND group_id IS NOT NULL$cmd$)
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
        VALUES (build.name, 27, 'pending', tbl.queue, tbl.table_name,
                {{schema}}.job_table_format(build.command, tbl.table_name), clock_timestamp());
      ELSE
        EXECUTE {{schema}}.job_table_format(replace(build.command, ' CONCURRENTLY', ''), tbl.table_name);
      END IF;
    END LOOP;
  END LOOP;
END
$build$;

UPDATE {{schema}}.version SET version = 27;
