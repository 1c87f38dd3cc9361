"""Where the time of one Boss.send() goes: a step-by-step decomposition against the plain ceiling.

    .venvs/py3.11-Django__5.2/bin/python bench/profile_send.py [--jobs 2000] [--repeat 5]

Each step removes one layer from the one before it, on the same cluster, in the same process,
alternating within each repeat and starting from an empty, checkpointed job table (as in
bench/enqueue.py); the figure is the median time per job. The difference between two steps is
what the removed layer costs:

  1 boss.send                              everything, with Django's defaults
  2 Django cursor, Boss's statement        1-2: Boss's own Python (validation, payload, SQL text)
  3 psycopg ClientCursor on Django's connection, same statement (the cursor Django wraps)
                                           2-3: Django's cursor wrapper
  4 psycopg.Cursor on Django's connection, same statement with prepare=True, inside Django's
    wrap_database_errors (and prepare_threshold set on that connection): what Boss._insert
    could do
                                           3-4: parsing and planning the statement on every send
  5 raw psycopg connection, INSERT ... ON CONFLICT DO NOTHING RETURNING id, prepared
                                           4-5: executing Boss's statement rather than the
                                           simplest one with the semantics send() needs (a policy
                                           may drop the job; the caller gets the id)
  6 raw psycopg connection, INSERT ... VALUES, prepared
                                           the ceiling of bench/enqueue.py; 5-6: those semantics

Two more lines: boss.send through the "prepared" alias of bench/settings.py (server-side binding,
prepare_threshold=5: a settings-only remedy), and Boss's Python alone, timed with the database
calls stubbed out, which checks 1-2 without the noise of a difference of two timed runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Same bootstrap as bench/enqueue.py: the repository root holds django_pgboss and bench.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from django.core.management import call_command
from django.db import connections
from psycopg.types.json import Jsonb

from bench.enqueue import QUEUE, SINGLE_SQL, TABLE, count_jobs, raw_connection, reset, source_revision
from django_pgboss.manager import Boss
from django_pgboss.plans import jobs as job_plans

SEMANTIC_SQL = f"INSERT INTO {TABLE} (name, data) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING id"


def boss_statement() -> str:
    """The statement Boss.send() runs for QUEUE (a standard queue in job_common, no NOTIFY)."""
    return job_plans.insert_jobs(Boss()._q, "job_common", returning=True, notify=False)


def body(i: int) -> str:
    # The JSON array Boss builds for send(QUEUE, {"i": i}): one job, only its data set.
    return f'[{{"data":{{"i":{i}}}}}]'


class _StubCursor:
    """A cursor that answers Boss's insert without a database, so only Boss's Python is timed."""

    def __enter__(self) -> _StubCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, params: Any = None) -> None:
        return None

    def fetchall(self) -> list[tuple[str]]:
        return [("00000000-0000-0000-0000-000000000000",)]


class _OfflineBoss(Boss):
    def _cursor(self) -> Any:
        # The queue lookup still reads the database (once: Boss caches the route); every statement
        # after it goes to the stub.
        return _StubCursor() if QUEUE in self._routes else super()._cursor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="sends per step and repeat (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="repeats (default 5)")
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    conn = raw_connection()
    boss = Boss()
    if boss.get_queue(QUEUE) is not None:
        boss.delete_queue(QUEUE)
    boss.create_queue(QUEUE)
    sql = boss_statement()
    django_conn = connections["default"]

    # Statements per send, as Django sees them: the first send of a Boss also looks the queue up.
    statements: list[str] = []

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        statements.append(sql)
        return execute(sql, params, many, context)

    counting = Boss()
    with django_conn.execute_wrapper(record):
        counting.send(QUEUE, {"i": 0})
        first = len(statements)
        statements.clear()
        for i in range(100):
            counting.send(QUEUE, {"i": i})
    per_send = len(statements) / 100

    def boss_send(n: int) -> None:
        b = Boss()
        for i in range(n):
            b.send(QUEUE, {"i": i})

    def django_cursor(n: int) -> None:
        for i in range(n):
            with django_conn.cursor() as cursor:
                cursor.execute(sql, [body(i), QUEUE])
                cursor.fetchall()

    def client_cursor(n: int) -> None:
        for i in range(n):
            psycopg.ClientCursor(django_conn.connection).execute(sql, (body(i), QUEUE)).fetchall()

    def prepared(n: int) -> None:
        # Server-side binding on Django's own connection (so the same transaction as the caller's
        # writes), errors still translated into Django's; psycopg prepares the statement once per
        # connection and PostgreSQL switches to a cached generic plan after five executions.
        # Django opens its connection with prepare_threshold=None, which makes psycopg ignore even
        # prepare=True; any number enables explicit preparing, and Django's own cursors, being
        # client-side binding cursors, still never prepare.
        django_conn.connection.prepare_threshold = 5
        for i in range(n):
            with django_conn.wrap_database_errors, psycopg.Cursor(django_conn.connection) as cursor:
                cursor.execute(sql, (body(i), QUEUE), prepare=True).fetchall()

    def semantic(n: int) -> None:
        cur = conn.cursor()
        for i in range(n):
            cur.execute(SEMANTIC_SQL, (QUEUE, Jsonb({"i": i})), prepare=True).fetchall()

    def ceiling(n: int) -> None:
        cur = conn.cursor()
        for i in range(n):
            cur.execute(SINGLE_SQL, (QUEUE, Jsonb({"i": i})), prepare=True)

    def boss_send_prepared(n: int) -> None:
        b = Boss(using="prepared")
        for i in range(n):
            b.send(QUEUE, {"i": i})

    steps: list[tuple[str, Callable[[int], None]]] = [
        ("1 boss.send", boss_send),
        ("2 Django cursor, Boss's statement", django_cursor),
        ("3 psycopg ClientCursor, Boss's statement", client_cursor),
        ("4 psycopg.Cursor, Boss's statement prepared", prepared),
        ("5 raw: ON CONFLICT .. RETURNING id, prepared", semantic),
        ("6 raw: INSERT .. VALUES, prepared (ceiling)", ceiling),
        ("boss.send, alias 'prepared'", boss_send_prepared),
    ]
    per_job: dict[str, list[float]] = {label: [] for label, _ in steps}
    for repeat in range(args.repeat):
        for label, run in steps:
            reset(admin)
            started = time.perf_counter()
            run(args.jobs)
            elapsed = time.perf_counter() - started
            if count_jobs(admin) != args.jobs:
                raise SystemExit(f"{label}: expected {args.jobs} jobs in {TABLE}")
            per_job[label].append(elapsed / args.jobs * 1e6)
        print(f"  repeat {repeat + 1}/{args.repeat} done", file=sys.stderr)
    reset(admin)

    offline = _OfflineBoss()
    offline.send(QUEUE, {"i": 0})  # the real queue lookup; only the insert meets the stub
    started = time.perf_counter()
    for i in range(args.jobs * 10):
        offline.send(QUEUE, {"i": i})
    python_only = (time.perf_counter() - started) / (args.jobs * 10) * 1e6
    boss.delete_queue(QUEUE)

    print(f"django_pgboss at {source_revision()}")
    print(f"statements per send: {per_send:g} (the first send of a Boss: {first}, with the queue lookup)")
    print(f"{args.jobs} sends per step, median (min-max) of {args.repeat} repeats, microseconds per job")
    print()
    print(f"| {'step':<46} | {'us/job':>6} | {'min-max':>11} | {'jobs/s':>6} |")
    print(f"|{'-' * 48}|{'-' * 7}:|{'-' * 12}:|{'-' * 7}:|")
    median = {label: statistics.median(values) for label, values in per_job.items()}
    for label, values in per_job.items():
        spread = f"{min(values):.0f}-{max(values):.0f}"
        print(f"| {label:<46} | {median[label]:>6.0f} | {spread:>11} | {1e6 / median[label]:>6.0f} |")
    print()
    step = [label for label, _ in steps]
    layers = [
        ("Boss's Python (1-2)", step[0], step[1]),
        ("Django's cursor wrapper (2-3)", step[1], step[2]),
        ("parse + plan of Boss's statement, every send (3-4)", step[2], step[3]),
        ("executing Boss's statement vs the semantic minimum (4-5)", step[3], step[4]),
        ("ON CONFLICT DO NOTHING + RETURNING id (5-6)", step[4], step[5]),
    ]
    for layer, upper, lower in layers:
        print(f"{layer:<58} {median[upper] - median[lower]:>6.0f} us")
    print(f"{'Boss Python alone, database calls stubbed out':<58} {python_only:>6.0f} us")


if __name__ == "__main__":
    main()
