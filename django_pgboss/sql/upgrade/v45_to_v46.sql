-- Schema 45 (pg-boss 12.37) to 46 (12.38): job_i14 to job_i17, the indexes pg-boss 12.38's monitor
-- aggregate, update() and upsert() by key read, and retained_count and retained_on on the queue
-- row. Frozen.
--
-- retained_count and retained_on are nullable with no default, so no table is rewritten; they are
-- not seeded (each queue's next maintenance pass counts them). create_queue() as schema 46 has it
-- goes first, so a queue created from here on builds the four indexes with its table.
--
-- The migration's operation locks the job tables, queue and queue_stats before this file runs, all
-- in one statement, retried rather than waited on (operations.lock_for_step): clients take those
-- locks in different orders, and a step that took them one at a time would close a cycle with one
-- of them. Run on its own, the file takes the job tables first, the order a send takes them in.
-- SHARE is what the index builds below need on an empty table, and it lets no write in meanwhile.
LOCK TABLE {{schema}}.job IN SHARE MODE;
ALTER TABLE {{schema}}.queue
  ADD COLUMN IF NOT EXISTS retained_count int,
  ADD COLUMN IF NOT EXISTS retained_on timestamp with time zone;

CREATE OR REPLACE FUNCTION {{schema}}.create_queue(queue_name text, options jsonb)
RETURNS VOID AS
$$
    DECLARE
      tablename varchar := CASE WHEN options->>'partition' = 'true'
                            THEN 'j' || encode(sha224(queue_name::bytea), 'hex')
                            ELSE 'job_common'
                            END;
      queue_created_on timestamptz;
    BEGIN

      WITH q as (
        INSERT INTO {{schema}}.queue (
          name,
          policy,
          retry_limit,
          retry_delay,
          retry_backoff,
          retry_delay_max,
          expire_seconds,
          retention_seconds,
          deletion_seconds,
          warning_queued,
          dead_letter,
          partition,
          table_name,
          heartbeat_seconds,
          notify,
          created_on,
          updated_on
        )
        VALUES (
          queue_name,
          options->>'policy',
          COALESCE((options->>'retryLimit')::int, 2),
          COALESCE((options->>'retryDelay')::int, 0),
          COALESCE((options->>'retryBackoff')::bool, false),
          (options->>'retryDelayMax')::int,
          COALESCE((options->>'expireInSeconds')::int, 900),
          COALESCE((options->>'retentionSeconds')::int, 1209600),
          COALESCE((options->>'deleteAfterSeconds')::int, 604800),
          COALESCE((options->>'warningQueueSize')::int, 0),
          options->>'deadLetter',
          COALESCE((options->>'partition')::bool, false),
          tablename,
          (options->>'heartbeatSeconds')::int,
          COALESCE((options->>'notify')::bool, false),
          {{schema}}.job_now(),
          {{schema}}.job_now()
        )
        ON CONFLICT DO NOTHING
        RETURNING created_on
      )
      SELECT created_on into queue_created_on from q;

      IF queue_created_on IS NULL OR options->>'partition' IS DISTINCT FROM 'true' THEN
        RETURN;
      END IF;

      EXECUTE format('CREATE TABLE {{schema}}.%I (LIKE {{schema}}.job INCLUDING DEFAULTS)', tablename);

      EXECUTE {{schema}}.job_table_format($cmd$ALTER TABLE {{schema}}.job ADD PRIMARY KEY (name, id)$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT q_fkey FOREIGN KEY (name) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT dlq_fkey FOREIGN KEY (dead_letter) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED$cmd$, tablename);

      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i11 ON {{schema}}.job (name, priority DESC, created_on, start_after) WHERE state < 'active' AND NOT blocked$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i4 ON {{schema}}.job (name, singleton_on, COALESCE(singleton_key, '')) WHERE state <> 'cancelled' AND singleton_on IS NOT NULL$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i7 ON {{schema}}.job (name, group_id) WHERE state = 'active' AND group_id IS NOT NULL$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i9 ON {{schema}}.job (name, id) WHERE blocking AND state = 'completed'$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i12 ON {{schema}}.job (source_root_id) WHERE source_root_id IS NOT NULL$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i13 ON {{schema}}.job (name, singleton_key) WHERE state = 'created' AND upsert_by_key$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i14 ON {{schema}}.job (name, state, blocked, start_after) WHERE state IN ('created', 'retry', 'active', 'failed')$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i15 ON {{schema}}.job (name, created_on)$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i16 ON {{schema}}.job (name, completed_on) WHERE completed_on IS NOT NULL$cmd$, tablename);
      EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i17 ON {{schema}}.job (name, singleton_key, created_on) WHERE state < 'active' AND singleton_key IS NOT NULL$cmd$, tablename);

      IF options->>'policy' = 'short' THEN
        EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i1 ON {{schema}}.job (name, COALESCE(singleton_key, '')) WHERE state = 'created' AND policy = 'short'$cmd$, tablename);
      ELSIF options->>'policy' = 'singleton' THEN
        EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i2 ON {{schema}}.job (name, COALESCE(singleton_key, '')) WHERE state = 'active' AND policy = 'singleton'$cmd$, tablename);
      ELSIF options->>'policy' = 'stately' THEN
        EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i3 ON {{schema}}.job (name, state, COALESCE(singleton_key, '')) WHERE state <= 'active' AND policy = 'stately'$cmd$, tablename);
      ELSIF options->>'policy' = 'exclusive' THEN
        EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i6 ON {{schema}}.job (name, COALESCE(singleton_key, '')) WHERE state <= 'active' AND policy = 'exclusive'$cmd$, tablename);
      ELSIF options->>'policy' = 'key_strict_fifo' THEN
        EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i8 ON {{schema}}.job (name, singleton_key) WHERE state IN ('active', 'retry', 'failed') AND policy = 'key_strict_fifo'$cmd$, tablename);
        EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i10 ON {{schema}}.job (name, singleton_key, state DESC, created_on, id) INCLUDE (start_after) WHERE state < 'active' AND NOT blocked AND policy = 'key_strict_fifo'$cmd$, tablename);
        EXECUTE {{schema}}.job_table_format($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT job_key_strict_fifo_singleton_key_check CHECK (NOT (policy = 'key_strict_fifo' AND singleton_key IS NULL))$cmd$, tablename);
      END IF;

      EXECUTE format('ALTER TABLE {{schema}}.%I ADD CONSTRAINT cjc CHECK (name=%L)', tablename, queue_name);
      EXECUTE format('ALTER TABLE {{schema}}.job ATTACH PARTITION {{schema}}.%I FOR VALUES IN (%L)', tablename, queue_name);
    END;
