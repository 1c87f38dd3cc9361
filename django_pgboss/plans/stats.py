"""SQL for the monitor: queue claims, gauges and the 12.35 throughput window, snapshots, true-up.

Throughput is counted per queue over a window: from the queue's delta_on (where the last counting
pass ended) to DELTA_LAG behind the pass. created_on and completed_on are stamped with job_now(),
the start of the writing transaction, so a job committed a few seconds after its stamp would be
missed by a window ending at the pass itself; ending the window 10 s back catches every
transaction shorter than that, and the true-up revises recent snapshots upward for the longer
ones. Only a counting pass moves delta_on, so a pass that skipped the aggregate leaves the window
open for the next. A window whose start is further back than the reset maximum starts afresh
(counts 0, delta_seconds NULL) instead of landing hours of jobs on one snapshot.

The lag and the true-up horizon are fixed, not settings: delta_on is shared by every monitor, and
two monitors measuring with different lags would count an interval twice or skip it.
"""

from __future__ import annotations

import functools

from django_pgboss.plans.fragments import expired, lock_id, stalled

#: How far behind the pass a counting window ends.
DELTA_LAG = "interval '10 seconds'"
#: A window starting further back than this starts afresh (see reset_max_seconds()).
DELTA_RESET_MAX_SECONDS = 2 * 60 * 60
#: How far back the true-up may revise snapshots.
DELTA_TRUE_UP_MAX = "interval '1 hour'"
#: How many readings ready_history keeps, newest first.
READY_HISTORY_SIZE = 60


def reset_max_seconds(pass_seconds: float) -> int:
    """The reset threshold for monitors that count every ``pass_seconds``: two hours, or two passes
    when passes are further apart than an hour, or every window would start afresh."""
    return max(DELTA_RESET_MAX_SECONDS, int(pass_seconds * 2))


def claim_due_queues(schema: str, column: str, *, fallback: str | None = None) -> str:
    """Claim the named queues whose ``column`` stamp is at least N seconds old, and stamp them.

    Parameters: names, seconds. The rows are locked in name order (FOR NO KEY UPDATE, so job
    inserts holding a key-share lock through the foreign key are not blocked) and SKIP LOCKED: two
    monitors claiming overlapping sets take disjoint parts instead of deadlocking or waiting. A
    queue never claimed is due at once. Returns the claimed names and whether the stats aggregate
    may run (no vacuum backoff in force).
    """
    if column not in {"monitor_claim_on", "maintain_on"}:
        raise ValueError(f"{column!r} is not a queue claim column")
    since = f"COALESCE({column}, {fallback + ', ' if fallback else ''}{schema}.job_now() - interval '1 week')"
    return f"""
    WITH due AS (
      SELECT name FROM {schema}.queue
      WHERE name = ANY(%(names)s::text[])
        AND extract(epoch FROM ({schema}.job_now() - {since})) >= %(seconds)s
      ORDER BY name
      FOR NO KEY UPDATE SKIP LOCKED
    )
    UPDATE {schema}.queue SET {column} = {schema}.job_now()
    FROM due
    WHERE queue.name = due.name
    RETURNING queue.name,
      NOT EXISTS (SELECT 1 FROM {schema}.version WHERE monitor_backoff_on > {schema}.job_now())
    """


def _window(schema: str, alias: str) -> tuple[str, str]:
    """The counting window's end and start, over queue alias ``alias``; %(reset_max)s seconds."""
    end = f"({schema}.job_now() - {DELTA_LAG})"
    start = f"(CASE WHEN {alias}.delta_on > {end} - %(reset_max)s * interval '1 second' THEN {alias}.delta_on END)"
    return end, start


