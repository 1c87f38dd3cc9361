-- Rolls pg-boss schema 35 (pg-boss 12.24) back to 34, with the effect of pg-boss 12.35's
-- own rollback of its migration 35 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: the stats history table queue_stats (with every snapshot it holds, and its
-- partitions) and queue.ready_history.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 35 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 35: this step rolls back 35 to 34 only', found;
  END IF;
END
$check$;

ALTER TABLE {{schema}}.queue DROP COLUMN ready_history;
DROP TABLE IF EXISTS {{schema}}.queue_stats;

UPDATE {{schema}}.version SET version = 34;