$$
LANGUAGE plpgsql;

-- The index builds. pg-boss queues a CREATE INDEX CONCURRENTLY per job table in bam, and so does
-- this step for every table that holds rows, so no build holds a write lock on a table while it
-- scans it: the monitor's bam pass (or a pg-boss instance's) builds them one at a time after the
-- migration commits, and until then the drift check reports them as still building. A table that
-- holds no row (a fresh install's job_common, a queue that never had a job) gets its index here, as
-- create_queue() builds a new partition's: there is nothing to scan, and the schema is whole the
-- moment the migration commits. A row inserted meanwhile only makes that build scan it.
DO $build$
DECLARE
  build record;
  tbl record;
  holds_rows boolean;
BEGIN
  FOR tbl IN
    SELECT NULL::text AS queue, 'job_common'::text AS table_name
    UNION ALL
    SELECT name, table_name FROM {{schema}}.queue WHERE partition = true
  LOOP
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM {{schema}}.%I)', tbl.table_name) INTO holds_rows;
    FOR build IN SELECT * FROM (VALUES
      (1, 'live_index_build', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i14 ON {{schema}}.job (name, state, blocked, start_after) WHERE state IN ('created', 'retry', 'active', 'failed')$cmd$),
      (2, 'created_index_build', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i15 ON {{schema}}.job (name, created_on)$cmd$),
      (3, 'completed_index_build', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i16 ON {{schema}}.job (name, completed_on) WHERE completed_on IS NOT NULL$cmd$),
      (4, 'queued_key_index_build', $cmd$CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i17 ON {{schema}}.job (name, singleton_key, created_on) WHERE state < 'active' AND singleton_key IS NOT NULL$cmd$)
    ) AS b(position, name, command) ORDER BY position
    LOOP
      IF holds_rows THEN
        INSERT INTO {{schema}}.bam (name, version, status, queue, table_name, command)
        VALUES (build.name, 46, 'pending', tbl.queue, tbl.table_name,
                {{schema}}.job_table_format(build.command, tbl.table_name));
      ELSE
        EXECUTE {{schema}}.job_table_format(replace(build.command, ' CONCURRENTLY', ''), tbl.table_name);
      END IF;
    END LOOP;
  END LOOP;
END
$build$;

UPDATE {{schema}}.version SET version = 46;
