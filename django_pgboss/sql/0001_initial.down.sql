-- Reverses 0001_initial.sql: removes every object pg-boss schema 43 consists of, then the schema
-- itself when nothing else is left in it.
--
-- Frozen with 0001_initial.sql. The schema is dropped only when empty: a schema the user created
-- beforehand and keeps their own objects in survives, with a NOTICE saying so.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

-- Dropping the parents drops every partition with them: job_common, each partitioned queue's
-- table and each day of queue_stats.
DROP TABLE IF EXISTS {{schema}}.job;
DROP TABLE IF EXISTS {{schema}}.queue_stats;
DROP TABLE IF EXISTS {{schema}}.job_dependency;
DROP TABLE IF EXISTS {{schema}}.warning;
DROP TABLE IF EXISTS {{schema}}.subscription;
DROP TABLE IF EXISTS {{schema}}.schedule;
DROP TABLE IF EXISTS {{schema}}.queue;
DROP TABLE IF EXISTS {{schema}}.bam;
DROP TABLE IF EXISTS {{schema}}.version;
-- pg-boss's test clock keeps its fake time here; a killed test run can leave it behind.
DROP TABLE IF EXISTS {{schema}}.__pgboss_test_clock;

DROP FUNCTION IF EXISTS {{schema}}.create_queue(text, jsonb);
DROP FUNCTION IF EXISTS {{schema}}.delete_queue(text);
DROP FUNCTION IF EXISTS {{schema}}.job_table_run_async(text, int, text, text, text);
DROP FUNCTION IF EXISTS {{schema}}.job_table_run(text, text, text);
DROP FUNCTION IF EXISTS {{schema}}.job_table_format(text, text);
DROP FUNCTION IF EXISTS {{schema}}.job_now();
DROP TYPE IF EXISTS {{schema}}.job_state;

DO $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM pg_class WHERE relnamespace = '{{schema}}'::regnamespace
    UNION ALL SELECT 1 FROM pg_proc WHERE pronamespace = '{{schema}}'::regnamespace
    UNION ALL SELECT 1 FROM pg_type WHERE typnamespace = '{{schema}}'::regnamespace
  ) THEN
    RAISE NOTICE 'schema % still holds objects that are not pg-boss''s; it is kept', '{{schema}}';
  ELSE
    DROP SCHEMA {{schema}};
  END IF;
END;
$$;
