"""Three per-row and per-job costs of the worker's hot path, each beside the way it is done now.

Each pair runs in one process, alternating within each repeat, and prints the median of the
repeats in microseconds a call (or a row):

  timestamptz   a fetch's 50 rows (the columns a fetch returns, start_after the one timestamptz)
                read by two psycopg cursors on Django's connection, one with the connection's
                timestamptz loader (Django's Python subclass of psycopg's) and one set up as
                django_pgboss's statement cursor is (db/cursors.py: psycopg's own loader, where it
                returns the same values); then a timestamptz column alone, the cost of one value
  close_old     in a thread that holds a connection: django.db.close_old_connections(), against
                the handler threads' close_old_connections_quietly() (worker/state.py), which looks
                the thread's connection objects up once
  tracing       with the OpenTelemetry API installed and no tracer provider set: the API's
                get_tracer_provider() check (what tracing asked once per job) against
                tracing.process_span(..., traced=False), which the worker's handler threads now
                call with what the fetch read

    DATABASE_URL=postgres://postgres@127.0.0.1:55461/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/worker_overheads.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers_settings")

import psycopg
from django.db import close_old_connections, connections

from bench.common import load_average, source_revision
from django_pgboss.api.boss import Boss
from django_pgboss.db.cursors import load_timestamps_as_django_does
from django_pgboss.observability import tracing
from django_pgboss.worker.state import close_old_connections_quietly

QUEUE = "bench_overheads"
ROWS = 50
FETCH_COLUMNS = "id::text AS id, name, data, retry_count, expire_seconds, heartbeat_seconds, group_id, group_tier, start_after"


def per_call(action: Callable[[], object], calls: int) -> float:
    """Microseconds a call of ``action``, over ``calls`` calls."""
    started = time.perf_counter()
    for _ in range(calls):
        action()
    return (time.perf_counter() - started) / calls * 1e6


def paired(
    label: str, before: tuple[str, Callable[[], float]], after: tuple[str, Callable[[], float]], repeats: int
) -> None:
    """Alternate the two measurements ``repeats`` times and print their medians and ratio."""
    figures: dict[str, list[float]] = {before[0]: [], after[0]: []}
    for _ in range(repeats):
        for name, measure in (before, after):
            figures[name].append(measure())
    old, new = (statistics.median(figures[name]) for name in (before[0], after[0]))
    print(
        f"{label:<44} {before[0]}: {old:7.2f} us   {after[0]}: {new:7.2f} us   ({old - new:+.2f} us, x{old / new:.1f})"
    )


def fetch_rows(cursor: psycopg.Cursor, sql: str) -> Callable[[], float]:
    """A measurement: microseconds a row to read the rows of ``sql`` (executed first, untimed)."""

    def measure() -> float:
        spent = 0.0
        for _ in range(20):
            cursor.execute(sql)
            started = time.perf_counter()
            cursor.fetchall()
            spent += time.perf_counter() - started
        return spent / (20 * ROWS) * 1e6

    return measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    boss = Boss()
    if boss.get_queue(QUEUE) is not None:
        boss.delete_queue(QUEUE)
    boss.create_queue(QUEUE)
    boss.insert(QUEUE, [{"data": {"i": i}} for i in range(ROWS)])
    print(
        f"django_pgboss at {source_revision()}; load {load_average()}; medians of {args.repeats} alternated repeats"
    )
    table = f"{boss.context.quoted_schema}.job"
    rows_sql = f"SELECT {FETCH_COLUMNS} FROM {table} WHERE name = '{QUEUE}' LIMIT {ROWS}"
    stamps_sql = f"SELECT start_after FROM {table} WHERE name = '{QUEUE}' LIMIT {ROWS}"
    connection = connections["default"]
    connection.ensure_connection()
    with_djangos_loader = psycopg.Cursor(connection.connection)
    with_ours = psycopg.Cursor(connection.connection)
    load_timestamps_as_django_does(with_ours, connection.timezone)
    for label, sql in (
        ("timestamptz: a fetch's row (9 columns)", rows_sql),
        ("timestamptz: one value", stamps_sql),
    ):
        paired(
            label,
            ("Django's loader", fetch_rows(with_djangos_loader, sql)),
            ("the statement cursor's", fetch_rows(with_ours, sql)),
            args.repeats,
        )

    def in_a_thread_with_a_connection() -> None:
        connections["default"].ensure_connection()
        paired(
            "close_old_connections, one alias",
            ("Django's", lambda: per_call(close_old_connections, 20_000)),
            ("the handler threads'", lambda: per_call(close_old_connections_quietly, 20_000)),
            args.repeats,
        )
        connections.close_all()

    thread = threading.Thread(target=in_a_thread_with_a_connection)
    thread.start()
    thread.join()
    if tracing.ENABLED and not tracing.active():
        from opentelemetry import trace

        paired(
            "tracing off: the check a job paid",
            ("get_tracer_provider()", lambda: per_call(trace.get_tracer_provider, 20_000)),
            (
                "process_span(traced=False)",
                lambda: per_call(lambda: tracing.process_span(QUEUE, [], traced=False), 20_000),
            ),
            args.repeats,
        )
    else:
        print("tracing: not measured (the OpenTelemetry API is not installed, or a provider is set)")
    boss.delete_queue(QUEUE)


if __name__ == "__main__":
    main()
