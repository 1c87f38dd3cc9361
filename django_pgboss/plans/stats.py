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

from django_pgboss.plans import latency as latency_plans
from django_pgboss.plans.fragments import RETAINED_STATES, expired, lock_id, stalled

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


def claim_due_queues(
    schema: str, column: str, *, fallback: str | None = None, skip_locked: bool = True
) -> str:
    """Claim the named queues whose ``column`` stamp is at least N seconds old, and stamp them.

    Parameters: names, seconds. The rows are locked in name order (FOR NO KEY UPDATE, so job
    inserts holding a key-share lock through the foreign key are not blocked) and, with
    ``skip_locked``, SKIP LOCKED: two monitors claiming overlapping sets take disjoint parts instead
    of waiting. Without it (pg-boss's profiles other than postgres, see
    ``constants.queue_claims_skip_locked()``) the second waits, and the name order alone keeps the
    two free of deadlocks. A queue never claimed is due at once. Returns the claimed names, whether
    the stats aggregate may run (no vacuum backoff in force), and the stamp the claim wrote (what
    hands it back).
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
      FOR NO KEY UPDATE{" SKIP LOCKED" if skip_locked else ""}
    )
    UPDATE {schema}.queue SET {column} = {schema}.job_now()
    FROM due
    WHERE queue.name = due.name
    RETURNING queue.name,
      NOT EXISTS (SELECT 1 FROM {schema}.version WHERE monitor_backoff_on > {schema}.job_now()),
      queue.{column}
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


def window_inputs(schema: str, *, split: bool = False) -> str:
    """Each named queue's counting window and true-up reach, from queue and queue_stats: name, h
    (where the true-up recount starts), top and settled (the last snapshot's end and what the
    snapshots since h hold), w_start and w_end (the window). Named parameters: names, reset_max.

    With ``split`` (the citus-distributed backend's first read, see count_one_queue()), also the
    queue's retained_on and the clock, the values the job-only aggregate then takes bound.
    """
    end, _start = _window(schema, "q")
    extra = f", q.retained_on, {schema}.job_now() AS now" if split else ""
    return f"""SELECT q.name, a.h, t.top, t.settled, {_start} AS w_start, {end} AS w_end{extra}
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
"""


#: The states job_i14 holds, the jobs the gauges count. Repeated verbatim, so the planner matches
#: the partial index to the aggregate's predicate and counts from the index alone.
LIVE_STATES = "state IN ('created', 'retry', 'active', 'failed')"
#: The live jobs as the last monitor pass counted them, which total_count adds retained_count to.
CACHED_LIVE_COUNT = "queued_count + active_count + failed_count"


def _aggregate(schema: str, table: str, *, throughput: bool, split: bool = False) -> str:
    """Every count the monitor keeps for the named queues (pg-boss 12.38's getQueueStats), one row
    per queue named, with zero gauges for a queue without live jobs. Named parameters: names,
    reset_max (with throughput).

    With ``split`` (the citus-distributed backend, see count_one_queue()), the same counts of one
    queue from the job table alone: the queue's name, its window and watermarks, and the clock are
    bound values (name, now, retained_on, w_start, w_end, h, top, settled) instead of reads of
    queue and queue_stats, so Citus sends the whole statement to the one shard holding the queue.

    Each count reads only the jobs it counts, through an index of schema 46 that holds only them:
    the gauges (and the expiry and heartbeat tests) the live jobs in job_i14, whose predicate
    LIVE_STATES repeats; the jobs completed or cancelled since the queue's retained_on, and the
    throughput counters, through job_i16 (finished) and job_i15 (created); the oldest ready job
    through job_i11. So a pass costs what a queue has in flight and what moved through it, not
    every job it retains. Until bam has built an index (an upgraded schema), the planner reads the
    queue without it, as the count did before schema 46: the statement is the same either way.

    A queued job is exactly one of blocked (waiting on a flow parent), deferred (start_after still
    ahead) or ready, so the three add up to queued_count; blocked wins over deferred, since a job
    whose parent has not finished cannot run when its start_after comes round.

    retained_since is the completed and cancelled jobs that finished after the queue's
    retained_on and by the window's end, which the caller adds to retained_count only if
    retained_on is still retained_from, the watermark they were counted from; retained_recent the
    ones that finished after that end, which total_count takes in now and the next pass counts
    again (see _retained_assignments()).
    """
    queued = "j.state < 'active'"
    blocked = f"{queued} AND j.blocked"
    deferred = f"{queued} AND NOT j.blocked AND j.start_after > {schema}.job_now()"
    ready = f"{queued} AND NOT j.blocked AND j.start_after <= {schema}.job_now()"
    finished = "j.state IN ('completed', 'failed')"
    end, _start = _window(schema, "q")
    # Where the per-queue values come from: reads of queue and queue_stats in the one statement,
    # bound values in the split form.
    if split:
        w = {k: f"%({k})s::timestamptz" for k in ("w_start", "w_end", "h", "top", "retained_on")}
        w["name"] = "%(name)s::text"
        names = "(SELECT %(name)s::text AS name) n"
        named = "j.name = %(name)s::text"
        inputs = "(SELECT %(name)s::text AS name, %(settled)s::bigint AS settled) q"
        retained_from = f"{w['retained_on']} AS retained_from"
    else:
        w = {k: f"q.{k}" for k in ("name", "w_start", "w_end", "h", "top")}
        w["retained_on"] = "qr.retained_on"
        w["name_retained"] = "qr.name"
        names = "unnest(%(names)s::text[]) AS n(name)"
        named = "j.name = ANY(%(names)s::text[])"
        inputs = f"({window_inputs(schema)}) q"
        retained_from = "qr.retained_on AS retained_from"
    retained_name = w.get("name_retained", w["name"])
    select = join = ""
    if throughput:
        select = f"""
        stats.created_delta,
        stats.completed_delta,
        stats.failed_delta,
        {latency_plans.histogram("wait")} AS wait_bins,
        {latency_plans.histogram("run")} AS run_bins,
        stats.ready_oldest_seconds,
        COALESCE(stats.recount > stats.settled, false) AS true_up,"""
        # The true-up check: the same jobs recounted across the windows already recorded. More
        # than the snapshots hold means something committed after its window was counted, and
        # the monitor follows up with true_up_queue_stats() for the queue.
        join = f"""
      LEFT JOIN (
        SELECT q.name, created.created_delta, done.completed_delta, done.failed_delta,
          done.latency_slots, oldest.ready_oldest_seconds,
          recreated.n + refinished.n AS recount, q.settled
        FROM {inputs}
        LEFT JOIN LATERAL (
          SELECT count(*)::int AS created_delta
          FROM {schema}.{table} j
          WHERE j.name = {w["name"]} AND j.created_on >= {w["w_start"]} AND j.created_on < {w["w_end"]}
        ) created ON true
        LEFT JOIN LATERAL (
          SELECT
            count(*) FILTER (WHERE j.state = 'completed')::int AS completed_delta,
            count(*) FILTER (WHERE j.state = 'failed')::int AS failed_delta,
            {latency_plans.packed_slots()} AS latency_slots
          FROM {schema}.{table} j
          WHERE j.name = {w["name"]} AND j.completed_on >= {w["w_start"]} AND j.completed_on < {w["w_end"]}
        ) done ON true
        LEFT JOIN LATERAL (
          SELECT round(extract(epoch FROM ({schema}.job_now()
            - min(GREATEST(j.created_on, j.start_after)))))::int AS ready_oldest_seconds
          FROM {schema}.{table} j
          WHERE j.name = {w["name"]} AND {ready}
        ) oldest ON true
        LEFT JOIN LATERAL (
          SELECT count(*)::int AS n
          FROM {schema}.{table} j
          WHERE j.name = {w["name"]} AND j.created_on >= {w["h"]} AND j.created_on < {w["top"]}
        ) recreated ON true
        LEFT JOIN LATERAL (
          SELECT count(*)::int AS n
          FROM {schema}.{table} j
          WHERE j.name = {w["name"]} AND j.completed_on >= {w["h"]} AND j.completed_on < {w["top"]} AND {finished}
        ) refinished ON true
      ) stats ON stats.name = n.name
      {latency_plans.packed_counts("stats.latency_slots")}"""
    sql = f"""
    SELECT n.name,
        COALESCE(live.deferred_count, 0) AS deferred_count,
        COALESCE(live.blocked_count, 0) AS blocked_count,
        COALESCE(live.ready_count, 0) AS ready_count,
        COALESCE(live.queued_count, 0) AS queued_count,
        COALESCE(live.active_count, 0) AS active_count,
        COALESCE(live.failed_count, 0) AS failed_count,
        COALESCE(live.live_count, 0) AS live_count,
        COALESCE(live.expired_count, 0) AS expired_count,
        COALESCE(live.stalled_count, 0) AS stalled_count,
        since.retained_since, since.retained_recent, since.retained_from,{select}
        singletons.singletons_active
      FROM {names}
      LEFT JOIN (
        SELECT j.name,
          count(*) FILTER (WHERE {deferred})::int AS deferred_count,
          count(*) FILTER (WHERE {blocked})::int AS blocked_count,
          count(*) FILTER (WHERE {ready})::int AS ready_count,
          count(*) FILTER (WHERE {queued})::int AS queued_count,
          count(*) FILTER (WHERE j.state = 'active')::int AS active_count,
          count(*) FILTER (WHERE j.state = 'failed')::int AS failed_count,
          count(*) FILTER (WHERE {expired(schema, "j.")})::int AS expired_count,
          count(*) FILTER (WHERE {stalled(schema, "j.")})::int AS stalled_count,
          count(*)::int AS live_count
        FROM {schema}.{table} j
        WHERE {named} AND j.{LIVE_STATES}
        GROUP BY 1
      ) live ON live.name = n.name
      LEFT JOIN LATERAL (
        SELECT {retained_from},
          (SELECT count(*)::int FROM {schema}.{table} j
            WHERE j.name = {retained_name} AND j.completed_on > {w["retained_on"]} AND j.completed_on <= {end}
              AND j.{RETAINED_STATES}) AS retained_since,
          (SELECT count(*)::int FROM {schema}.{table} j
            WHERE j.name = {retained_name} AND j.completed_on > GREATEST({w["retained_on"]}, {end})
              AND j.completed_on <= {schema}.job_now() AND j.{RETAINED_STATES}) AS retained_recent
        {"" if split else f"FROM {schema}.queue qr WHERE qr.name = n.name"}
      ) since ON true
      LEFT JOIN (
        SELECT j.name, array_agg(j.singleton_key) AS singletons_active
        FROM {schema}.{table} j
        WHERE {named} AND j.state = 'active' AND j.policy IN ('singleton', 'stately')
        GROUP BY 1
      ) singletons ON singletons.name = n.name{join}
    """
    # The split form reads the clock the coordinator read for the whole count: on a worker
    # job_now() is that node's own transaction's time, not the count's.
    return sql.replace(f"{schema}.job_now()", "%(now)s::timestamptz") if split else sql


def _retained_assignments(schema: str, *, split: bool = False) -> str:
    """The SET clause for retained_count, retained_on and total_count (pg-boss 12.38's).

    retained_count takes in the finished jobs only up to the window's end, DELTA_LAG behind the
    pass, and retained_on moves up to it: a completion stamped before a pass but committed after
    it is still ahead of retained_on, so a later pass counts it. total_count also takes in the
    ones that finished since that end (retained_recent), which the next pass counts again rather
    than keeps. They are added only if retained_on is still the watermark they were counted from:
    a maintenance pass or a forced count that moved it meanwhile has counted them already and set
    total_count with them. A queue no maintenance pass has counted yet (retained_count NULL, an
    upgraded schema) keeps the larger of its live jobs and its total_count as it was: a full count
    on a queue older than the columns, zero on a new one.
    """
    end = "stats.w_end" if split else f"({schema}.job_now() - {DELTA_LAG})"
    counted = "queue.retained_on IS NOT DISTINCT FROM stats.retained_from"
    live = "COALESCE(stats.live_count, 0)"
    retained = (
        f"CASE WHEN {counted} THEN queue.retained_count + COALESCE(stats.retained_since, 0) "
        "ELSE queue.retained_count END"
    )
    return f"""
      retained_count = {retained},
      retained_on = CASE WHEN {counted} AND queue.retained_on IS NOT NULL
        THEN GREATEST(queue.retained_on, {end}) ELSE queue.retained_on END,
      total_count = CASE
        WHEN queue.retained_count IS NULL THEN GREATEST(queue.total_count, {live})
        WHEN {counted} THEN {live} + {retained} + COALESCE(stats.retained_recent, 0)
        ELSE queue.total_count
      END,"""


def cache_queue_stats(schema: str, table: str, *, throughput: bool, history: bool = True) -> str:
    """Count a table's named queues and write the gauges (and, with throughput, the window) to them.

    Named parameters: names, lock_key (the try-lock), reset_max (seconds). One statement: the
    aggregate (_aggregate()) counts, then the queue rows are locked in name order and updated. The
    try-lock keeps two monitors from counting at once; the loser gets no rows and writes nothing.
    The `count(*) FROM stats` in the lock subquery makes the count finish before any queue row is
    locked, so no row stays locked through it.

    With throughput, each row also says whether the recent snapshots fall short of a recount of
    the jobs (a transaction committed after the pass that counted its window): then the caller
    runs the true-up for that queue; and the pass writes the window's wait and run histograms
    and the oldest ready job's age (every slot NULL when nothing finished, 0 when nothing waits).
    Returned per queue: name, queued count, warning threshold, true-up flag, how long this
    transaction has pinned its snapshot (for the vacuum backoff), and whether the count found a
    job past its expiry and one past its heartbeat: the monitor runs each sweep only for the
    queues that have one.

    Without ``history`` the ready count is not pushed onto ready_history: a count that a reader
    asked for (get_queue_stats(force=True)) is not a point of the monitor's sparkline.
    """
    return f"""
    WITH lock AS MATERIALIZED (
      SELECT pg_try_advisory_xact_lock(
        {lock_id("%(lock_key)s")}) AS got
    ),
    stats AS (
      SELECT * FROM ({_aggregate(schema, table, throughput=throughput)}) counted
      WHERE (SELECT got FROM lock)
    )
    UPDATE {schema}.queue SET{_assignments(schema, throughput=throughput, history=history)}
    FROM (
      SELECT name FROM {schema}.queue
      WHERE name = ANY(%(names)s::text[]) AND (SELECT got FROM lock) AND (SELECT count(*) FROM stats) >= 0
      ORDER BY name
      FOR NO KEY UPDATE
    ) q
    LEFT JOIN stats ON stats.name = q.name
    WHERE queue.name = q.name AND (SELECT got FROM lock)
    RETURNING {_counted_returning(throughput=throughput)}
    """


def _assignments(schema: str, *, throughput: bool, history: bool, split: bool = False) -> str:
    """The SET clause of a count's queue update, from the counts ``stats``. With ``split`` the
    window's ends and the clock are the ones the count read on the coordinator (stats.w_start,
    stats.w_end, %(now)s): Citus refuses job_now() beside a column reference in an UPDATE."""
    throughput_set = ""
    if throughput:
        queue_end, queue_start = ("stats.w_end", "stats.w_start") if split else _window(schema, "queue")
        seconds = f"round(extract(epoch FROM ({queue_end} - {queue_start})))::int"
        empty = latency_plans.EMPTY_BINS
        throughput_set = f"""
      created_delta = COALESCE(stats.created_delta, 0),
      completed_delta = COALESCE(stats.completed_delta, 0),
      failed_delta = COALESCE(stats.failed_delta, 0),
      delta_seconds = CASE WHEN {seconds} < 0 THEN 0 ELSE {seconds} END,
      delta_on = GREATEST(queue.delta_on, {queue_end}),
      wait_bins = COALESCE(stats.wait_bins, {empty}),
      run_bins = COALESCE(stats.run_bins, {empty}),
      ready_oldest_seconds = COALESCE(stats.ready_oldest_seconds, 0),"""
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
    now = "%(now)s::timestamptz" if split else f"{schema}.job_now()"
    return f"""
      deferred_count = COALESCE(stats.deferred_count, 0),
      blocked_count = COALESCE(stats.blocked_count, 0),
      queued_count = COALESCE(stats.queued_count, 0),
      ready_count = COALESCE(stats.ready_count, 0),
      active_count = COALESCE(stats.active_count, 0),
      failed_count = COALESCE(stats.failed_count, 0),{_retained_assignments(schema, split=split)}{throughput_set}
      singletons_active = stats.singletons_active,
      monitor_on = {now}{ready_history}"""


#: How long this transaction has pinned its snapshot, in seconds.
PINNED_SECONDS = "extract(epoch FROM (clock_timestamp() - transaction_timestamp()))::float8"


def _counted_returning(*, throughput: bool, split: bool = False) -> str:
    """What a count returns per queue (see cache_queue_stats()). The split form returns the
    seconds pinned as a bound value (%(pinned)s), since Citus refuses a call of clock_timestamp()
    in the RETURNING clause."""
    true_up_out = "COALESCE(stats.true_up, false)" if throughput else "false"
    pinned = "%(pinned)s::float8" if split else PINNED_SECONDS
    return f"""queue.name, queue.queued_count, queue.warning_queued, {true_up_out},
      {pinned},
      COALESCE(stats.expired_count, 0) > 0, COALESCE(stats.stalled_count, 0) > 0"""


def insert_queue_stats(schema: str) -> str:
    """Snapshot the named queues' rows into queue_stats, histograms included. Parameter: names."""
    return f"""
    INSERT INTO {schema}.queue_stats (
      name, deferred_count, queued_count, ready_count, active_count, failed_count, total_count,
      created_delta, completed_delta, failed_delta, delta_seconds, delta_on,
      wait_bins, run_bins, ready_oldest_seconds, captured_on
    )
    SELECT name, deferred_count, queued_count, ready_count, active_count, failed_count, total_count,
      created_delta, completed_delta, failed_delta, delta_seconds, delta_on,
      wait_bins, run_bins, ready_oldest_seconds, {schema}.job_now()
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


def reduce_retained_count(schema: str) -> str:
    """Take the jobs a delete or resume moved off a queue's counts at once rather than at the next
    pass (pg-boss 12.38's reduceRetainedCount). Named parameters: name, retained (off
    retained_count: the completed and cancelled jobs of it that went), removed (off total_count).

    A queue no maintenance pass has counted yet keeps a NULL retained_count, and its total_count,
    the count it had before schema 46, still drops by the jobs removed.
    """
    return f"""
    UPDATE {schema}.queue SET
      retained_count = CASE WHEN retained_count IS NULL THEN NULL
        ELSE GREATEST(retained_count - %(retained)s, 0) END,
      total_count = GREATEST(total_count - %(removed)s, 0)
    WHERE name = %(name)s
    """


# The split count of the citus-distributed backend. cache_queue_stats() joins the job table, whose
# shards Citus spreads over the workers, to queue_stats, a table of the coordinator alone, through
# correlated subqueries, and its update calls job_now() beside the queue's columns: Citus refuses
# both. So it runs as pg-boss splits such statements for distributed engines, in one transaction
# (db/split_stats.py): the try-lock; the windows read on the coordinator; each queue counted by a
# statement Citus sends whole to the shard holding it, the window and the clock bound; the queue
# rows locked in name order and updated from the counts, bound as JSON. The try-lock keeps a
# second monitor out from the first statement to the commit, as it does the one statement.

#: The columns of a count (_aggregate()) as the split update reads them back from JSON, with the
#: window's ends the coordinator read, in the aggregate's order.
SPLIT_COUNT_COLUMNS = (
    ("name", "text"),
    *(
        (column, "int")
        for column in (
            "deferred_count",
            "blocked_count",
            "ready_count",
            "queued_count",
            "active_count",
            "failed_count",
            "live_count",
            "expired_count",
            "stalled_count",
            "retained_since",
            "retained_recent",
        )
    ),
    ("retained_from", "timestamptz"),
)
#: The columns a count with throughput adds, in the aggregate's order.
SPLIT_THROUGHPUT_COLUMNS = (
    ("created_delta", "int"),
    ("completed_delta", "int"),
    ("failed_delta", "int"),
    ("wait_bins", "int[]"),
    ("run_bins", "int[]"),
    ("ready_oldest_seconds", "int"),
    ("true_up", "boolean"),
)
#: The last column of every count, then the window's ends the split update adds.
SPLIT_TAIL_COLUMNS = (("singletons_active", "text[]"), ("w_start", "timestamptz"), ("w_end", "timestamptz"))


def split_count_columns(*, throughput: bool) -> tuple[tuple[str, str], ...]:
    """The columns of the split count's rows, name and type, as count_one_queue() returns them
    followed by w_start and w_end."""
    return SPLIT_COUNT_COLUMNS + (SPLIT_THROUGHPUT_COLUMNS if throughput else ()) + SPLIT_TAIL_COLUMNS


def stats_try_lock() -> str:
    """The split count's first statement: the try-lock of cache_queue_stats(). Parameter:
    lock_key. Returns one row: whether this transaction holds it."""
    return f"SELECT pg_try_advisory_xact_lock({lock_id('%(lock_key)s')})"


@functools.lru_cache(maxsize=64)
def count_one_queue(schema: str, table: str, *, throughput: bool) -> str:
    """The split count's statement per queue: _aggregate()'s counts of queue ``%(name)s`` from
    the job table alone. Named parameters: name, now, retained_on, and with throughput w_start,
    w_end, h, top, settled (window_inputs(split=True)'s row)."""
    return _aggregate(schema, table, throughput=throughput, split=True)


def pinned_seconds() -> str:
    """How long this transaction has pinned its snapshot, in seconds (no parameters)."""
    return f"SELECT {PINNED_SECONDS}"


def lock_counted_queues(schema: str) -> str:
    """Lock the named queues' rows in name order, as cache_queue_stats() does once it has
    counted. Parameter: names."""
    return f"""
    SELECT name FROM {schema}.queue
    WHERE name = ANY(%(names)s::text[])
    ORDER BY name
    FOR NO KEY UPDATE
    """


@functools.lru_cache(maxsize=64)
def write_counts(schema: str, *, throughput: bool, history: bool = True) -> str:
    """The split count's last statement: cache_queue_stats()'s update of the queue rows, from the
    counts bound as a JSON array (split_count_columns()'s rows). Named parameters: counts, now,
    pinned (the seconds pinned, pinned_seconds()'s). Returns what cache_queue_stats() returns."""
    columns = ", ".join(f"{name} {kind}" for name, kind in split_count_columns(throughput=throughput))
    return f"""
    UPDATE {schema}.queue SET{_assignments(schema, throughput=throughput, history=history, split=True)}
    FROM jsonb_to_recordset(%(counts)s::jsonb) AS stats({columns})
    WHERE queue.name = stats.name
    RETURNING {_counted_returning(throughput=throughput, split=True)}
    """
