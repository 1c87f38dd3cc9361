-- Reverses citus/distribute.sql: every table back on the coordinator as a plain PostgreSQL table,
-- and the job table's two foreign keys back on each partition, as pg-boss declares them. Applied
-- by migration 0008 backwards when the job table is distributed. Frozen.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

ALTER TABLE {{schema}}.job DROP CONSTRAINT q_fkey;
ALTER TABLE {{schema}}.job DROP CONSTRAINT dlq_fkey;

SELECT undistribute_table('{{schema}}.job');
SELECT undistribute_table('{{schema}}.job_dependency');
SELECT undistribute_table('{{schema}}.subscription', cascade_via_foreign_keys => true);

SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT q_fkey FOREIGN KEY (name) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED$cmd$);
SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT dlq_fkey FOREIGN KEY (dead_letter) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED$cmd$);