def _retention_floor(schema: str, queue: str) -> str:
    # Rows older than the queue's shorter retention may be deleted already: a recount reaching
    # there would fall short and hide late commits, so the true-up never looks that far back.
    return (
        f"s.delta_on >= {schema}.job_now() - (CASE WHEN {queue}.deletion_seconds > 0 "
        f"AND {queue}.deletion_seconds < {queue}.retention_seconds THEN {queue}.deletion_seconds "
        f"ELSE {queue}.retention_seconds END) * interval '1s'"
    )


def _true_up_anchor(schema: str) -> str:
    # A snapshot old enough to be final, or one that started a window afresh (it counted nothing
    # before its end on purpose), anchors the windows the true-up may revise.
    return f"s.delta_on <= {schema}.job_now() - {DELTA_TRUE_UP_MAX} OR s.delta_seconds IS NULL"


def _true_up_reach(schema: str) -> str:
    return f"s.captured_on >= {schema}.job_now() - 2 * {DELTA_TRUE_UP_MAX} AND s.delta_on IS NOT NULL"


@functools.lru_cache(maxsize=64)
def jit_off() -> str:
    """Turn JIT compilation off for the rest of the transaction (no parameters).

    The count reads every row of its queues, so its cost passes jit_above_cost once a job table
    holds a few hundred thousand rows, and PostgreSQL then compiles it afresh on every pass: 140 ms
    of a 1.9 s count at 900,000 rows on a quiet machine (bench/README.md), for an aggregate whose
    expressions are a few comparisons per row, which compiled code barely speeds up.
    """
    return "SET LOCAL jit = off"


