-- pg-boss schema 31 (pg-boss 12.19, 12.20) to 32 (12.21): a queue's notify flag, and the failed and
-- ready gauges the monitor caches on the queue row. Frozen.
ALTER TABLE {{schema}}.queue ADD COLUMN notify boolean NOT NULL DEFAULT false;
ALTER TABLE {{schema}}.queue ADD COLUMN failed_count int NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.queue ADD COLUMN ready_count int NOT NULL DEFAULT 0;
UPDATE {{schema}}.version SET version = 32;
