-- Schema 37 to 38 (pg-boss 12.28): job_i10, the head-of-key index of key_strict_fifo queues, on
-- job_common and on the own table of each key_strict_fifo queue (built in the transaction, see
-- v32_to_v33.sql). Frozen.
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX IF NOT EXISTS job_i10 ON {{schema}}.job (name, singleton_key, state DESC, created_on, id) INCLUDE (start_after) WHERE state < 'active' AND NOT blocked AND policy = 'key_strict_fifo'$cmd$, 'job_common');
SELECT {{schema}}.job_table_run($cmd$CREATE INDEX IF NOT EXISTS job_i10 ON {{schema}}.job (name, singleton_key, state DESC, created_on, id) INCLUDE (start_after) WHERE state < 'active' AND NOT blocked AND policy = 'key_strict_fifo'$cmd$, table_name)
FROM {{schema}}.queue
WHERE partition AND policy = 'key_strict_fifo';
UPDATE {{schema}}.version SET version = 38;
