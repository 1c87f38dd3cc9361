-- Rolls pg-boss schema 44 (pg-boss 12.36) back to 43 (12.35), with the effect of pg-boss 12.38's own
-- rollback of its migration 44 (migrationStore's uninstall steps). Frozen.
--
-- Run by manage.py pgboss_rollback and by `migrate pgboss 0004`, in one transaction, under
-- pg-boss's advisory lock. What goes: the instance registry with its rows, the queue row's blocked
-- count and latency columns, the stats history's latency columns and the job's trace context, with
-- what they hold. Jobs, queues, schedules, subscriptions, warnings and the rest of the stats history
-- stay.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 44 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 44: this step rolls back 44 to 43 only', found;
  END IF;
END
$check$;

-- The job tables are locked before the queue table, the order a send or a fetch takes them in (its
-- job table, then the queue row it reads): taken the other way round, a send that holds its job
-- table and waits for the queue table, while this step holds the queue table and waits for the job
-- tables, is a deadlock, and PostgreSQL fails one of the two (bench/upgrade_46.py met it).
LOCK TABLE {{schema}}.job IN ACCESS EXCLUSIVE MODE;
DROP TABLE {{schema}}.instance;

ALTER TABLE {{schema}}.queue
  DROP COLUMN blocked_count,
  DROP COLUMN wait_bins,
  DROP COLUMN run_bins,
  DROP COLUMN ready_oldest_seconds;

ALTER TABLE {{schema}}.queue_stats
  DROP COLUMN wait_bins,
  DROP COLUMN run_bins,
  DROP COLUMN ready_oldest_seconds;

ALTER TABLE {{schema}}.job DROP COLUMN trace_context;

UPDATE {{schema}}.version SET version = 43;