def cache_queue_stats(schema: str, table: str, *, throughput: bool, history: bool = True) -> str:
    """Count a table's named queues and write the gauges (and, with throughput, the window) to them.

    Named parameters: names, lock_key (the try-lock), reset_max (seconds). One statement: the
    aggregate scans the jobs once, then the queue rows are locked in name order and updated. The
    try-lock keeps two monitors from scanning at once; the loser gets no rows and writes nothing.
    The `count(*) FROM stats` in the lock subquery makes the scan finish before any queue row is
    locked, so no row stays locked through it.

    With throughput, each row also says whether the recent snapshots fall short of a recount of
    the jobs (a transaction committed after the pass that counted its window): then the caller
    runs the true-up for that queue. Returned per queue: name, queued count, warning threshold,
    true-up flag, how long this transaction has pinned its snapshot (for the vacuum backoff), and
    whether the count found a job past its expiry and one past its heartbeat: the monitor runs each
    sweep only for the queues that have one, since a sweep reads every row of the queues it names
    (no index of schema 43 holds only active jobs), and the count has just read them anyway.

    Without ``history`` the ready count is not pushed onto ready_history: a count that a reader
    asked for (get_queue_stats(force=True)) is not a point of the monitor's sparkline.
    """
    end, start = _window(schema, "q")
    counters = ""
    true_up_join = ""
    true_up_columns = ""
    if throughput:
        counters = f"""
            count(*) FILTER (WHERE j.created_on >= {start} AND j.created_on < {end})::int AS created_delta,
            count(*) FILTER (WHERE j.state = 'completed' AND j.completed_on >= {start}
              AND j.completed_on < {end})::int AS completed_delta,
            count(*) FILTER (WHERE j.state = 'failed' AND j.completed_on >= {start}
              AND j.completed_on < {end})::int AS failed_delta,
            sum(
              CASE WHEN j.created_on >= q.h AND j.created_on < q.top THEN 1 ELSE 0 END
              + CASE WHEN j.completed_on >= q.h AND j.completed_on < q.top
                  AND j.state IN ('completed', 'failed') THEN 1 ELSE 0 END
            )::int AS recount,
            max(q.settled) AS settled,"""
        true_up_join = f"""
          JOIN (
            SELECT q.name, q.delta_on, a.h, t.top, t.settled
            FROM {schema}.queue q
            LEFT JOIN LATERAL (
              SELECT CASE WHEN x.f IS NULL OR x.f > x.b THEN x.f ELSE x.b END AS h
              FROM (
                SELECT
                  COALESCE(max(s.delta_on) FILTER (WHERE {_true_up_anchor(schema)}), min(s.delta_on)) AS b,
                  min(s.delta_on) FILTER (WHERE {_retention_floor(schema, "q")}) AS f
                FROM {schema}.queue_stats s
                WHERE s.name = q.name AND {_true_up_reach(schema)}
              ) x
            ) a ON true
            LEFT JOIN LATERAL (
              SELECT max(s.delta_on) AS top,
                sum(s.created_delta + s.completed_delta + s.failed_delta) AS settled
              FROM {schema}.queue_stats s
              WHERE s.name = q.name AND {_true_up_reach(schema)} AND s.delta_on > a.h
            ) t ON true
            WHERE q.name = ANY(%(names)s::text[])
          ) q ON q.name = j.name"""
        true_up_columns = (
            ", created_delta, completed_delta, failed_delta, COALESCE(recount > settled, false) AS true_up"
        )
    queue_end, queue_start = _window(schema, "queue")
    seconds = f"round(extract(epoch FROM ({queue_end} - {queue_start})))::int"
    assignments = (
        f"""
      created_delta = COALESCE(stats.created_delta, 0),
      completed_delta = COALESCE(stats.completed_delta, 0),
      failed_delta = COALESCE(stats.failed_delta, 0),
      delta_seconds = CASE WHEN {seconds} < 0 THEN 0 ELSE {seconds} END,
      delta_on = GREATEST(queue.delta_on, {queue_end}),"""
        if throughput
        else ""
    )
    # The monitor's passes push each ready count onto the queue's sparkline; a read does not.
    ready_history = (
        f""",
      ready_history = (
        SELECT COALESCE(array_agg(v ORDER BY ord), '{{}}'::int[])
        FROM (
          SELECT v, ord FROM (
            SELECT COALESCE(stats.ready_count, 0)::int AS v, 0::bigint AS ord
            UNION ALL
            SELECT h.v, h.ord FROM unnest(COALESCE(queue.ready_history, '{{}}'::int[])) WITH ORDINALITY AS h(v, ord)
          ) merged
          ORDER BY ord
          LIMIT {READY_HISTORY_SIZE}
        ) newest
      )"""
        if history
        else ""
    )
    true_up_out = "COALESCE(stats.true_up, false)" if throughput else "false"
    return f"""
    WITH lock AS MATERIALIZED (
      SELECT pg_try_advisory_xact_lock(
        {lock_id("%(lock_key)s")}) AS got
    ),
    stats AS (
      SELECT name, deferred_count, queued_count, GREATEST(queued_count - deferred_count, 0) AS ready_count,
        active_count, failed_count, total_count, singletons_active, expired_count, stalled_count{true_up_columns}
      FROM (
        SELECT j.name,
          count(*) FILTER (WHERE j.start_after > {schema}.job_now() AND j.state < 'active')::int AS deferred_count,
          count(*) FILTER (WHERE j.state < 'active')::int AS queued_count,
          count(*) FILTER (WHERE j.state = 'active')::int AS active_count,
          count(*) FILTER (WHERE {expired(schema, "j.")})::int AS expired_count,
          count(*) FILTER (WHERE {stalled(schema, "j.")})::int AS stalled_count,
          count(*) FILTER (WHERE j.state = 'failed')::int AS failed_count,
          count(*)::int AS total_count,{counters}
          array_agg(j.singleton_key) FILTER (
            WHERE j.policy IN ('singleton', 'stately') AND j.state = 'active') AS singletons_active
        FROM {schema}.{table} j{true_up_join}
        WHERE j.name = ANY(%(names)s::text[]) AND (SELECT got FROM lock)
        GROUP BY 1
      ) counted
    )
    UPDATE {schema}.queue SET
      deferred_count = COALESCE(stats.deferred_count, 0),
      queued_count = COALESCE(stats.queued_count, 0),
      ready_count = COALESCE(stats.ready_count, 0),
      active_count = COALESCE(stats.active_count, 0),
      failed_count = COALESCE(stats.failed_count, 0),
      total_count = COALESCE(stats.total_count, 0),{assignments}
      singletons_active = stats.singletons_active,
      monitor_on = {schema}.job_now(){ready_history}
    FROM (
      SELECT name FROM {schema}.queue
      WHERE name = ANY(%(names)s::text[]) AND (SELECT got FROM lock) AND (SELECT count(*) FROM stats) >= 0
      ORDER BY name
      FOR NO KEY UPDATE
    ) q
    LEFT JOIN stats ON stats.name = q.name
    WHERE queue.name = q.name AND (SELECT got FROM lock)
    RETURNING queue.name, queue.queued_count, queue.warning_queued, {true_up_out},
      extract(epoch FROM (clock_timestamp() - transaction_timestamp()))::float8,
      COALESCE(stats.expired_count, 0) > 0, COALESCE(stats.stalled_count, 0) > 0
    """


