"""Memory benchmark: a worker's resident size while it drains a million jobs.

    PGBOSS_BENCH_PORT=55462 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55462/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/memory.py [--jobs 1000000] [--batch-size 100]
                                                            [--handler sync|async] [--metrics] [--tracing]

One standard queue gets --jobs jobs from one INSERT ... SELECT FROM generate_series (then VACUUM
ANALYZE and CHECKPOINT); a fresh process then runs Worker([Registration(queue, no-op,
concurrency=4, batch_size=--batch-size)], burst=True) until the queue is empty, while a thread of
that process reads its resident set size (/proc/self/statm) every 50 ms and prints it as the
completed count passes 1,000, 10,000, 100,000, 500,000 and --jobs. A worker that kept anything
per job (a dict of settled ids, a growing log buffer, a leaked cursor) would grow with the count;
a flat line is what a long-running worker needs. The monitor's resident size over a million jobs
is bench/supervise.py's (each of its passes runs in a fresh process that reports its peak, and a
long-lived Monitor runs several full passes in one process).

The same drain with a capability on, so what it keeps per job would show too:

  --handler async  the handler is an ``async def``, run on the worker's event loop
  --metrics        WorkerMetrics().connect() as the worker's instruments (the [metrics] extra), as
                   ``pgboss_work --metrics-port`` sets them up, without the port
  --tracing        OpenTelemetry's SDK TracerProvider, always-on sampling, every span recorded into
                   a BatchSpanProcessor whose exporter drops them (the SDK, beyond the [otel]
                   extra's API), as bench/peersapp's PEERS_TRACING does
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
from django_pgboss.worker import Worker  # noqa: E402
from django_pgboss.worker.registry import Registration  # noqa: E402

QUEUE = "bench_memory"


def noop(job: Any) -> None:
    return None


async def noop_async(job: Any) -> None:
    return None


def capabilities(metrics: bool, tracing: bool) -> Any:
    """Switch the asked-for capabilities on in this process; returns the Worker's instruments."""
    if tracing:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON

        class Dropping(SpanExporter):
            """Takes every finished span and keeps none: the SDK's work without an exporter's I/O."""

            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider(sampler=ALWAYS_ON)
        provider.add_span_processor(BatchSpanProcessor(Dropping()))
        trace.set_tracer_provider(provider)
    if not metrics:
        return None
    from django_pgboss.observability.metrics import WorkerMetrics

    return WorkerMetrics().connect()


def describe(handler: str, metrics: bool, tracing: bool) -> str:
    on = [name for name, flag in (("metrics", metrics), ("tracing", tracing)) if flag]
    return f"{'async no-op' if handler == 'async' else 'no-op'} handler" + (
        f", {' and '.join(on)} on" if on else ""
    )


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def drain(jobs: int, batch_size: int, handler: str, metrics: bool, tracing: bool, results: Any) -> None:
    instruments = capabilities(metrics, tracing)
    function = noop_async if handler == "async" else noop
    worker = Worker(
        [Registration(QUEUE, function, concurrency=4, batch_size=batch_size, polling_interval_seconds=0.5)],
        burst=True,
        instruments=instruments,
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
    parser.add_argument("--handler", choices=("sync", "async"), default="sync")
    parser.add_argument("--metrics", action="store_true", help="the worker's Prometheus metrics on")
    parser.add_argument("--tracing", action="store_true", help="an SDK TracerProvider recording every span")
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
    child = ctx.Process(
        target=drain, args=(args.jobs, args.batch_size, args.handler, args.metrics, args.tracing, results)
    )
    child.start()
    before, seen, peak, completed, failed = results.get()
    child.join()
    boss.delete_queue(QUEUE)
    print(f"django_pgboss at {source_revision()}; load average {load_average()}")
    print(
        f"worker, concurrency 4, batch size {args.batch_size}, "
        f"{describe(args.handler, args.metrics, args.tracing)}: {completed:,} completed, "
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
