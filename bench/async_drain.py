"""Async handlers benchmark: 1,000 jobs whose handler waits 0.05 s, at concurrency 100.

    PGBOSS_BENCH_PORT=55457 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55457/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/async_drain.py [--jobs 1000] [--concurrency 100]
                                                             [--sleep 0.05] [--repeat 3]
    PGBOSS_BENCH_PORT=55457 bash bench/cluster.sh stop

At concurrency C, N jobs that each wait S seconds take at least N / C batches of S: 10 x 0.05 s =
0.5 s for the defaults. Each run inserts the jobs, then times a burst Worker (what ``manage.py
pgboss_work --burst`` runs) from its start until every job is settled, and checks that all N
completed. Scenarios, alternating within each repeat:

  async handler     ``async def h(job): await asyncio.sleep(S)``: C coroutines on the worker's loop
  threaded handler  ``def h(job): time.sleep(S)``: C handler threads, the sync worker's way
  ... no wait       the same handlers without the wait: what fetching, settling, starting and
                    stopping the worker cost for N jobs on this machine. A handler's waits overlap
                    as they should when "handler" minus "no wait" is close to the floor.

Both claim ahead with batch_size = C, so one fetch round trip serves a whole batch of slots.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django.core.management import call_command

from bench.common import fresh_queues, raw_connection, server_facts, source_revision
from django_pgboss.api.boss import Boss
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration

QUEUE = "bench_async"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    boss = Boss()
    fresh_queues(boss, QUEUE)
    pause = args.sleep

    async def async_handler(job):
        await asyncio.sleep(pause)

    def threaded_handler(job):
        time.sleep(pause)

    async def async_no_wait(job):
        return None

    def threaded_no_wait(job):
        return None

    scenarios = [
        ("async handler", async_handler),
        ("async, no wait", async_no_wait),
        ("threaded handler", threaded_handler),
        ("threaded, no wait", threaded_no_wait),
    ]
    seconds: dict[str, list[float]] = {label: [] for label, _ in scenarios}
    for repeat in range(args.repeat):
        for label, handler in scenarios:
            boss.delete_all_jobs(QUEUE)
            boss.insert(QUEUE, [{"data": {"i": i}} for i in range(args.jobs)])
            admin.execute("CHECKPOINT")
            registration = Registration(
                QUEUE,
                handler,
                concurrency=args.concurrency,
                batch_size=args.concurrency,
                polling_interval_seconds=0.5,
            )
            worker = Worker([registration], boss=boss, burst=True, listen=False)
            started = time.perf_counter()
            stats = worker.run()
            elapsed = time.perf_counter() - started
            if stats.completed != args.jobs:
                raise SystemExit(f"{label}: {stats.completed} completed, expected {args.jobs}")
            seconds[label].append(elapsed)
            print(f"  run {repeat + 1}/{args.repeat} {label:<18} {elapsed:6.2f} s", file=sys.stderr)
    boss.delete_queue(QUEUE)

    ideal = args.jobs / args.concurrency * args.sleep
    facts = server_facts(admin)
    print(f"django_pgboss at {source_revision()}")
    print(
        f"PostgreSQL {facts['server_version']}; fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']}; {args.jobs} jobs x {args.sleep} s at "
        f"concurrency {args.concurrency}; {args.repeat} repeats; the floor is {ideal:.2f} s "
        f"({args.jobs // args.concurrency} batches)"
    )
    print("| scenario | seconds (median) | best | minus its no-wait run (median) |")
    print("|---|---:|---:|---:|")
    for label, _ in scenarios:
        median = statistics.median(seconds[label])
        base = "async, no wait" if label.startswith("async") else "threaded, no wait"
        extra = median - statistics.median(seconds[base])
        shown = f"{extra:.2f}" if label != base else ""
        print(f"| {label} | {median:.2f} | {min(seconds[label]):.2f} | {shown} |")


if __name__ == "__main__":
    main()