def insert_queue_stats(schema: str) -> str:
    """Snapshot the named queues' rows into queue_stats. Parameter: names."""
    return f"""
    INSERT INTO {schema}.queue_stats (
      name, deferred_count, queued_count, ready_count, active_count, failed_count, total_count,
      created_delta, completed_delta, failed_delta, delta_seconds, delta_on, captured_on
    )
    SELECT name, deferred_count, queued_count, ready_count, active_count, failed_count, total_count,
      created_delta, completed_delta, failed_delta, delta_seconds, delta_on, {schema}.job_now()
    FROM {schema}.queue
    WHERE name = ANY(%(names)s::text[])
    """


@functools.lru_cache(maxsize=64)
def true_up_queue_stats(schema: str, table: str) -> str:
    """Raise recent snapshots' counters to a recount of the jobs in their windows (never lower).

    Named parameters: names, lock_key. A snapshot's window is rebuilt from the snapshots' delta_on
    values: each runs from the previous one's delta_on to its own, so the windows tile exactly. Every
    job is placed in its window by width_bucket over those ends (a binary search, not a join against
    each window), counted per window, and a snapshot is raised where the recount is higher. Retention
    and delete_job() remove rows a window already counted, so a lower recount is never written back.
    Returns one row (snapshots raised, seconds pinned) when it scanned, none when another monitor held
    the try-lock.
    """
    return f"""
    WITH lock AS MATERIALIZED (
      SELECT pg_try_advisory_xact_lock(
        {lock_id("%(lock_key)s")}) AS got
    ),
    windows AS (
      SELECT w.*, row_number() OVER (PARTITION BY w.name ORDER BY w.delta_on, w.captured_on) AS i
      FROM (
        SELECT x.id, x.captured_on, x.name, x.delta_on,
          CASE WHEN x.f IS NULL OR x.f > x.b THEN x.f ELSE x.b END AS h
        FROM (
          SELECT s.id, s.captured_on, s.name, s.delta_on,
            COALESCE(
              max(CASE WHEN {_true_up_anchor(schema)} THEN s.delta_on END) OVER (PARTITION BY s.name),
              min(s.delta_on) OVER (PARTITION BY s.name)
            ) AS b,
            min(CASE WHEN {_retention_floor(schema, "q")} THEN s.delta_on END) OVER (PARTITION BY s.name) AS f
          FROM {schema}.queue_stats s
          JOIN {schema}.queue q ON q.name = s.name
          WHERE s.name = ANY(%(names)s::text[]) AND {_true_up_reach(schema)}
        ) x
      ) w
      WHERE w.delta_on > w.h AND (SELECT got FROM lock)
    ),
    thresholds AS (
      SELECT name, h, array_prepend(h, array_agg(delta_on ORDER BY i)) AS t
      FROM windows GROUP BY name, h
    ),
    binned AS (
      SELECT j.name, j.state,
        CASE WHEN j.created_on >= th.h THEN width_bucket(j.created_on, th.t) END AS created_in,
        CASE WHEN j.state IN ('completed', 'failed') AND j.completed_on >= th.h
          THEN width_bucket(j.completed_on, th.t) END AS finished_in
      FROM {schema}.{table} j
      JOIN thresholds th ON th.name = j.name
      WHERE j.name = ANY(%(names)s::text[])
    ),
    counted AS (
      SELECT name, created_in AS i, count(*)::int AS created, 0 AS completed, 0 AS failed
      FROM binned WHERE created_in IS NOT NULL GROUP BY 1, 2
      UNION ALL
      SELECT name, finished_in, 0,
        count(*) FILTER (WHERE state = 'completed')::int,
        count(*) FILTER (WHERE state = 'failed')::int
      FROM binned WHERE finished_in IS NOT NULL GROUP BY 1, 2
    ),
    recount AS (
      SELECT w.id, w.captured_on, sum(c.created)::int AS created, sum(c.completed)::int AS completed,
        sum(c.failed)::int AS failed
      FROM windows w JOIN counted c ON c.name = w.name AND c.i = w.i
      GROUP BY w.id, w.captured_on
    ),
    raised AS (
      UPDATE {schema}.queue_stats s SET
        created_delta = GREATEST(s.created_delta, r.created),
        completed_delta = GREATEST(s.completed_delta, r.completed),
        failed_delta = GREATEST(s.failed_delta, r.failed)
      FROM recount r
      WHERE s.id = r.id AND s.captured_on = r.captured_on AND (SELECT got FROM lock)
        AND (r.created > s.created_delta OR r.completed > s.completed_delta OR r.failed > s.failed_delta)
      RETURNING s.id
    )
    SELECT (SELECT count(*) FROM raised)::int,
      extract(epoch FROM (clock_timestamp() - transaction_timestamp()))::float8
    WHERE (SELECT got FROM lock)
    """


