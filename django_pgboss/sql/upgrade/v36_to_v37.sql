-- Schema 36 to 37 (pg-boss 12.26): job_table_format() anchored so a schema name containing "job" is
-- left alone. The function itself is in functions_43.sql, applied before every step. Frozen.
UPDATE {{schema}}.version SET version = 37;
