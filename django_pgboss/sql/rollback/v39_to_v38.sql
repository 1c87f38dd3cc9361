-- Rolls pg-boss schema 39 (pg-boss 12.29) back to 38, with the effect of pg-boss 12.35's
-- own rollback of its migration 39 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: the reindex pass's claim stamp version.reindex_on.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 39 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 39: this step rolls back 39 to 38 only', found;
  END IF;
END
$check$;

ALTER TABLE {{schema}}.version DROP COLUMN reindex_on;

UPDATE {{schema}}.version SET version = 38;