#: How a bucket's gauges are aggregated; whitelisted, since the name becomes SQL text.
GAUGE_AGGREGATES = {"max": "max({})::int", "min": "min({})::int", "avg": "round(avg({}))::int"}
_GAUGES = ("deferred_count", "queued_count", "ready_count", "active_count", "failed_count", "total_count")
#: The columns a history read returns, in records.StatsPoint's field order.
STATS_COLUMNS = (
    *_GAUGES,
    "created_delta",
    "completed_delta",
    "failed_delta",
    "delta_seconds",
    "delta_on",
    "captured_on",
)


def queue_stats_history(schema: str) -> str:
    """A queue's snapshots, newest first. Named parameters: name, start, end, limit."""
    return f"""
    SELECT {", ".join(STATS_COLUMNS)}
    FROM {schema}.queue_stats
    WHERE name = %(name)s
      AND (%(start)s::timestamptz IS NULL OR captured_on >= %(start)s::timestamptz)
      AND (%(end)s::timestamptz IS NULL OR captured_on <= %(end)s::timestamptz)
    ORDER BY captured_on DESC
    LIMIT %(limit)s
    """


@functools.lru_cache(maxsize=16)
def queue_stats_buckets(schema: str, aggregate: str, *, auto: bool) -> str:
    """A queue's history in time buckets, newest first (pg-boss 12.35's bucketing).

    Named parameters: name, start, end, limit, width (bucket seconds, or with ``auto`` the number of
    buckets wanted over the history's extent, which start and end can only narrow).

    Gauges are bucketed by captured_on and aggregated (``aggregate``); counters by delta_on, the end
    of the window they counted, and summed, so a rate is sum(delta) / sum(delta_seconds). A counter
    bucket without a capture of its own (passes further apart than a bucket) is folded into the
    newest gauge bucket before it, or the first one when none precedes it, so every bucket returned
    has gauges behind it. The newest bucket's counters are usually null: the pass that counts its
    interval has not run yet. Buckets are epoch-aligned (no date_bin, which PostgreSQL 13 lacks).
    """
    gauge = GAUGE_AGGREGATES[aggregate]
    if auto:
        width = f"""
    extent AS (SELECT min(captured_on) AS lo, max(captured_on) AS hi FROM {schema}.queue_stats WHERE name = %(name)s),
    bounds AS (
      SELECT greatest(coalesce(%(start)s::timestamptz, lo), lo) AS lo, least(coalesce(%(end)s::timestamptz, hi), hi) AS hi
      FROM extent
    ),
    w AS (
      SELECT greatest(1, ceil(extract(epoch FROM (hi - lo))::float8 / greatest(%(width)s, 1)::float8)::bigint)::bigint AS secs
      FROM bounds
    ),"""
        # Epoch alignment can straddle one extra bucket; the oldest is dropped.
        limit = "least(%(limit)s, %(width)s)"
    else:
        width = "\n    w AS (SELECT greatest(%(width)s, 1)::bigint AS secs),"
        limit = "%(limit)s"

    def bucket(column: str) -> str:
        return f"to_timestamp(floor(extract(epoch FROM {column})::float8 / w.secs::float8) * w.secs::float8)"

    gauges = ",\n        ".join(f"{gauge.format(c)} AS {c}" for c in _GAUGES)
    return f"""
    WITH{width}
    gauges AS (
      SELECT {bucket("captured_on")} AS bucket,
        {gauges}
      FROM {schema}.queue_stats, w
      WHERE name = %(name)s
        AND (%(start)s::timestamptz IS NULL OR captured_on >= %(start)s::timestamptz)
        AND (%(end)s::timestamptz IS NULL OR captured_on <= %(end)s::timestamptz)
      GROUP BY 1
    ),
    counters AS (
      SELECT {bucket("delta_on")} AS bucket,
        sum(created_delta)::int AS created_delta, sum(completed_delta)::int AS completed_delta,
        sum(failed_delta)::int AS failed_delta, sum(delta_seconds)::int AS delta_seconds,
        max(delta_on) AS delta_on
      FROM {schema}.queue_stats, w
      WHERE name = %(name)s AND delta_on IS NOT NULL
        AND (%(start)s::timestamptz IS NULL OR delta_on >= %(start)s::timestamptz)
        AND (%(end)s::timestamptz IS NULL OR delta_on <= %(end)s::timestamptz)
      GROUP BY 1
    ),
    placed AS (
      SELECT
        COALESCE(
          max(g.bucket) OVER (ORDER BY COALESCE(g.bucket, c.bucket) ROWS UNBOUNDED PRECEDING),
          min(g.bucket) OVER ()
        ) AS bucket,
        {", ".join(f"g.{c}" for c in _GAUGES)},
        c.created_delta, c.completed_delta, c.failed_delta, c.delta_seconds, c.delta_on
      FROM gauges g FULL JOIN counters c ON c.bucket = g.bucket
    )
    SELECT {", ".join(f"max({c})::int" for c in _GAUGES)},
      sum(created_delta)::int, sum(completed_delta)::int, sum(failed_delta)::int, sum(delta_seconds)::int,
      max(delta_on), bucket
    FROM placed
    WHERE bucket IS NOT NULL
    GROUP BY bucket
    ORDER BY bucket DESC
    LIMIT {limit}
    """


def queue_stats_cache(schema: str) -> str:
    """A queue's cached gauges, when they were counted, their age in seconds (NULL if never) and
    whether the monitor's vacuum backoff holds aggregates off now. Named parameter: name."""
    return f"""
    SELECT deferred_count, queued_count, ready_count, active_count, failed_count, total_count,
      monitor_on, extract(epoch FROM ({schema}.job_now() - monitor_on))::float8,
      COALESCE((SELECT monitor_backoff_on > {schema}.job_now() FROM {schema}.version), false)
    FROM {schema}.queue
    WHERE name = %(name)s
    """
