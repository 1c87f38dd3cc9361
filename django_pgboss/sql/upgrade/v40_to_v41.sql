-- Schema 40 to 41 (pg-boss 12.31): a schedule's kind (cron or an RFC 5545 rule), its last job, and
-- UTC for a schedule that has no time zone. Frozen.
ALTER TABLE {{schema}}.schedule ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'cron' CHECK (kind IN ('cron', 'rrule'));
-- A row that already holds a rule (written before kind existed) is labelled by what it holds; no
-- cron expression contains "=", ":" or ";".
UPDATE {{schema}}.schedule SET kind = 'rrule'
WHERE kind = 'cron'
  AND (cron ~* '(^|[[:space:]]|;)FREQ=' OR cron ~* '(^|[[:space:]])(DTSTART|RRULE|RDATE|EXDATE)[;:]');
-- A NULL zone was never chosen (the default was meant to be UTC): say so.
UPDATE {{schema}}.schedule SET timezone = 'UTC' WHERE timezone IS NULL;
ALTER TABLE {{schema}}.schedule ALTER COLUMN timezone SET DEFAULT 'UTC';
ALTER TABLE {{schema}}.schedule ADD COLUMN IF NOT EXISTS last_job_id uuid;
UPDATE {{schema}}.version SET version = 41;
