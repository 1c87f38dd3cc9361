"""SQL for the metrics exporters: the queue gauges the monitor keeps, and the oldest ready job.

A scrape must stay cheap however large the job table grows, so the gauges are read from the queue
table alone (the counts each monitor pass caches there), never counted from the jobs. The one
reading the queue table does not hold, the age of the oldest job ready to run, is found through
the fetch index (job_i11) by a skip scan that visits one index entry per distinct priority: an
Index Only Scan of a few pages, not a scan of the queue's waiting jobs (tests/test_metrics.py
shows both plans with EXPLAIN).
"""

from __future__ import annotations

import functools


def queue_gauges(schema: str) -> str:
    """Every queue's cached gauges and last throughput window, one row per queue, by name.

    No parameters. Reads the queue table only. Columns: name, dead_letter, table_name,
    queued_count, ready_count, deferred_count, active_count, failed_count, total_count,
    created_delta, completed_delta, failed_delta, delta_seconds, blocked_count, retained_count,
    wait_bins, run_bins (the last window's histograms, NULL before a counting pass), and
    counted_age, the seconds since a monitor pass last counted the queue (NULL when none has).
    """
    return f"""
    SELECT name, dead_letter, table_name,
      queued_count, ready_count, deferred_count, active_count, failed_count, total_count,
      created_delta, completed_delta, failed_delta, delta_seconds,
      blocked_count, retained_count, wait_bins, run_bins,
      extract(epoch FROM ({schema}.job_now() - monitor_on))::float8 AS counted_age
    FROM {schema}.queue
    ORDER BY name
    """


def queue_deltas(schema: str) -> str:
    """The throughput window the last count wrote for each named queue. Parameter: names.

    Reads the queue table only. Columns: name, created_delta, completed_delta, failed_delta.
    """
    return f"""
    SELECT name, created_delta, completed_delta, failed_delta
    FROM {schema}.queue
    WHERE name = ANY(%(names)s::text[])
    """


@functools.lru_cache(maxsize=64)
def oldest_ready(schema: str, table: str) -> str:
    """The age in seconds of each named queue's oldest job that is ready to run, in one job table.

    Parameter: names (queues whose jobs live in ``table``). One row per name: name, age (NULL when
    nothing is ready). Ready is what fetch() would claim now: created or retry, not blocked by a
    dependency, start_after passed; its age counts from created_on, when it was sent.

    job_i11 orders a queue's waiting jobs by (priority DESC, created_on, start_after), so the oldest
    job of one priority is that priority's first ready entry. The recursive part walks the distinct
    priorities from the top, one index descent each (PostgreSQL has no skip scan of its own before
    18), and each priority's oldest ready job is one more descent; every column read is in the
    index, so the scans are index-only. Deferred jobs created before the oldest ready one of their
    priority are stepped over in the index, which is the only case where the walk reads more than a
    few entries.

    The oldest job's ORDER BY names all three of job_i11's columns after the name, though start_after
    only breaks ties of created_on: with the priority fixed, schema 46's job_i15 (name, created_on)
    gives the order of the two alone, and the planner, reckoning a third of the jobs match the
    priority, took it with a filter on priority, reading every job of the higher priorities created
    first. No other index gives the three, so job_i11 is the one plan.
    """
    waiting = "j.name = n.name AND j.state < 'active' AND NOT j.blocked"
    return f"""
    SELECT n.name, (
      WITH RECURSIVE priorities(priority) AS (
        (SELECT j.priority FROM {schema}.{table} j
         WHERE {waiting}
         ORDER BY j.priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT j.priority FROM {schema}.{table} j
                WHERE {waiting} AND j.priority < p.priority
                ORDER BY j.priority DESC LIMIT 1)
        FROM priorities p
        WHERE p.priority IS NOT NULL
      )
      SELECT extract(epoch FROM ({schema}.job_now() - min(oldest.created_on)))::float8
      FROM priorities p
      CROSS JOIN LATERAL (
        SELECT j.created_on FROM {schema}.{table} j
        WHERE {waiting} AND j.priority = p.priority AND j.start_after <= {schema}.job_now()
        ORDER BY j.priority DESC, j.created_on, j.start_after LIMIT 1
      ) oldest
      WHERE p.priority IS NOT NULL
    ) AS age
    FROM unnest(%(names)s::text[]) AS n(name)
    """
