-- Schema 34 to 35 (pg-boss 12.24): the queue stats history, partitioned by UTC day with today's and
-- tomorrow's partitions made now (the monitor makes the later ones), and the queue's ready history.
-- Frozen.
CREATE TABLE {{schema}}.queue_stats (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  name text NOT NULL,
  deferred_count int NOT NULL DEFAULT 0,
  queued_count int NOT NULL DEFAULT 0,
  ready_count int NOT NULL DEFAULT 0,
  active_count int NOT NULL DEFAULT 0,
  failed_count int NOT NULL DEFAULT 0,
  total_count int NOT NULL DEFAULT 0,
  captured_on timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id, captured_on)
) PARTITION BY RANGE (captured_on);
CREATE INDEX queue_stats_i1 ON {{schema}}.queue_stats (name, captured_on DESC)
  INCLUDE (deferred_count, queued_count, ready_count, active_count, failed_count, total_count);
DO $$
DECLARE
  day date;
BEGIN
  FOR i IN 0..1 LOOP
    day := (now() AT TIME ZONE 'UTC')::date + i;
    EXECUTE format(
      'CREATE TABLE IF NOT EXISTS {{schema}}.%I PARTITION OF {{schema}}.queue_stats FOR VALUES FROM (%L) TO (%L)',
      'queue_stats_' || to_char(day, 'YYYYMMDD'),
      to_char(day, 'YYYY-MM-DD') || ' 00:00:00+00',
      to_char(day + 1, 'YYYY-MM-DD') || ' 00:00:00+00'
    );
  END LOOP;
END;
$$;
ALTER TABLE {{schema}}.queue ADD COLUMN ready_history int[] NOT NULL DEFAULT '{}';
UPDATE {{schema}}.version SET version = 35;
