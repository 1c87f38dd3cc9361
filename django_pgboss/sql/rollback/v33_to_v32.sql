-- Rolls pg-boss schema 33 (pg-boss 12.22) back to 32, with the effect of pg-boss 12.35's
-- own rollback of its migration 33 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: the flow resolver index job_i9 and the flow pass's stamp version.flow_on; job_i5 is
-- rebuilt in schema 32's covering shape on every job table; create_queue() goes back to 32's.
-- bam.created_on keeps clock_timestamp() as its default (pg-boss's rollback of 33 keeps it too).
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 33 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 33: this step rolls back 33 to 32 only', found;
  END IF;
END
$check$;

-- pg-boss's background index builds of version 33 that never finished would otherwise run again
-- under a later version and rebuild what this step drops.
DELETE FROM {{schema}}.bam WHERE version = 33 AND status <> 'completed';

-- create_queue() as schema 32 has it, restored before the job tables change, so that a queue
-- created while this runs gets a table of schema 32's shape.
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
      notify
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
      COALESCE((options->>'notify')::bool, false)
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

  EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i5 ON {{schema}}.job (name, start_after) INCLUDE (priority, created_on, id) WHERE state < 'active' AND NOT blocked$cmd$, tablename);
  EXECUTE {{schema}}.job_table_format($cmd$CREATE UNIQUE INDEX job_i4 ON {{schema}}.job (name, singleton_on, COALESCE(singleton_key, '')) WHERE state <> 'cancelled' AND singleton_on IS NOT NULL$cmd$, tablename);
  EXECUTE {{schema}}.job_table_format($cmd$CREATE INDEX job_i7 ON {{schema}}.job (name, group_id) WHERE state = 'active' AND group_id IS NOT NULL$cmd$, tablename);

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
    EXECUTE {{schema}}.job_table_format($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT job_key_strict_fifo_singleton_key_check CHECK (NOT (policy = 'key_strict_fifo' AND singleton_key IS NULL))$cmd$, tablename);
  END IF;

  EXECUTE format('ALTER TABLE {{schema}}.%I ADD CONSTRAINT cjc CHECK (name=%L)', tablename, queue_name);
  EXECUTE format('ALTER TABLE {{schema}}.job ATTACH PARTITION {{schema}}.%I FOR VALUES IN (%L)', tablename, queue_name);
END;
$$
LANGUAGE plpgsql;

SELECT {{schema}}.job_table_run($cmd$DROP INDEX IF EXISTS {{schema}}.job_i5$cmd$);
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX job_i5 ON {{schema}}.job (name, start_after) INCLUDE (priority, created_on, id) WHERE state < 'active' AND NOT blocked$cmd$);
SELECT {{schema}}.job_table_run($cmd$DROP INDEX IF EXISTS {{schema}}.job_i9$cmd$);
ALTER TABLE {{schema}}.version DROP COLUMN flow_on;

UPDATE {{schema}}.version SET version = 32;
