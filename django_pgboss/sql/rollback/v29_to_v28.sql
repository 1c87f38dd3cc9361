-- Rolls pg-boss schema 29 (pg-boss 12.11) back to 28, with the effect of pg-boss 12.35's
-- own rollback of its migration 29 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: the warning table (the persisted warnings) and its index.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 29 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 29: this step rolls back 29 to 28 only', found;
  END IF;
END
$check$;

DROP INDEX {{schema}}.warning_i1;
DROP TABLE {{schema}}.warning;

UPDATE {{schema}}.version SET version = 28;
