-- pg-boss schema version 43 (pg-boss 12.35), created from nothing.
--
-- Frozen: this file is applied by migration 0001 and must never change once released. A schema
-- change is a new NNNN_*.sql file with its own migration.
--
-- {{schema}} is replaced by the configured schema name, already validated and quoted by
-- django_pgboss.identifiers, and {{schema_key}} by the spelling pg-boss hashes into its lock keys.
-- Nothing else is substituted: this file holds no values.
--
-- The plpgsql function bodies below are the compatibility surface with pg-boss itself: pg-boss's
-- drift check (detectSchemaDrift, `pg-boss doctor`) compares each stored body, whitespace aside,
-- with the one it would have written, so they are kept token for token and carry no comments of
-- their own. Everything outside the bodies (names, columns, defaults, constraints, index
-- definitions) is compared by catalog definition, which is what tests/test_schema.py checks too.

-- A pg-boss instance installing or migrating this schema takes the same transaction-scoped lock
-- first, so a `migrate` and a pg-boss start() racing on an empty database cannot both create it.
SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

CREATE SCHEMA IF NOT EXISTS {{schema}};

-- Declaration order is the sort order: created < retry < active < completed < cancelled < failed.
-- Every "waiting" test in the SQL is state < 'active'.
CREATE TYPE {{schema}}.job_state AS ENUM (
  'created',
  'retry',
  'active',
  'completed',
  'cancelled',
  'failed'
);

-- The only clock the job SQL reads. A single-statement, STABLE sql function is inlined by the
-- planner, so it costs what now() costs; tests swap its body to move time without sleeping.
CREATE FUNCTION {{schema}}.job_now()
RETURNS timestamp with time zone AS
$$
      SELECT pg_catalog.now();
$$
LANGUAGE sql STABLE;

-- One row. Besides the version, each *_on column is a single-row claim stamp so that one instance
-- per interval runs a background pass (cron, async index builds, flows, reindex);
-- monitor_backoff_on is a deadline before which no instance starts another stats aggregate.
CREATE TABLE {{schema}}.version (
  version int primary key,
  cron_on timestamp with time zone,
  bam_on timestamp with time zone,
  flow_on timestamp with time zone,
  reindex_on timestamp with time zone,
  monitor_backoff_on timestamp with time zone
);

-- Queue configuration, the monitor's cached gauges, and the 12.35 throughput window: the *_delta
-- columns count jobs created, completed and failed between delta_on - delta_seconds and delta_on.
-- monitor_claim_on decides which instance runs a monitor pass; monitor_on is when the gauges were
-- really written, so a claimed pass that skipped the aggregate does not pass for fresh counts.
-- Column defaults read the real clock: every write names its timestamps through job_now().
CREATE TABLE {{schema}}.queue (
  name text NOT NULL,
  policy text NOT NULL,
  retry_limit int NOT NULL,
  retry_delay int NOT NULL,
  retry_backoff bool NOT NULL,
  retry_delay_max int,
  expire_seconds int NOT NULL,
  retention_seconds int NOT NULL,
  deletion_seconds int NOT NULL,
  dead_letter text REFERENCES {{schema}}.queue (name) CHECK (dead_letter IS DISTINCT FROM name),
  partition bool NOT NULL,
  table_name text NOT NULL,
  deferred_count int NOT NULL default 0,
  queued_count int NOT NULL default 0,
  ready_count int NOT NULL default 0,
  warning_queued int NOT NULL default 0,
  active_count int NOT NULL default 0,
  failed_count int NOT NULL default 0,
  total_count int NOT NULL default 0,
  created_delta int NOT NULL default 0,
  completed_delta int NOT NULL default 0,
  failed_delta int NOT NULL default 0,
  delta_on timestamp with time zone,
  delta_seconds int,
  ready_history int[] NOT NULL default '{}',
  heartbeat_seconds int,
  notify bool NOT NULL DEFAULT false,
  singletons_active text[],
  monitor_claim_on timestamp with time zone,
  monitor_on timestamp with time zone,
  maintain_on timestamp with time zone,
  created_on timestamp with time zone not null default now(),
  updated_on timestamp with time zone not null default now(),
  PRIMARY KEY (name)
);

-- `cron` holds the expression whatever its format; `kind` says which format (a cron expression or
-- an RFC 5545 rule).
CREATE TABLE {{schema}}.schedule (
  name text REFERENCES {{schema}}.queue ON DELETE CASCADE,
  key text not null DEFAULT '',
  kind text not null DEFAULT 'cron' CHECK (kind IN ('cron', 'rrule')),
  cron text not null,
  timezone text DEFAULT 'UTC',
  data jsonb,
  options jsonb,
  created_on timestamp with time zone not null default now(),
  updated_on timestamp with time zone not null default now(),
  last_job_id uuid,
  PRIMARY KEY (name, key)
);

