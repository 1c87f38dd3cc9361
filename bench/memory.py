"""Memory benchmark: a worker's resident size while it drains a million jobs.

    PGBOSS_BENCH_PORT=55462 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55462/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/memory.py [--jobs 1000000] [--batch-size 100]

One standard queue gets --jobs jobs from one INSERT ... SELECT FROM generate_series (then VACUUM
ANALYZE and CHECKPOINT); a fresh process then runs Worker([Registration(queue, no-op,
concurrency=4, batch_size=--batch-size)], burst=True) until the queue is empty, while a thread of
that process reads its resident set size (/proc/self/statm) every 50 ms and prints it as the
completed count passes 1,000, 10,000, 100,000, 500,000 and --jobs. A worker that kept anything
per job (a dict of settled ids, a growing log buffer, a leaked cursor) would grow with the count;
a flat line is what a long-running worker needs. The monitor's resident size over a million jobs
is bench/supervise.py's (each of its passes runs in a fresh process that reports its peak).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from bench.common import TABLE, fresh_queues, load_average, raw_connection, settle_table, source_revision  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.worker.registry import Registration  # noqa: E402
from django_pgboss.worker.runner import Worker  # noqa: E402

QUEUE = "bench_memory"


def noop(job: Any) -> None:
    return None


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def drain(jobs: int, batch_size: int, results: Any) -> None:
    worker = Worker(
        [Registration(QUEUE, noop, concurrency=4, batch_size=batch_size, polling_interval_seconds=0.5)],
        burst=True,
    )
    marks = [m for m in (1_000, 10_000, 100_000, 500_000) if m < jobs] + [jobs]
    seen: list[tuple[int, float, int, float]] = []
    started = time.monotonic()
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            rss = rss_bytes()
            peak = max(peak, rss)
            settled = worker.stats.completed + worker.stats.failed
            while marks and settled >= marks[0]:
                elapsed = time.monotonic() - started
                seen.append((marks.pop(0), elapsed, rss, settled / elapsed))
                print(
                    f"  {seen[-1][0]:>9,} jobs settled: RSS {rss / 2**20:.1f} MiB, {seen[-1][3]:,.0f} jobs/s so far",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(0.05)

    before = rss_bytes()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stats = worker.run()
    time.sleep(0.2)
    done.set()
    sampler.join()
    results.put((before, seen, peak, stats.completed, stats.failed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    admin = raw_connection()
    boss = Boss()
    fresh_queues(boss, QUEUE)
    started = time.perf_counter()
    admin.execute(
        f"INSERT INTO {TABLE} (name, data) SELECT %s, jsonb_build_object('i', i) FROM generate_series(1, %s) AS i",
        (QUEUE, args.jobs),
    )
    settle_table(admin)
    print(f"filled {args.jobs:,} jobs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=drain, args=(args.jobs, args.batch_size, results))
    child.start()
    before, seen, peak, completed, failed = results.get()
    child.join()
    boss.delete_queue(QUEUE)
    print(f"django_pgboss at {source_revision()}; load average {load_average()}")
    print(
        f"worker, concurrency 4, batch size {args.batch_size}, no-op handler: {completed:,} completed, "
        f"{failed} failed; RSS {before / 2**20:.1f} MiB after Django's set-up, before the worker ran"
    )
    print()
    print("| jobs settled | RSS (MiB) | seconds | jobs/s so far |")
    print("|--:|--:|--:|--:|")
    for mark, elapsed, rss, rate in seen:
        print(f"| {mark:,} | {rss / 2**20:.1f} | {elapsed:.0f} | {rate:,.0f} |")
    print(f"\npeak RSS sampled: {peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
