-- Schema 41 to 42 (pg-boss 12.33): job_now(), the one clock the job statements read, and
-- create_queue() using it. Both functions are in functions_43.sql, applied before every step. Frozen.
UPDATE {{schema}}.version SET version = 42;
