-- Schema 35 to 36 (pg-boss 12.24.1): bam's created_on default as version 33 sets it, for schemas that
-- reached 33 before it did. Frozen.
ALTER TABLE {{schema}}.bam ALTER COLUMN created_on SET DEFAULT clock_timestamp();
UPDATE {{schema}}.version SET version = 36;
