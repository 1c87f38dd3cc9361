"""Where the time of one Boss.send() goes: a step-by-step decomposition against the plain ceiling.

    .venvs/py3.11-Django__5.2/bin/python bench/profile_send.py [--jobs 2000] [--repeat 5]

Each step removes one layer from the one before it, on the same cluster, in the same process,
alternating within each repeat and starting from an empty, checkpointed job table (as in
bench/enqueue.py); the figure is the median time per job. The difference between two steps is
what the removed layer costs:

  1 boss.send                              everything, with django_pgboss's defaults (its own
                                           statements prepared, PGBOSS PREPARED_STATEMENTS)
  2 statement_cursor, Boss's statement     Boss's cursor (Django's wrapper around a reused,
                                           server-side binding psycopg cursor) running the exact
                                           statement and parameters send() runs for QUEUE
                                           1-2: Boss's own Python (validation, payload, routing)
  3 psycopg.Cursor on Django's connection, same statement, prepared, no Django wrapper
                                           2-3: Django's cursor wrapper
  4 raw psycopg connection, INSERT ... (id, name, data) VALUES (%s, %s, %s), prepared, the id
    drawn in Python as send() draws it
                                           3-4: executing Boss's statement rather than the
                                           simplest one with the semantics send() needs on a
                                           standard queue (the caller gets the id; no unique index
                                           can refuse the row, so no ON CONFLICT)
  5 raw psycopg connection, INSERT ... (name, data) VALUES, prepared
                                           the ceiling of bench/enqueue.py; 4-5: the id, drawn in
                                           Python and sent (the server draws the ceiling's)

Two more lines: boss.send with PGBOSS PREPARED_STATEMENTS = False (Django's own cursor: client-side
binding, parsed and planned on every send), what preparing is worth; and Boss's Python alone,
timed with the database calls stubbed out, which checks 1-2 without the noise of a difference of
two timed runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Same bootstrap as bench/enqueue.py: the repository root holds django_pgboss and bench.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from django.core.management import call_command
from django.db import connections
from django.test import override_settings
from psycopg.types.json import Jsonb

from bench.common import TABLE, alternate, fresh_queues, raw_connection, source_revision
from bench.enqueue import QUEUE, SINGLE_SQL
from django_pgboss.api.boss import Boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.cursors import statement_cursor
from django_pgboss.plans import jobs as job_plans

#: The least a send needs: the row, with the id the caller is given back.
MINIMUM_SQL = f"INSERT INTO {TABLE} (id, name, data) VALUES (%s, %s, %s)"


def boss_statement() -> str:
    """The statement Boss.send() runs for QUEUE: one job, a standard queue in job_common, no NOTIFY,
    in autocommit, so without ON CONFLICT."""
    return job_plans.insert_job(
        DatabaseContext().quoted_schema, "job_common", on_conflict=False, options=False
    )


def params(i: int) -> dict[str, Any]:
    # The parameters Boss builds for send(QUEUE, {"i": i}): the data and a fresh id, no options.
    return {"name": QUEUE, "id": str(uuid.uuid4()), "data": f'{{"i":{i}}}', "options": None}


class _StubCursor:
    """A cursor that answers Boss's insert without a database, so only Boss's Python is timed."""

    def __enter__(self) -> _StubCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, params: Any = None) -> None:
        return None

    @property
    def rowcount(self) -> int:
        return 1


class _OfflineContext(DatabaseContext):
    def cursor(self, connection: Any = None) -> Any:
        # The queue lookup still reads the database (once: the context caches the route); every
        # statement after it goes to the stub.
        return _StubCursor() if QUEUE in self._routes else super().cursor(connection)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="sends per step and repeat (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="repeats (default 5)")
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    conn = raw_connection()
    boss = Boss()
    fresh_queues(boss, QUEUE)
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
    # The step must run what send() runs; a drift of send() away from insert_job() would make
    # steps 2 and 3 measure another statement.
    if set(statements) != {sql}:
        raise SystemExit(
            "boss.send() no longer runs insert_job(on_conflict=False, options=False); update boss_statement()"
        )

    def boss_send(n: int) -> None:
        b = Boss()
        for i in range(n):
            b.send(QUEUE, {"i": i})

    def boss_cursor(n: int) -> None:
        for i in range(n):
            with statement_cursor("default") as cursor:
                cursor.execute(sql, params(i))

    def psycopg_cursor(n: int) -> None:
        # The psycopg cursor statement_cursor() wraps, used bare. Django opens its connection with
        # prepare_threshold=None, under which psycopg ignores even prepare=True; statement_cursor()
        # has set it by now (step 1 runs first), this is for a step run on its own.
        raw = django_conn.connection
        if raw.prepare_threshold is None:
            raw.prepare_threshold = 1
        cursor = psycopg.Cursor(raw)
        for i in range(n):
            cursor.execute(sql, params(i), prepare=True)

    def semantic(n: int) -> None:
        cur = conn.cursor()
        for i in range(n):
            cur.execute(MINIMUM_SQL, (str(uuid.uuid4()), QUEUE, Jsonb({"i": i})), prepare=True)

    def ceiling(n: int) -> None:
        cur = conn.cursor()
        for i in range(n):
            cur.execute(SINGLE_SQL, (QUEUE, Jsonb({"i": i})), prepare=True)

    def boss_send_unprepared(n: int) -> None:
        with override_settings(PGBOSS={"SCHEMA": pgboss_settings.SCHEMA, "PREPARED_STATEMENTS": False}):
            boss_send(n)

    steps: list[tuple[str, Callable[[int], None]]] = [
        ("1 boss.send", boss_send),
        ("2 statement_cursor, Boss's statement", boss_cursor),
        ("3 psycopg.Cursor, Boss's statement", psycopg_cursor),
        ("4 raw: INSERT (id, name, data), prepared", semantic),
        ("5 raw: INSERT .. VALUES, prepared (ceiling)", ceiling),
        ("boss.send, PREPARED_STATEMENTS False", boss_send_unprepared),
    ]
    seconds = alternate(admin, [(label, args.jobs, run) for label, run in steps], args.repeat)
    per_job = {label: [s / args.jobs * 1e6 for s in values] for label, values in seconds.items()}

    offline = Boss(context=_OfflineContext())
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
        ("executing Boss's statement vs the semantic minimum (3-4)", step[2], step[3]),
        ("the id, drawn in Python (4-5)", step[3], step[4]),
        ("preparing, what it saves a send (unprepared - 1)", step[5], step[0]),
    ]
    for layer, upper, lower in layers:
        print(f"{layer:<58} {median[upper] - median[lower]:>6.0f} us")
    print(f"{'Boss Python alone, database calls stubbed out':<58} {python_only:>6.0f} us")


if __name__ == "__main__":
    main()
