"""Async send benchmark: ``await boss.asend()`` against boss.send(), a native psycopg
AsyncConnection path and the plain AsyncConnection ceiling, in one run.

    PGBOSS_BENCH_PORT=55457 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55457/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/async_send.py [--jobs 3000] [--repeat 5]
    PGBOSS_BENCH_PORT=55457 bash bench/cluster.sh stop

Every scenario runs in this process on the same durable cluster, alternating within each repeat,
each from an empty, checkpointed job table (bench/enqueue.py's reset()); the figure is the median
of the repeats, the best beside it. A scenario whose job count comes out wrong is refused.

Scenarios (one job per call, autocommit, sequential unless said):
  boss.send         the sync call, from sync code
  boss.asend        ``await boss.asend(queue, {"i": i})`` in asyncio.run(): what django_pgboss
                    ships, sync_to_async(thread_sensitive=True) onto Django's connection
  boss.asend x8     the same, 8 coroutines at once (asyncio.gather): thread-sensitive calls of
                    one async context run one at a time on one thread, so this shows what
                    concurrency buys on that path (nothing, by design: one connection)
  native async      what a native path would run at the least: send()'s argument checks and
                    parameters (job_payload, single_job_params) and its exact statement
                    (plans.jobs.insert_job), on a psycopg.AsyncConnection of its own, prepared
  native async x8   the same on 8 AsyncConnections, 8 coroutines at once
  plain async       the ceiling: a psycopg.AsyncConnection (psycopg's defaults) running
                    INSERT INTO pgboss.job_common (name, data) VALUES (%s, %s) per job
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from django.core.management import call_command
from psycopg.types.json import Jsonb

from bench.common import (
    alternate,
    connection_arguments,
    fresh_queues,
    raw_connection,
    server_facts,
    source_revision,
)
from bench.enqueue import QUEUE, SINGLE_SQL
from django_pgboss.api.boss import Boss
from django_pgboss.arguments import job_payload
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import jobs as job_plans
from django_pgboss.wire import single_job_params

CONCURRENCY = 8


async def async_connection() -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(**connection_arguments())


def boss_send(jobs: int) -> None:
    boss = Boss()
    for i in range(jobs):
        boss.send(QUEUE, {"i": i})


def boss_asend(jobs: int) -> None:
    async def run() -> None:
        boss = Boss()
        for i in range(jobs):
            await boss.asend(QUEUE, {"i": i})

    asyncio.run(run())


def boss_asend_gathered(jobs: int) -> None:
    async def run() -> None:
        boss = Boss()

        async def lane(start: int) -> None:
            for i in range(start, jobs, CONCURRENCY):
                await boss.asend(QUEUE, {"i": i})

        await asyncio.gather(*(lane(k) for k in range(CONCURRENCY)))

    asyncio.run(run())


# The native path's statement: what send() runs for QUEUE in autocommit (a standard queue in
# job_common, no notify, so no ON CONFLICT and no options document for a bare send).
NATIVE_SQL = job_plans.insert_job(
    DatabaseContext().quoted_schema, "job_common", on_conflict=False, options=False
)


async def native_send(conn: psycopg.AsyncConnection, data: dict) -> str | None:
    validate_queue_name(QUEUE)
    job = job_payload(data, {})
    params = single_job_params(QUEUE, job)
    cursor = await conn.execute(NATIVE_SQL, params, prepare=True)
    return params["id"] if cursor.rowcount else None


def native_async(jobs: int) -> None:
    async def run() -> None:
        conn = await async_connection()
        try:
            for i in range(jobs):
                await native_send(conn, {"i": i})
        finally:
            await conn.close()

    asyncio.run(run())


def native_async_gathered(jobs: int) -> None:
    async def run() -> None:
        conns = [await async_connection() for _ in range(CONCURRENCY)]

        async def lane(k: int) -> None:
            for i in range(k, jobs, CONCURRENCY):
                await native_send(conns[k], {"i": i})

        try:
            await asyncio.gather(*(lane(k) for k in range(CONCURRENCY)))
        finally:
            for conn in conns:
                await conn.close()

    asyncio.run(run())


def plain_async(jobs: int) -> None:
    async def run() -> None:
        conn = await async_connection()
        try:
            cur = conn.cursor()
            for i in range(jobs):
                await cur.execute(SINGLE_SQL, (QUEUE, Jsonb({"i": i})))
        finally:
            await conn.close()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000, help="jobs per run (default 3000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each scenario (default 5)")
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    boss = Boss()
    fresh_queues(boss, QUEUE)
    assert NATIVE_SQL  # the native statement is Boss's own: plans.jobs.insert_job()

    scenarios: list[tuple[str, Callable[[int], None]]] = [
        ("boss.send (sync)", boss_send),
        ("boss.asend", boss_asend),
        (f"boss.asend x{CONCURRENCY} (gather)", boss_asend_gathered),
        ("native async (Boss's statement)", native_async),
        (f"native async x{CONCURRENCY} (8 connections)", native_async_gathered),
        ("plain AsyncConnection (ceiling)", plain_async),
    ]
    seconds = alternate(admin, [(label, args.jobs, run) for label, run in scenarios], args.repeat)
    boss.delete_queue(QUEUE)

    facts = server_facts(admin)
    print(f"django_pgboss at {source_revision()}")
    print(
        f"PostgreSQL {facts['server_version']}; fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']}; {args.jobs} jobs per run, {args.repeat} repeats"
    )
    ceiling = statistics.median(seconds["plain AsyncConnection (ceiling)"])
    print("| scenario | jobs/s (median) | best | µs/job | vs ceiling |")
    print("|---|---:|---:|---:|---:|")
    for label, _ in scenarios:
        median = statistics.median(seconds[label])
        best = min(seconds[label])
        print(
            f"| {label} | {args.jobs / median:,.0f} | {args.jobs / best:,.0f} | "
            f"{median / args.jobs * 1e6:,.0f} | {ceiling / median:.0%} |"
        )


if __name__ == "__main__":
    main()
