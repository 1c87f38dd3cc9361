-- Rolls pg-boss schema 37 (pg-boss 12.26) back to 36, with the effect of pg-boss 12.35's
-- own rollback of its migration 37 (migrationStore's uninstall steps, the partitioned layout). Frozen.
--
-- What goes: the anchored job_table_format() (regexp_replace): the naive replace() definition
-- of schema 36 is restored, as pg-boss restores it, so the function is schema 36's exactly.
-- Jobs and the rest of the schema stay. Run by manage.py pgboss_rollback, in its transaction.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

DO $check$
DECLARE
  found int;
BEGIN
  SELECT version INTO found FROM {{schema}}.version;
  IF found IS DISTINCT FROM 37 THEN
    RAISE EXCEPTION 'the pg-boss schema is at version %, not 37: this step rolls back 37 to 36 only', found;
  END IF;
END
$check$;

-- Schema 36's job_table_format(), the naive replace() one, as pg-boss keeps it for this rollback.
CREATE OR REPLACE FUNCTION {{schema}}.job_table_format(command text, table_name text)
RETURNS text AS
$$
  SELECT format(
    replace(
      replace(command, '.job', '.%1$I'),
      'job_i', '%1$s_i'
    ),
    table_name
  );
$$
LANGUAGE sql IMMUTABLE;

UPDATE {{schema}}.version SET version = 36;
