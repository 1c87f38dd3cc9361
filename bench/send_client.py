"""Where a send's client time goes: Boss.send() and Boss.asend() against the ceiling's async loop, with
the client's CPU per send beside the wall time, and the layers between them; each variant's rate
against the bound (the statement alone on a bare cursor, "psycopg cursor + Boss SQL") is the
median of its rounds' ratios, each round's against the bound's in the same round.

    DATABASE_URL=postgres://postgres@127.0.0.1:55462/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/send_client.py [--sends 2000] [--rounds 5] [--profile]

Each variant sends --sends jobs one at a time, each its own commit, alternating within each round
(order rotated), from an empty, checkpointed table; per send, medians over the rounds of the wall
time and of this process's CPU time (time.process_time(): user + system, so the socket calls and
the wait count, and a descheduled process accrues nothing):

  ceiling, async psycopg       bench/peers.py's ceiling_send(): AsyncConnection, INSERT ... VALUES
  ceiling, sync psycopg        the same statement on a sync psycopg connection
  boss.send                    what bench/peers.py times for django_pgboss
  await boss.asend             the async twin, awaited in turn (sync_to_async, thread_sensitive)
  statement_cursor + Boss SQL  Boss's cursor and statement without Boss's Python
  psycopg cursor + Boss SQL    the psycopg cursor under it, on Django's connection, bare
  ... + a send's least work    that cursor, plus what any send of a Django app does: look up
                               Django's connection, draw the job's id, encode and check the data
  sync_to_async no-op hop      await sync_to_async(thread_sensitive=True) of a function that does
                               nothing: what any twin pays on top of its sync call, the least a
                               hop onto Django's thread costs (no job is sent)

With --profile, cProfile's top functions (own time) of boss.send over one run. With --stubbed, our
Python alone: boss.send() and the bare cursor with psycopg's execute replaced by a no-op, this
thread's CPU a send, the best of the rounds (no database work, so the machine's load matters less).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connections
from psycopg.types.json import Jsonb

from bench.common import TABLE, load_average, raw_connection, source_revision
from bench.peers import CEILING_DDL, CEILING_SEND, conninfo
from django_pgboss.api.boss import Boss
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.cursors import statement_cursor
from django_pgboss.plans import jobs as job_plans
from django_pgboss.wire import random_uuid_text, to_json

QUEUE = "bench_send_client"
#: The variant the others are compared with: the statement alone on a bare cursor.
BOUND = "psycopg cursor + Boss SQL"


def boss_sql() -> str:
    return job_plans.insert_job(
        DatabaseContext().quoted_schema, "job_common", on_conflict=False, options=False
    )


def boss_params(i: int) -> dict[str, Any]:
    return {"name": QUEUE, "id": str(uuid.uuid4()), "data": f'{{"i":{i}}}', "options": None}


def variants() -> dict[str, Callable[[int], None]]:
    sql = boss_sql()

    def ceiling_async(n: int) -> None:
        async def run() -> None:
            async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as conn:
                cur = conn.cursor()
                for i in range(n):
                    await cur.execute(CEILING_SEND, (QUEUE, Jsonb({"i": i})), prepare=True)

        asyncio.run(run())

    def ceiling_sync(n: int) -> None:
        with psycopg.connect(conninfo(), autocommit=True) as conn:
            cur = conn.cursor()
            for i in range(n):
                cur.execute(CEILING_SEND, (QUEUE, Jsonb({"i": i})), prepare=True)

    def boss_send(n: int) -> None:
        boss = Boss()
        for i in range(n):
            boss.send(QUEUE, {"i": i})

    def boss_asend(n: int) -> None:
        async def run() -> None:
            boss = Boss()
            for i in range(n):
                await boss.asend(QUEUE, {"i": i})

        asyncio.run(run())

    def boss_cursor(n: int) -> None:
        for i in range(n):
            with statement_cursor("default") as cursor:
                cursor.execute(sql, boss_params(i))

    def psycopg_cursor(n: int) -> None:
        raw = connections["default"].connection
        if raw.prepare_threshold is None:
            raw.prepare_threshold = 1
        cursor = psycopg.Cursor(raw)
        for i in range(n):
            cursor.execute(sql, boss_params(i), prepare=True)

    def least_send(n: int) -> None:
        raw = connections["default"].connection
        cursor = psycopg.Cursor(raw)
        for i in range(n):
            connection = connections["default"]
            if connection.in_atomic_block:
                raise AssertionError("the bench sends in autocommit")
            params = {
                "name": QUEUE,
                "id": random_uuid_text(),
                "data": to_json({"i": i}, "data"),
                "options": None,
            }
            cursor.execute(sql, params, prepare=True)

    def noop_hop(n: int) -> None:
        async def run() -> None:
            hop = sync_to_async(_nothing, thread_sensitive=True)
            for _ in range(n):
                await hop()

        asyncio.run(run())

    return {
        "ceiling, async psycopg": ceiling_async,
        "ceiling, sync psycopg": ceiling_sync,
        "boss.send": boss_send,
        "await boss.asend": boss_asend,
        "statement_cursor + Boss SQL": boss_cursor,
        BOUND: psycopg_cursor,
        "... + a send's least work": least_send,
        "sync_to_async no-op hop": noop_hop,
    }


def _nothing() -> None:
    return None


def stubbed_python(boss: Boss, sends: int, rounds: int) -> None:
    """Print boss.send()'s Python over the bare cursor's, psycopg's execute a no-op for both."""
    sql = boss_sql()
    boss.send(QUEUE, {"i": 0})  # the route cached, the connection open
    cursor = psycopg.Cursor(connections["default"].connection)
    real_execute = psycopg.Cursor.execute
    psycopg.Cursor.execute = lambda self, query, params=None, **kwargs: self

    def bare() -> None:
        for i in range(sends):
            cursor.execute(sql, boss_params(i), prepare=True)

    def send() -> None:
        for i in range(sends):
            boss.send(QUEUE, {"i": i})

    best = {"bare cursor": float("inf"), "boss.send": float("inf")}
    try:
        for _ in range(rounds):
            for label, run in (("bare cursor", bare), ("boss.send", send)):
                started = time.thread_time()
                run()
                best[label] = min(best[label], (time.thread_time() - started) / sends * 1e6)
    finally:
        psycopg.Cursor.execute = real_execute
    print(f"django_pgboss at {source_revision()}; load average {load_average()}")
    for label, value in best.items():
        print(f"{label}: {value:.1f} us of this thread's CPU a send (best of {rounds})")
    print(f"boss.send's own Python: {best['boss.send'] - best['bare cursor']:.1f} us a send")


