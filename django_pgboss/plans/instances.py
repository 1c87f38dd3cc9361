"""The instance registry's statements (pg-boss 12.38's registrar), SQL text only.

One row per registered process in ``<schema>.instance``: a pg-boss (Node) instance, or a
django_pgboss worker or monitor. A process writes its own row at start, refreshes it on its
heartbeat and marks it stopped on a clean stop; a crashed process never does, and goes quiet when
its heartbeat stops moving. Every moment is the schema's clock, ``job_now()``, as pg-boss writes
them, so a Node and a Python process judge liveness alike (and a TestClock moves both).

The parameters of registration and heartbeat are named after the columns they fill
(:data:`REGISTERED_COLUMNS`); ``workers``, ``metrics`` and ``config`` are JSON text.
"""

from __future__ import annotations

#: A row is live until it misses this many heartbeats (pg-boss's INSTANCE_QUIET_BEATS).
INSTANCE_QUIET_BEATS = 3
#: A row whose heartbeat has not moved for this many days is deleted, stopped or quiet alike.
INSTANCE_RETENTION_DAYS = 7
#: A crash loop leaves a quiet row per restart: registering keeps this many of its own name's dead
#: rows (its host's, when unnamed), and the monitor's pass this many dead rows overall. pg-boss
#: keys the first on the name because a recreated Kubernetes pod comes back under a new host name.
INSTANCE_DEAD_KEPT_PER_NAME = 20
INSTANCE_DEAD_KEPT = 1000

#: The columns a registration and a heartbeat write from parameters of the same name.
REGISTERED_COLUMNS = (
    "id",
    "name",
    "host",
    "pid",
    "version",
    "node_version",
    "heartbeat_seconds",
    "supervise",
    "schedule",
    "migrate",
    "persist_queue_stats",
    "persist_warnings",
    "pool_max",
    "pool_total",
    "pool_idle",
    "pool_waiting",
    "workers",
    "metrics",
    "config",
)
_JSON_COLUMNS = frozenset({"workers", "metrics", "config"})


def _quiet(schema: str) -> str:
    # Heard from longer ago than its own three beats: the interval is per row, so a Node instance
    # beating every 30 seconds and a worker beating every 5 go quiet at their own pace.
    return f"heartbeat_on < {schema}.job_now() - heartbeat_seconds * {INSTANCE_QUIET_BEATS} * interval '1 second'"


def _dead(schema: str) -> str:
    """Stopped, or quiet: the complement of get_instances()' ``live``."""
    return f"(stopped_on IS NOT NULL OR {_quiet(schema)})"


def _insert(schema: str, started_on: str) -> str:
    columns = ", ".join(REGISTERED_COLUMNS)
    values = ", ".join(
        f"%({column})s::text::jsonb" if column in _JSON_COLUMNS else f"%({column})s"
        for column in REGISTERED_COLUMNS
    )
    # application_name is the registering session's own, so pg_stat_activity joins to the row
    # wherever that name is unique, as pg-boss records it.
    return f"""
    INSERT INTO {schema}.instance ({columns}, application_name, started_on, heartbeat_on)
    VALUES ({values}, current_setting('application_name'), {started_on}, {schema}.job_now())
    ON CONFLICT (id) DO UPDATE SET"""


# What every beat refreshes: the figures that move while the process runs.
_BEAT = """
      pool_max = EXCLUDED.pool_max,
      pool_total = EXCLUDED.pool_total,
      pool_idle = EXCLUDED.pool_idle,
      pool_waiting = EXCLUDED.pool_waiting,
      workers = EXCLUDED.workers,
      metrics = EXCLUDED.metrics,
      heartbeat_on = EXCLUDED.heartbeat_on"""