CREATE TABLE {{schema}}.subscription (
  event text not null,
  name text not null REFERENCES {{schema}}.queue ON DELETE CASCADE,
  created_on timestamp with time zone not null default now(),
  updated_on timestamp with time zone not null default now(),
  PRIMARY KEY(event, name)
);

-- Background async migration commands (index builds that must not block a deploy). created_on
-- uses clock_timestamp() so several commands queued in one transaction keep their order.
CREATE TABLE {{schema}}.bam (
  id uuid PRIMARY KEY default gen_random_uuid(),
  name text NOT NULL,
  version int NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  queue text,
  table_name text NOT NULL,
  command text NOT NULL,
  error text,
  created_on timestamp with time zone NOT NULL DEFAULT clock_timestamp(),
  started_on timestamp with time zone,
  completed_on timestamp with time zone
);

-- job_table_format rewrites a statement written against the job table (and its job_iN index
-- names) so that it targets one partition: `.job` becomes `.<partition>` and `job_i4` becomes
-- `<partition>_i4`. The patterns are anchored so a schema name containing "job" is left alone.
CREATE FUNCTION {{schema}}.job_table_format(command text, table_name text)
RETURNS text AS
$$
      SELECT format(
        regexp_replace(
          regexp_replace(command, '\.job\y', '.%1$I', 'g'),
          '\yjob_i(\d+)', '%1$s_i\1', 'g'
        ),
        table_name
      );
$$
LANGUAGE sql IMMUTABLE;

-- Runs a job-table statement on one table (by name or by queue), or on job_common and every
-- partitioned queue's table when neither is given.
CREATE FUNCTION {{schema}}.job_table_run(command text, tbl_name text DEFAULT NULL, queue_name text DEFAULT NULL)
RETURNS VOID AS
$$
    DECLARE
      tbl RECORD;
    BEGIN
      IF queue_name IS NOT NULL THEN
        SELECT table_name INTO tbl_name FROM {{schema}}.queue WHERE name = queue_name;
      END IF;

      IF tbl_name IS NOT NULL THEN
        EXECUTE {{schema}}.job_table_format(command, tbl_name);
        RETURN;
      END IF;

      EXECUTE {{schema}}.job_table_format(command, 'job_common');

      FOR tbl IN SELECT table_name FROM {{schema}}.queue WHERE partition = true
      LOOP
        EXECUTE {{schema}}.job_table_format(command, tbl.table_name);
      END LOOP;
    END;
$$
LANGUAGE plpgsql;

-- The same fan-out as job_table_run, but queued in bam for the background builder instead of run.
CREATE FUNCTION {{schema}}.job_table_run_async(command_name text, version int, command text, tbl_name text DEFAULT NULL, queue_name text DEFAULT NULL)
RETURNS VOID AS
$$
    BEGIN
      IF queue_name IS NOT NULL THEN
        SELECT table_name INTO tbl_name FROM {{schema}}.queue WHERE name = queue_name;
      END IF;

      IF tbl_name IS NOT NULL THEN
        INSERT INTO {{schema}}.bam (name, version, status, queue, table_name, command)
        VALUES (
          command_name,
          version,
          'pending',
          queue_name,
          tbl_name,
          {{schema}}.job_table_format(command, tbl_name)
        );
        RETURN;
      END IF;

      INSERT INTO {{schema}}.bam (name, version, status, queue, table_name, command)
      SELECT
        command_name,
        version,
        'pending',
        NULL,
        'job_common',
        {{schema}}.job_table_format(command, 'job_common')
      UNION ALL
      SELECT
        command_name,
        version,
        'pending',
        queue.name,
        queue.table_name,
        {{schema}}.job_table_format(command, queue.table_name)
      FROM {{schema}}.queue
      WHERE partition = true;
    END;
$$
LANGUAGE plpgsql;

