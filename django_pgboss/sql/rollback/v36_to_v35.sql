-- Rolls pg-boss schema 36 (pg-boss 12.24.1) back to 35, with the effect of pg-boss 12.35's
-- own rollback of its migration 36 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- Nothing in the catalog: version 36 only set bam.created_on's default to clock_timestamp(),
-- which pg-boss's rollback keeps (harmless and forward-compatible), so only the version row moves.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 36 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 36: this step rolls back 36 to 35 only', found;
  END IF;
END
$check$;

UPDATE {{schema}}.version SET version = 35;