def register_instance(schema: str) -> str:
    """Write this process's row from a fresh start (a restarted id reads live again, its crash
    count reset); returns its started_on."""
    return f"""{_insert(schema, f"{schema}.job_now()")}
      name = EXCLUDED.name,
      host = EXCLUDED.host,
      pid = EXCLUDED.pid,
      version = EXCLUDED.version,
      node_version = EXCLUDED.node_version,
      heartbeat_seconds = EXCLUDED.heartbeat_seconds,
      supervise = EXCLUDED.supervise,
      schedule = EXCLUDED.schedule,
      migrate = EXCLUDED.migrate,
      persist_queue_stats = EXCLUDED.persist_queue_stats,
      persist_warnings = EXCLUDED.persist_warnings,
      application_name = EXCLUDED.application_name,
      config = EXCLUDED.config,
      started_on = EXCLUDED.started_on,
      stopped_on = NULL,
      crash_restarts = 0,
      crash_restarts_since = NULL,{_BEAT}
    RETURNING started_on"""


def heartbeat_instance(schema: str) -> str:
    """Refresh the row; an upsert, so a row a failed registration or the retention prune left
    missing comes back, with the started_on the process registered with (``%(started_on)s``)."""
    return f"""{_insert(schema, "%(started_on)s::timestamptz")}{_BEAT}"""


def stop_instance(schema: str) -> str:
    """Mark the row stopped (a clean stop)."""
    return f"UPDATE {schema}.instance SET stopped_on = {schema}.job_now() WHERE id = %(id)s"


def _prune_dead(schema: str, where: str, keep: int) -> str:
    # Ranked before locking and locked with SKIP LOCKED, as pg-boss prunes, so a registration and
    # the monitor's pass pruning at once cannot deadlock, and neither deletes a row the other's
    # ranking kept.
    return f"""
    DELETE FROM {schema}.instance
    WHERE id IN (
      SELECT id FROM {schema}.instance
      WHERE id IN (
        SELECT id FROM (
          SELECT id, row_number() OVER (ORDER BY started_on DESC, id DESC) AS n
          FROM {schema}.instance
          WHERE {where} AND {_dead(schema)}
        ) ranked
        WHERE n > {int(keep)}
      )
      FOR UPDATE SKIP LOCKED
    )"""


def prune_instance_lives(schema: str) -> str:
    """Run after registering: keep the newest INSTANCE_DEAD_KEPT_PER_NAME dead rows of this
    process's name (of its host, when unnamed). ``%(id)s``, ``%(name)s``, ``%(host)s``."""
    return _prune_dead(
        schema,
        "id <> %(id)s AND (CASE WHEN %(name)s::text IS NULL THEN name IS NULL AND host = %(host)s "
        "ELSE name = %(name)s END)",
        INSTANCE_DEAD_KEPT_PER_NAME,
    )


def trim_dead_instances(schema: str) -> str:
    """The monitor's pass: keep the newest INSTANCE_DEAD_KEPT dead rows overall."""
    return _prune_dead(schema, "true", INSTANCE_DEAD_KEPT)


def delete_old_instances(schema: str) -> str:
    """The monitor's pass: delete the rows whose heartbeat has not moved for INSTANCE_RETENTION_DAYS
    (a live row never qualifies: its heartbeat keeps moving)."""
    return f"""
    DELETE FROM {schema}.instance
    WHERE heartbeat_on < {schema}.job_now() - interval '{int(INSTANCE_RETENTION_DAYS)} days'"""


# Crash restarts, pg-boss's way: how many lives in a row on this name and host ended without a clean
# stop before this one started, worked out from the rows. A row that still reads live at
# registration is a sibling or a predecessor that crashed seconds ago, and only its next missed
# beats tell which, so a crashed life counts only once it is dead and only if its last beat came
# before this process started. A row with this pid whose beat predates this process's start is an
# earlier process that reused the pid (a container restart, pid 1 each time), dead at once; one with
# this pid started since is another registrar of this same process, never a predecessor.
# Parameters: %(id)s, %(name)s, %(host)s, %(pid)s and %(process_started_on)s.
def _crash_slot(schema: str) -> str:
    return f"""
    me AS (SELECT id, started_on FROM {schema}.instance WHERE id = %(id)s),
    slot AS (
      SELECT i.*
      FROM {schema}.instance i, me
      WHERE i.id <> me.id
        AND i.host = %(host)s
        AND (i.name = %(name)s OR (i.name IS NULL AND %(name)s::text IS NULL))
        AND i.started_on < me.started_on
        AND i.heartbeat_on <= me.started_on
        AND NOT (i.pid = %(pid)s AND i.started_on >= %(process_started_on)s::timestamptz)
    ),
    boundary AS (SELECT max(started_on) AS at FROM slot WHERE stopped_on IS NOT NULL),
    streak AS (
      SELECT s.*
      FROM slot s, boundary b
      WHERE s.stopped_on IS NULL
        AND (b.at IS NULL OR s.started_on > b.at)
    )"""