-- Jobs, partitioned by queue name. A queue created with partition => true gets a table of its own
-- attached FOR VALUES IN (name); every other queue lives in job_common, the DEFAULT partition. The
-- parent carries only the primary key: indexes, foreign keys and the key_strict_fifo check are made
-- on each partition, so a partition only carries the policy index of its own queue.
--
-- The source_* columns are dead-letter provenance, stamped when a failed job is copied into its
-- dead-letter queue: the original queue, id, enqueue time, retry count and final output.
-- source_root_id is the id of the first job of the chain, carried by every dead-letter copy and
-- every redriven job after it, so one index lookup (job_i12) finds a whole chain however many round
-- trips it took and whatever retention has deleted in between.
CREATE TABLE {{schema}}.job (
  id uuid not null default gen_random_uuid(),
  name text not null,
  priority integer not null default(0),
  data jsonb,
  state {{schema}}.job_state not null default 'created',
  retry_limit integer not null default 2,
  retry_count integer not null default 0,
  retry_delay integer not null default 0,
  retry_backoff boolean not null default false,
  retry_delay_max integer,
  expire_seconds int not null default 900,
  deletion_seconds int not null default 604800,
  singleton_key text,
  singleton_on timestamp without time zone,
  group_id text,
  group_tier text,
  start_after timestamp with time zone not null default now(),
  created_on timestamp with time zone not null default now(),
  started_on timestamp with time zone,
  completed_on timestamp with time zone,
  keep_until timestamp with time zone NOT NULL default now() + interval '1209600',
  output jsonb,
  dead_letter text,
  policy text,
  heartbeat_on timestamp with time zone,
  heartbeat_seconds int,
  blocked boolean not null default false,
  blocking boolean not null default false,
  pending_dependencies int not null default 0,
  source_name text,
  source_id uuid,
  source_created_on timestamp with time zone,
  source_retry_count int,
  source_output jsonb,
  source_root_id uuid
) PARTITION BY LIST (name);

ALTER TABLE {{schema}}.job ADD PRIMARY KEY (name, id);

-- The DEFAULT partition, built with the same statements create_queue() runs for a partitioned
-- queue, but carrying every policy index at once since it holds queues of every policy.
--
-- Policy indexes (unique, partial, so each only constrains its own policy's live jobs):
--   job_i1  short:           one created job per key
--   job_i2  singleton:       one active job per key
--   job_i3  stately:         one job per key in each of created, retry and active
--   job_i6  exclusive:       one created, retry or active job per key
--   job_i8  key_strict_fifo: one active, retry or failed job per key (a failed head blocks its key)
-- Other indexes:
--   job_i4  throttle/debounce slots: one job per (singleton_on, key) unless cancelled
--   job_i7  group concurrency: active jobs per group
--   job_i9  flows: completed blocking parents, for the dependency resolver
--   job_i10 key_strict_fifo heads; INCLUDE (start_after) keeps the heads scan index-only
--   job_i11 the fetch index, in the fetch's ORDER BY (priority DESC, created_on) with start_after
--           as a trailing key so not-yet-due jobs are skipped inside the index
--   job_i12 dead-letter lineage by source_root_id, partial so it stays empty on queues that never
--           dead-letter
-- job_i5 is not missing: pg-boss retired that number and does not reuse it.
CREATE TABLE {{schema}}.job_common (LIKE {{schema}}.job INCLUDING GENERATED INCLUDING DEFAULTS);

SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job ADD PRIMARY KEY (name, id)$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT q_fkey FOREIGN KEY (name) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT dlq_fkey FOREIGN KEY (dead_letter) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE UNIQUE INDEX job_i1 ON {{schema}}.job (name, COALESCE(singleton_key, '')) WHERE state = 'created' AND policy = 'short'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE UNIQUE INDEX job_i2 ON {{schema}}.job (name, COALESCE(singleton_key, '')) WHERE state = 'active' AND policy = 'singleton'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE UNIQUE INDEX job_i3 ON {{schema}}.job (name, state, COALESCE(singleton_key, '')) WHERE state <= 'active' AND policy = 'stately'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE UNIQUE INDEX job_i6 ON {{schema}}.job (name, COALESCE(singleton_key, '')) WHERE state <= 'active' AND policy = 'exclusive'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE UNIQUE INDEX job_i8 ON {{schema}}.job (name, singleton_key) WHERE state IN ('active', 'retry', 'failed') AND policy = 'key_strict_fifo'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX job_i10 ON {{schema}}.job (name, singleton_key, state DESC, created_on, id) INCLUDE (start_after) WHERE state < 'active' AND NOT blocked AND policy = 'key_strict_fifo'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT job_key_strict_fifo_singleton_key_check CHECK (NOT (policy = 'key_strict_fifo' AND singleton_key IS NULL))$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE UNIQUE INDEX job_i4 ON {{schema}}.job (name, singleton_on, COALESCE(singleton_key, '')) WHERE state <> 'cancelled' AND singleton_on IS NOT NULL$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX job_i11 ON {{schema}}.job (name, priority DESC, created_on, start_after) WHERE state < 'active' AND NOT blocked$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX job_i7 ON {{schema}}.job (name, group_id) WHERE state = 'active' AND group_id IS NOT NULL$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX job_i9 ON {{schema}}.job (name, id) WHERE blocking AND state = 'completed'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX job_i12 ON {{schema}}.job (source_root_id) WHERE source_root_id IS NOT NULL$cmd$, 'job_common');