def reset(admin: psycopg.Connection) -> None:
    admin.execute(f"TRUNCATE {TABLE}, ceiling.job")
    admin.execute("CHECKPOINT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=2000, help="sends a run (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--profile", action="store_true", help="cProfile of boss.send, top functions")
    parser.add_argument("--stubbed", action="store_true", help="our Python alone, psycopg's execute stubbed")
    args = parser.parse_args()
    if args.sends < 1 or args.rounds < 1:
        parser.error("--sends and --rounds take a whole number of at least 1")

    call_command("migrate", verbosity=0)
    boss = Boss()
    if boss.get_queue(QUEUE) is not None:
        boss.delete_queue(QUEUE)
    boss.create_queue(QUEUE)
    admin = raw_connection()
    admin.execute(CEILING_DDL)
    if args.stubbed:
        stubbed_python(boss, args.sends, args.rounds)
        boss.delete_queue(QUEUE)
        return
    cases = variants()
    for run in cases.values():
        run(2)  # connections open, statements prepared, routes cached
    wall: dict[str, list[float]] = {label: [] for label in cases}
    cpu: dict[str, list[float]] = {label: [] for label in cases}
    labels = list(cases)
    started_load = load_average()
    for index in range(args.rounds):
        shift = index % len(labels)
        for label in labels[shift:] + labels[:shift]:
            reset(admin)
            before_cpu, before = time.process_time(), time.perf_counter()
            cases[label](args.sends)
            wall[label].append((time.perf_counter() - before) / args.sends * 1e6)
            cpu[label].append((time.process_time() - before_cpu) / args.sends * 1e6)
        print(f"  round {index + 1}/{args.rounds} done (load {load_average()})", file=sys.stderr, flush=True)
    print(
        f"django_pgboss at {source_revision()}; load average {started_load} at the start, {load_average()} at the end"
    )
    print(
        f"{args.rounds} rounds of {args.sends} sends a variant; medians per send (each round's in brackets)"
    )
    print()
    print("| variant | wall us | client CPU us | rate vs the bound |")
    print("|---|--:|--:|--:|")
    bound = wall[BOUND]
    for label in cases:
        rounds = ", ".join(f"{value:.0f}" for value in cpu[label])
        # Each round's rate against the bound's in the same round, where the two ran minutes
        # apart at most: the machine's drift between rounds cancels out of the ratio.
        rates = [
            bound_wall / variant_wall for bound_wall, variant_wall in zip(bound, wall[label], strict=True)
        ]
        print(
            f"| {label} | {statistics.median(wall[label]):,.0f} | {statistics.median(cpu[label]):,.0f} ({rounds}) "
            f"| {statistics.median(rates):.1%} ({min(rates):.0%} to {max(rates):.0%}) |"
        )
    if args.profile:
        reset(admin)
        profiler = cProfile.Profile()
        profiler.runcall(cases["boss.send"], args.sends)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        print()
        print(out.getvalue())
    reset(admin)
    boss.delete_queue(QUEUE)


if __name__ == "__main__":
    main()
