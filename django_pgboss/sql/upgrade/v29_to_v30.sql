-- Schema 29 to 30 (pg-boss 12.12): heartbeats, a job's last one and the interval its queue or its
-- send asked for. Frozen.
ALTER TABLE {{schema}}.job ADD COLUMN heartbeat_on timestamp with time zone;
ALTER TABLE {{schema}}.job ADD COLUMN heartbeat_seconds int;
ALTER TABLE {{schema}}.queue ADD COLUMN heartbeat_seconds int;
UPDATE {{schema}}.version SET version = 30;