ALTER TABLE {{schema}}.job ATTACH PARTITION {{schema}}.job_common DEFAULT;

CREATE TABLE {{schema}}.warning (
  id uuid PRIMARY KEY default gen_random_uuid(),
  type text NOT NULL,
  message text NOT NULL,
  data jsonb,
  created_on timestamp with time zone NOT NULL DEFAULT now()
);

CREATE INDEX warning_i1 ON {{schema}}.warning (created_on DESC);

-- Monitor snapshots, one row per queue per pass, in daily partitions. The delta columns are the
-- throughput window the pass counted (null when it did not count); the covering index leaves them
-- out on purpose, as pg-boss does, so a fresh install and a migrated one have the same index.
CREATE TABLE {{schema}}.queue_stats (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  name text NOT NULL,
  deferred_count int NOT NULL DEFAULT 0,
  queued_count   int NOT NULL DEFAULT 0,
  ready_count    int NOT NULL DEFAULT 0,
  active_count   int NOT NULL DEFAULT 0,
  failed_count   int NOT NULL DEFAULT 0,
  total_count    int NOT NULL DEFAULT 0,
  created_delta   int,
  completed_delta int,
  failed_delta    int,
  delta_seconds   int,
  delta_on        timestamptz,
  captured_on timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id, captured_on)
) PARTITION BY RANGE (captured_on);

CREATE INDEX queue_stats_i1 ON {{schema}}.queue_stats (name, captured_on DESC) INCLUDE (deferred_count, queued_count, ready_count, active_count, failed_count, total_count);

-- Today's and tomorrow's partitions (UTC days), so the first monitor pass has somewhere to write.
-- The bounds are explicit +00 literals: a bare date would be read in the session's TimeZone and
-- leave rows near UTC midnight with no partition. The monitor creates later days as they come.
DO $$
DECLARE
  stats_day date;
BEGIN
  FOR offset_days IN 0..1 LOOP
    stats_day := ({{schema}}.job_now() AT TIME ZONE 'UTC')::date + offset_days;
    EXECUTE format(
      'CREATE TABLE IF NOT EXISTS {{schema}}.%I PARTITION OF {{schema}}.queue_stats FOR VALUES FROM (%L) TO (%L)',
      'queue_stats_' || to_char(stats_day, 'YYYYMMDD'),
      to_char(stats_day, 'YYYY-MM-DD') || ' 00:00:00+00',
      to_char(stats_day + 1, 'YYYY-MM-DD') || ' 00:00:00+00'
    );
  END LOOP;
END;
$$;

-- Flow dependencies: a child job waits (blocked) until each parent listed here completes.
CREATE TABLE {{schema}}.job_dependency (
  child_name text NOT NULL,
  child_id uuid NOT NULL,
  parent_name text NOT NULL,
  parent_id uuid NOT NULL,
  PRIMARY KEY (child_name, child_id, parent_name, parent_id)
);

CREATE INDEX IF NOT EXISTS job_dep_parent_idx ON {{schema}}.job_dependency (parent_name, parent_id);

-- create_queue(name, options) inserts the queue row from pg-boss's camelCase options (absent
-- options take pg-boss's defaults) and, for partition => true, builds the queue's own table: the
-- base indexes, its policy's index, a CHECK that pins the partition to its queue name, then ATTACH.
-- The table is named 'j' || sha224(name) so any queue name gives a legal, bounded identifier. A
-- queue that already exists is left unchanged (ON CONFLICT DO NOTHING).
CREATE FUNCTION {{schema}}.create_queue(queue_name text, options jsonb)
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

-- delete_queue(name) drops a partitioned queue's table, or deletes its rows from job_common, then
-- the queue row (its schedules and subscriptions go with it by cascade).
CREATE FUNCTION {{schema}}.delete_queue(queue_name text)
RETURNS VOID AS
$$
    DECLARE
      v_table varchar;
      v_partition bool;
    BEGIN

      SELECT table_name, partition
      FROM {{schema}}.queue
      WHERE name = queue_name
      INTO v_table, v_partition;

      IF v_partition THEN
        EXECUTE format('DROP TABLE IF EXISTS {{schema}}.%I', v_table);
      ELSE
        EXECUTE format('DELETE FROM {{schema}}.%I WHERE name = %L', v_table, queue_name);
      END IF;

      DELETE FROM {{schema}}.queue WHERE name = queue_name;
    END;
$$
LANGUAGE plpgsql;

INSERT INTO {{schema}}.version (version) VALUES (43);
