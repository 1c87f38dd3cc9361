"""SQL for reading a queue's stats history: its snapshots, bucketed or not, and its cached count.

What get_queue_stats() reads (pg-boss 12.38's getQueueStatsHistory, getQueueStatsHistoryBucketed
and getQueueStatsCache); the monitor that writes them is plans/stats.py.
"""

from __future__ import annotations

import functools

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
    "wait_bins",
    "run_bins",
    "ready_oldest_seconds",
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
    """A queue's history in time buckets, newest first (pg-boss 12.38's bucketing).

    Named parameters: name, start, end, limit, width (bucket seconds, or with ``auto`` the number of
    buckets wanted over the history's extent, which start and end can only narrow).

    Gauges are bucketed by captured_on and aggregated (``aggregate``); counters by delta_on, the end
    of the window they counted, and summed, so a rate is sum(delta) / sum(delta_seconds). A counter
    bucket without a capture of its own (passes further apart than a bucket) is folded into the
    newest gauge bucket before it, or the first one when none precedes it, so every bucket returned
    has gauges behind it. The newest bucket's counters are usually null: the pass that counts its
    interval has not run yet. Buckets are epoch-aligned (no date_bin, which PostgreSQL 13 lacks).

    A bucket's wait and run histograms are its passes' summed slot by slot in SQL, each pass in
    the bucket its counters were placed in, a slot no pass filled as 0; a bucket no pass measured
    (snapshots older than schema 46) has NULL histograms. ready_oldest_seconds is the bucket's
    largest.
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
        max(delta_on) AS delta_on, max(ready_oldest_seconds) AS ready_oldest_seconds
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
        c.created_delta, c.completed_delta, c.failed_delta, c.delta_seconds, c.delta_on,
        c.ready_oldest_seconds, c.bucket AS counter_bucket
      FROM gauges g FULL JOIN counters c ON c.bucket = g.bucket
    ),
    passes AS (
      SELECT {bucket("delta_on")} AS counter_bucket, wait_bins, run_bins
      FROM {schema}.queue_stats, w
      WHERE name = %(name)s AND delta_on IS NOT NULL AND wait_bins IS NOT NULL
        AND (%(start)s::timestamptz IS NULL OR delta_on >= %(start)s::timestamptz)
        AND (%(end)s::timestamptz IS NULL OR delta_on <= %(end)s::timestamptz)
    ),
    slots AS (
      SELECT p.bucket, u.slot, COALESCE(sum(u.w), 0)::int AS w, COALESCE(sum(u.r), 0)::int AS r
      FROM (SELECT DISTINCT bucket, counter_bucket FROM placed) p
        JOIN passes ps ON ps.counter_bucket = p.counter_bucket,
        unnest(ps.wait_bins, ps.run_bins) WITH ORDINALITY AS u(w, r, slot)
      GROUP BY 1, 2
    ),
    histograms AS (
      SELECT bucket, array_agg(w ORDER BY slot) AS wait_bins, array_agg(r ORDER BY slot) AS run_bins
      FROM slots GROUP BY 1
    ),
    folded AS (
      SELECT {", ".join(f"max({c})::int AS {c}" for c in _GAUGES)},
        sum(created_delta)::int AS created_delta, sum(completed_delta)::int AS completed_delta,
        sum(failed_delta)::int AS failed_delta, sum(delta_seconds)::int AS delta_seconds,
        max(delta_on) AS delta_on, max(ready_oldest_seconds)::int AS ready_oldest_seconds, bucket
      FROM placed
      WHERE bucket IS NOT NULL
      GROUP BY bucket
    )
    SELECT {", ".join(f"f.{c}" for c in _GAUGES)}, f.created_delta, f.completed_delta, f.failed_delta,
      f.delta_seconds, f.delta_on, h.wait_bins, h.run_bins, f.ready_oldest_seconds, f.bucket
    FROM folded f LEFT JOIN histograms h ON h.bucket = f.bucket
    ORDER BY f.bucket DESC
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
