-- Rolls pg-boss schema 41 (pg-boss 12.31) back to 40, with the effect of pg-boss 12.35's
-- own rollback of its migration 41 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: a schedule's kind (cron or rrule, with its CHECK) and last_job_id, with what they
-- hold. The UTC default of schedule.timezone stays, as pg-boss leaves it: a schema-40 pg-boss names
-- the column on every write. Back at 41 the upgrade relabels rrule rows from their expression.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 41 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 41: this step rolls back 41 to 40 only', found;
  END IF;
END
$check$;

ALTER TABLE {{schema}}.schedule DROP COLUMN kind;
ALTER TABLE {{schema}}.schedule DROP COLUMN last_job_id;

UPDATE {{schema}}.version SET version = 40;
