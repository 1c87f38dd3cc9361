-- Schema 27 to 28 (pg-boss 12.10): the key_strict_fifo policy: a job of it must have a key, and at
-- most one job per key is active, retrying or failed (job_i8). On job_common only: no queue can have
-- the policy yet, so no queue's own table needs them. Frozen.
SELECT {{schema}}.job_table_run($cmd$ALTER TABLE {{schema}}.job ADD CONSTRAINT job_key_strict_fifo_singleton_key_check CHECK (NOT (policy = 'key_strict_fifo' AND singleton_key IS NULL))$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE UNIQUE INDEX IF NOT EXISTS job_i8 ON {{schema}}.job (name, singleton_key) WHERE state IN ('active', 'retry', 'failed') AND policy = 'key_strict_fifo'$cmd$, 'job_common');
UPDATE {{schema}}.version SET version = 28;
