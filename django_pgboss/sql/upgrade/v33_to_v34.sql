-- Schema 33 to 34 (pg-boss 12.23): where a dead-letter copy came from. Frozen.
ALTER TABLE {{schema}}.job ADD COLUMN IF NOT EXISTS source_name text;
ALTER TABLE {{schema}}.job ADD COLUMN IF NOT EXISTS source_id uuid;
ALTER TABLE {{schema}}.job ADD COLUMN IF NOT EXISTS source_created_on timestamp with time zone;
ALTER TABLE {{schema}}.job ADD COLUMN IF NOT EXISTS source_retry_count int;
UPDATE {{schema}}.version SET version = 34;
