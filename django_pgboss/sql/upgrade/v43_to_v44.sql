-- Schema 43 (pg-boss 12.35) to 44 (12.36): the instance registry, the latency histograms and the
-- blocked count on the queue row and in the stats history, and the job's stored trace context.
-- Frozen.
--
-- As in pg-boss, no statement rewrites a table: every added column is nullable or has a constant
-- default. instance starts empty (each process registers when it starts); blocked_count reads 0 and
-- the histograms null until the next monitor pass counts the queue. The migration takes pg-boss's
-- advisory lock before it reads the version (UpgradePgBossSchema).
--
-- The migration's operation locks the job tables, queue and queue_stats before this file runs, all
-- in one statement, retried rather than waited on (operations.lock_for_step): clients take those
-- locks in different orders, and a step that took them one at a time would close a cycle with one
-- of them. Run on its own, the file takes the job tables first, the order a send takes them in.
LOCK TABLE {{schema}}.job IN ACCESS EXCLUSIVE MODE;
CREATE TABLE {{schema}}.instance (
  id uuid PRIMARY KEY,
  name text,
  host text NOT NULL,
  pid int NOT NULL,
  version text NOT NULL,
  node_version text NOT NULL,
  application_name text,
  heartbeat_seconds int NOT NULL,
  supervise bool NOT NULL,
  schedule bool NOT NULL,
  migrate bool NOT NULL,
  persist_queue_stats bool NOT NULL,
  persist_warnings bool NOT NULL,
  pool_max int,
  pool_total int,
  pool_idle int,
  pool_waiting int,
  workers jsonb NOT NULL DEFAULT '[]'::jsonb,
  metrics jsonb,
  config jsonb NOT NULL DEFAULT '{}'::jsonb,
  crash_restarts int NOT NULL DEFAULT 0,
  crash_restarts_since timestamptz,
  started_on timestamptz NOT NULL DEFAULT now(),
  heartbeat_on timestamptz NOT NULL DEFAULT now(),
  stopped_on timestamptz
);
ALTER TABLE {{schema}}.queue
  ADD COLUMN blocked_count int NOT NULL DEFAULT 0,
  ADD COLUMN wait_bins int[],
  ADD COLUMN run_bins int[],
  ADD COLUMN ready_oldest_seconds int;
ALTER TABLE {{schema}}.queue_stats
  ADD COLUMN wait_bins int[],
  ADD COLUMN run_bins int[],
  ADD COLUMN ready_oldest_seconds int;
ALTER TABLE {{schema}}.job ADD COLUMN IF NOT EXISTS trace_context jsonb;
UPDATE {{schema}}.version SET version = 44;
