-- Rolls pg-boss schema 26 (pg-boss 11.1) back to 25, with the effect of pg-boss 12.35's
-- own rollback of its migration 26 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: the exclusive-policy index job_i6 of job_common. As in pg-boss's rollback,
-- create_queue() keeps schema 26's body and a queue's own table keeps its own job_i6.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 26 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 26: this step rolls back 26 to 25 only', found;
  END IF;
END
$check$;

DROP INDEX {{schema}}.job_i6;

UPDATE {{schema}}.version SET version = 25;