def _crash_dead(schema: str) -> str:
    return f"({_quiet(schema)} OR (pid = %(pid)s AND heartbeat_on < %(process_started_on)s::timestamptz))"


def count_crash_restarts(schema: str) -> str:
    """Number the dead lives of the current streak from the earliest one still kept (whose count
    stands for any the pruning took) and write each later life's count and this process's.
    Rewriting the whole streak keeps the counts exact when a life crashed before its own recount."""
    return f"""
    WITH {_crash_slot(schema)},
    crashed AS (
      SELECT id, crash_restarts, crash_restarts_since, heartbeat_on,
        row_number() OVER (ORDER BY started_on, id) AS n,
        count(*) OVER () AS k
      FROM streak
      WHERE {_crash_dead(schema)}
    ),
    head AS (
      SELECT crash_restarts AS base, COALESCE(crash_restarts_since, heartbeat_on) AS since, k
      FROM crashed WHERE n = 1
    ),
    counts AS (
      SELECT c.id, h.base + c.n - 1 AS restarts, h.since
      FROM crashed c, head h
      WHERE c.n > 1
      UNION ALL
      SELECT me.id, COALESCE(h.base + h.k, 0), h.since
      FROM me LEFT JOIN head h ON true
    )
    UPDATE {schema}.instance i
    SET crash_restarts = counts.restarts::int,
      crash_restarts_since = counts.since
    FROM counts
    WHERE i.id = counts.id"""


def crash_recount_at(schema: str) -> str:
    """When the rows the count could not judge yet (still live) go quiet, or NULL when there are
    none: the registrar counts again then."""
    return f"""
    WITH {_crash_slot(schema)}
    SELECT max(heartbeat_on + heartbeat_seconds * {INSTANCE_QUIET_BEATS} * interval '1 second')
    FROM streak
    WHERE NOT {_crash_dead(schema)}"""


#: The columns get_instances() reads, in the Instance record's terms.
INSTANCE_READ_COLUMNS = (
    "id",
    "name",
    "host",
    "pid",
    "version",
    "node_version",
    "application_name",
    "heartbeat_seconds",
    "supervise",
    "schedule",
    "migrate",
    "persist_queue_stats",
    "persist_warnings",
    "pool_max",
    "pool_total",
    "pool_idle",
    "pool_waiting",
    "workers",
    "metrics",
    "config",
    "crash_restarts",
    "crash_restarts_since",
    "started_on",
    "heartbeat_on",
    "stopped_on",
)


def get_instances(schema: str, *, after: bool) -> str:
    """A page of the registry in pg-boss's order (started_on, id), ``%(limit)s`` rows, with
    ``live``; with ``after``, the rows past instance ``%(after)s``, whose started_on is read back
    from its row."""
    columns = ", ".join(INSTANCE_READ_COLUMNS)
    where = (
        f"WHERE (started_on, id) > ((SELECT started_on FROM {schema}.instance WHERE id = %(after)s::uuid), "
        "%(after)s::uuid)"
        if after
        else ""
    )
    return f"""
    SELECT {columns},
      stopped_on IS NULL
        AND heartbeat_on >= {schema}.job_now() - heartbeat_seconds * {INSTANCE_QUIET_BEATS} * interval '1 second'
        AS live
    FROM {schema}.instance
    {where}
    ORDER BY started_on, id
    LIMIT %(limit)s"""


def instance_exists(schema: str) -> str:
    """Whether instance ``%(id)s`` still has a row (an empty page after it: pruned, or the end)."""
    return f"SELECT 1 FROM {schema}.instance WHERE id = %(id)s::uuid"


def database_now(schema: str) -> str:
    """The schema's clock, which liveness is judged against."""
    return f"SELECT {schema}.job_now()"
