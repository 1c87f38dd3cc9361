-- Rolls pg-boss schema 34 (pg-boss 12.23) back to 33, with the effect of pg-boss 12.35's
-- own rollback of its migration 34 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: the dead-letter provenance columns of job (source_name, source_id,
-- source_created_on, source_retry_count), with what they hold.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 34 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 34: this step rolls back 34 to 33 only', found;
  END IF;
END
$check$;

ALTER TABLE {{schema}}.job DROP COLUMN source_name;
ALTER TABLE {{schema}}.job DROP COLUMN source_id;
ALTER TABLE {{schema}}.job DROP COLUMN source_created_on;
ALTER TABLE {{schema}}.job DROP COLUMN source_retry_count;

UPDATE {{schema}}.version SET version = 33;
