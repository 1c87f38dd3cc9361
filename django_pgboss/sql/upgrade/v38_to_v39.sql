-- Schema 38 to 39 (pg-boss 12.29): the reindex pass's claim stamp. Frozen.
ALTER TABLE {{schema}}.version ADD COLUMN IF NOT EXISTS reindex_on timestamp with time zone;
UPDATE {{schema}}.version SET version = 39;
