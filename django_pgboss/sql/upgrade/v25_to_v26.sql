-- pg-boss schema 25 (pg-boss 11.0) to 26 (11.1, 12.0 to 12.5): the exclusive policy's unique index
-- on job_common (one queued-or-active job per key). No queue can have the policy yet, so no queue's
-- own table needs it. Frozen.
CREATE UNIQUE INDEX IF NOT EXISTS job_i6 ON {{schema}}.job_common (name, COALESCE(singleton_key, '')) WHERE state <= 'active' AND policy = 'exclusive';
UPDATE {{schema}}.version SET version = 26;
