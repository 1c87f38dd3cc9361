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

-- The migration's operation locks the job tables, queue and queue_stats before this file runs, all
-- in one statement, retried rather than waited on (operations.lock_for_step): clients take those
-- locks in different orders, and a step that took them one at a time would close a cycle with one
-- of them. Run on its own, the file takes the job tables first, the order a send takes them in.
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
