-- The citus-distributed variant of pg-boss schema 46 (PGBOSS["BACKEND"] = "citus-distributed"):
-- the job table distributed over the Citus workers by queue name, so each queue's statements run
-- whole on the one node holding its shard. Applied by migration 0008 in that mode only, on a
-- coordinator with the citus extension and worker nodes, after the schema is at 46. Frozen.
--
-- Where each table goes, and why:
--   job (with job_common and every queue's own table)  distributed by name, all colocated: the
--        primary key (name, id) and every unique index lead with name, so each stays enforceable
--        per shard, and a statement about one queue is routed to one shard.
--   queue, schedule, subscription, job_dependency  reference tables (a copy on every node): job's
--        foreign keys point at queue, schedule and subscription cascade from it, and the job
--        statements join queue and job_dependency on whichever node a shard lives.
--   version, warning, bam, instance, queue_stats  plain tables on the coordinator: nothing on a
--        worker reads them, and queue_stats is partitioned by day with a key that holds no name.
--
-- Citus refuses a foreign key declared on a partition of a distributed table, and accepts it on the
-- partitioned parent, from where PostgreSQL clones it to every partition (the ones create_queue()
-- attaches later too, whose own identical keys it merges into the parent's). So the two keys move
-- from job_common to job; their definitions are pg-boss's.

SELECT pg_advisory_xact_lock(
  ('x' || encode(sha224((current_database() || '.pgboss.{{schema_key}}')::bytea), 'hex'))::bit(64)::bigint
);

SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job DROP CONSTRAINT IF EXISTS q_fkey$cmd$);
SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job DROP CONSTRAINT IF EXISTS dlq_fkey$cmd$);

SELECT create_reference_table('{{schema}}.queue');
SELECT create_reference_table('{{schema}}.schedule');
SELECT create_reference_table('{{schema}}.subscription');
SELECT create_reference_table('{{schema}}.job_dependency');
SELECT create_distributed_table('{{schema}}.job', 'name');

ALTER TABLE {{schema}}.job ADD CONSTRAINT q_fkey FOREIGN KEY (name) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE {{schema}}.job ADD CONSTRAINT dlq_fkey FOREIGN KEY (dead_letter) REFERENCES {{schema}}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED;
