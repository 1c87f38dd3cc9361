"""Drain benchmark: how fast Worker empties a queue with a no-op handler, against a plain-psycopg ceiling.

    bash bench/cluster.sh start
    .venvs/py3.11-Django__5.2/bin/python bench/drain.py [--jobs 20000] [--processes 4]
                                                       [--repeat 3] [--latency-jobs 200]
    bash bench/cluster.sh stop

For each fetch size (1 and 50), --jobs jobs are queued (boss.insert, batches of 1000), then drained
by --processes processes at once, in two scenarios, all runs alternating within each repeat:

  worker   each process runs Worker([Registration(queue, noop, batch_size=<fetch size>,
           concurrency=4, polling_interval_seconds=0.1)], burst=True) in its main thread
  ceiling  each process loops with a raw psycopg connection (autocommit, prepared statements):
           claim up to <fetch size> jobs with one UPDATE ... FOR UPDATE SKIP LOCKED, complete the
           claimed ids with one UPDATE ... id = ANY(...), until a claim comes back empty

Two more rows explain the fetch size 50 figure and take no part in the verdicts: the worker with
batch=True (one handler call gets the whole claim, so a fetch claims 50 whatever the free slots),
and the ceiling at fetch size 4 (what a fetch of the worker claims at batch_size 50, concurrency 4).

Processes, not threads: 4 fetchers in one interpreter would share one GIL, a different measurement
from 4 worker processes, which is how the worker is deployed. Every process is started and has
imported Django before the clock starts (a spawned interpreter takes about a second to import
Django, which is not drain throughput); each opens its connections after the start, in both
scenarios. The run ends at the last job's completed_on (the database clock, the same machine as
the benchmark's), not when the processes exit: a bursting worker notices the empty queue on a
0.1 s tick and then joins its threads, which says nothing about throughput. Each run checks that
every job was completed and counts the transactions it took (pg_stat_database.xact_commit; all
statements run in autocommit, so one transaction is one statement).

Then the send -> start latency with NOTIFY: a queue created with notify=True, one idle Worker
process (polling_interval_seconds=30, so only a notification can wake it in time) whose handler
returns time.time() as its output; the parent sends --latency-jobs jobs one at a time, 20 ms
apart, each carrying time.time() taken just before boss.send; the latency is start - send.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

# Same bootstrap as bench/enqueue.py; the spawned processes run it too, when they import this
# module as __mp_main__.
REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402

from bench.common import (  # noqa: E402
    TABLE,
    fill,
    fresh_queues,
    join_children,
    last_completed,
    memory_total,
    raw_connection,
    server_facts,
    source_revision,
    start_children,
    transactions,
)
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.worker import Worker  # noqa: E402
from django_pgboss.worker.registry import Registration  # noqa: E402

QUEUE = "bench_drain"
NOTIFY_QUEUE = "bench_notify"
CONCURRENCY = 4
LATENCY_INTERVAL_SECONDS = 0.02
# Standard queues live in job_common, so the ceiling claims from the table the worker claims from.
# `NOT blocked` is not in the ceiling statement: without it the planner cannot use the
# partial fetch index job_i11 (WHERE state < 'active' AND NOT blocked), which Boss.fetch uses, and
# the ceiling would sort the queue on every claim. No job here is blocked, so it claims the same jobs.
CLAIM_SQL = f"""
WITH next AS (
  SELECT id FROM {TABLE}
  WHERE name = %s AND state < 'active' AND NOT blocked AND start_after <= now()
  ORDER BY priority DESC, created_on
  LIMIT %s
  FOR UPDATE SKIP LOCKED
)
UPDATE {TABLE} j SET state = 'active', started_on = now()
FROM next WHERE j.name = %s AND j.id = next.id
RETURNING j.id
"""
COMPLETE_SQL = (
    f"UPDATE {TABLE} SET state = 'completed', completed_on = now() WHERE name = %s AND id = ANY(%s)"
)


def noop(job: Any) -> None:
    return None


def record_start(job: Any) -> dict[str, float]:
    # The output carries the start time back to the parent through the job row itself.
    return {"started": time.time()}


# -- the drain scenarios: each runs in its own process, from `go` until the queue is empty ------


class Scenario(NamedTuple):
    label: str
    fetch_size: int
    target: Callable[[int, Any, Any], None]


def drain_with_worker(fetch_size: int, ready: Any, go: Any) -> None:
    run_worker(fetch_size, ready, go, batch=False)


def drain_with_batch_worker(fetch_size: int, ready: Any, go: Any) -> None:
    run_worker(fetch_size, ready, go, batch=True)


def drain_with_listened_worker(fetch_size: int, ready: Any, go: Any) -> None:
    """The worker with a no-op receiver on every job signal (--signals): what the signals cost when
    someone listens, against the plain worker, which has none (their cost when nobody listens)."""
    from django_pgboss import signals

    def receiver(sender: Any, **kwargs: Any) -> None:
        pass

    for signal in (signals.job_started, signals.job_completed, signals.job_failed, signals.job_dead_lettered):
        signal.connect(receiver, weak=False)
    run_worker(fetch_size, ready, go, batch=False)


def run_worker(fetch_size: int, ready: Any, go: Any, *, batch: bool) -> None:
    registration = Registration(
        QUEUE,
        noop,
        batch_size=fetch_size,
        concurrency=CONCURRENCY,
        polling_interval_seconds=0.1,
        batch=batch,
    )
    worker = Worker([registration], burst=True)
    ready.release()
    go.wait()
    stats = worker.run()
    if stats.failed or stats.lost:
        raise SystemExit(f"worker: {stats.failed} failed, {stats.lost} lost")


def drain_plain(fetch_size: int, ready: Any, go: Any) -> None:
    ready.release()
    go.wait()
    with raw_connection() as conn:
        cur = conn.cursor()
        while True:
            ids = [row[0] for row in cur.execute(CLAIM_SQL, (QUEUE, fetch_size, QUEUE), prepare=True)]
            if not ids:
                return
            cur.execute(COMPLETE_SQL, (QUEUE, ids), prepare=True)


def load(admin: psycopg.Connection, jobs: int) -> None:
    """An empty table, then `jobs` waiting jobs in the drain queue, vacuumed, analysed and
    checkpointed (bench/common.py's fill())."""
    fill(admin, QUEUE, jobs)


def run_drain(
    admin: psycopg.Connection, scenario: Scenario, processes: int, jobs: int
) -> tuple[float, float]:
    """One timed drain; returns (seconds, transactions per job)."""
    load(admin, jobs)
    label = f"{scenario.label}, fetch size {scenario.fetch_size}"
    children, go = start_children(scenario.target, (scenario.fetch_size,), processes, label)
    before = transactions(admin)
    started = time.time()
    go.set()
    join_children(children, label)
    # A backend flushes its statistics as it exits, a moment after its client process has.
    time.sleep(0.2)
    # The parent's own few reads are counted too: noise against tens of thousands of jobs.
    spent = transactions(admin) - before
    last = last_completed(admin, QUEUE, jobs, label)
    return last - started, spent / jobs


# -- send -> start latency ------------------------------------------------------------------------


def idle_worker(stop: Any) -> None:
    worker = Worker(
        [Registration(NOTIFY_QUEUE, record_start, concurrency=CONCURRENCY, polling_interval_seconds=30)]
    )
    threading.Thread(target=lambda: (stop.wait(), worker.stop()), daemon=True).start()
    worker.run()


def measure_latency(admin: psycopg.Connection, sends: int) -> list[float]:
    """Send `sends` jobs 20 ms apart to an idle, listening worker; returns start - send in ms."""
    boss = Boss()
    channel = boss.context.notify_channel()
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    child = ctx.Process(target=idle_worker, args=(stop,))
    child.start()
    deadline = time.monotonic() + 30
    while not admin.execute(
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query = %s",
        (f"LISTEN {channel}",),
    ).fetchone():
        if time.monotonic() > deadline:
            raise SystemExit("the idle worker never listened")
        time.sleep(0.1)
    # Let its fetch loop finish the first (empty) fetch and go to sleep for its 30 s poll.
    time.sleep(1.0)
    first = time.monotonic()
    for i in range(sends):
        time.sleep(max(first + i * LATENCY_INTERVAL_SECONDS - time.monotonic(), 0))
        boss.send(NOTIFY_QUEUE, {"sent": time.time()})
    deadline = time.monotonic() + 30
    while (
        admin.execute(
            f"SELECT count(*) FROM {TABLE} WHERE name = %s AND state = 'completed'", (NOTIFY_QUEUE,)
        ).fetchone()[0]
        < sends
    ):
        if time.monotonic() > deadline:
            raise SystemExit("the idle worker did not complete every job within 30 s")
        time.sleep(0.1)
    stop.set()
    child.join(timeout=60)
    rows = admin.execute(f"SELECT data, output FROM {TABLE} WHERE name = %s", (NOTIFY_QUEUE,)).fetchall()
    return sorted((output["started"] - data["sent"]) * 1000 for data, output in rows)


# -- running and reporting ------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per drain (default 20000)")
    parser.add_argument("--processes", type=int, default=4, help="draining processes (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each scenario (default 3)")
    parser.add_argument("--latency-jobs", type=int, default=200, help="sends for the latency (default 200)")
    parser.add_argument(
        "--signals",
        action="store_true",
        help="only the worker, with and without a receiver on every job signal (django_pgboss.signals)",
    )
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    boss = Boss()
    fresh_queues(boss, QUEUE, NOTIFY_QUEUE, create=[QUEUE])

    scenarios = [
        Scenario("worker", 1, drain_with_worker),
        Scenario("ceiling", 1, drain_plain),
        Scenario("worker", 50, drain_with_worker),
        Scenario("ceiling", 50, drain_plain),
        Scenario("worker, batch=True", 50, drain_with_batch_worker),
        Scenario("ceiling", 4, drain_plain),
    ]
    if args.signals:
        scenarios = [
            Scenario("worker", 1, drain_with_worker),
            Scenario("worker, receivers", 1, drain_with_listened_worker),
            Scenario("worker", 50, drain_with_worker),
            Scenario("worker, receivers", 50, drain_with_listened_worker),
        ]
    seconds: dict[Scenario, list[float]] = {scenario: [] for scenario in scenarios}
    per_job: dict[Scenario, list[float]] = {scenario: [] for scenario in scenarios}
    for repeat in range(args.repeat):
        for scenario in scenarios:
            elapsed, tx = run_drain(admin, scenario, args.processes, args.jobs)
            seconds[scenario].append(elapsed)
            per_job[scenario].append(tx)
            print(
                f"  run {repeat + 1}/{args.repeat} {scenario.label:<18} fetch size {scenario.fetch_size:>2} "
                f"{args.jobs / elapsed:>8,.0f} jobs/s, {tx:.2f} statements/job",
                file=sys.stderr,
            )
    admin.execute(f"TRUNCATE {TABLE}")
    boss.delete_queue(QUEUE)

    latencies: list[float] = []
    if not args.signals:
        boss.create_queue(NOTIFY_QUEUE, notify=True)
        latencies = measure_latency(admin, args.latency_jobs)
        boss.delete_queue(NOTIFY_QUEUE)

    facts = server_facts(admin)
    print(f"django_pgboss at {source_revision()}")
    print(
        f"PostgreSQL {facts['server_version']} on 127.0.0.1 (TCP); fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']} full_page_writes={facts['full_page_writes']}"
    )
    print(
        f"Python {platform.python_version()}, Django {django.get_version()}, psycopg {psycopg.__version__} "
        f"({psycopg.pq.__impl__}); {os.cpu_count()} CPUs, {memory_total()}; {args.processes} processes, "
        f"concurrency {CONCURRENCY}; median (best) of {args.repeat} runs"
    )
    print()
    print(
        f"| {'scenario':<18} | {'fetch size':>10} | {'jobs':>6} | {'seconds':>7} | {'jobs/s':>7} "
        f"| {'best jobs/s':>11} | {'statements/job':>14} |"
    )
    print(f"|{'-' * 20}|{'-' * 11}:|{'-' * 7}:|{'-' * 8}:|{'-' * 8}:|{'-' * 12}:|{'-' * 15}:|")
    median_rate: dict[tuple[str, int], float] = {}
    best_rate: dict[tuple[str, int], float] = {}
    for scenario in scenarios:
        key = (scenario.label, scenario.fetch_size)
        median_s = statistics.median(seconds[scenario])
        median_rate[key] = args.jobs / median_s
        best_rate[key] = args.jobs / min(seconds[scenario])
        print(
            f"| {scenario.label:<18} | {scenario.fetch_size:>10} | {args.jobs:>6} | {median_s:>7.2f} "
            f"| {median_rate[key]:>7,.0f} | {best_rate[key]:>11,.0f} | {statistics.median(per_job[scenario]):>14.2f} |"
        )
    print()
    if args.signals:
        for fetch_size in (1, 50):
            ratio = median_rate[("worker, receivers", fetch_size)] / median_rate[("worker", fetch_size)]
            print(f"worker with receivers / without, fetch size {fetch_size}: {ratio:.0%} of median")
        return
    for fetch_size, target in ((1, 0.60), (50, 0.50)):
        ratio = median_rate[("worker", fetch_size)] / median_rate[("ceiling", fetch_size)]
        best_ratio = best_rate[("worker", fetch_size)] / best_rate[("ceiling", fetch_size)]
        verdict = "met" if ratio >= target else "NOT met"
        print(
            f"worker / ceiling, fetch size {fetch_size}: {ratio:.0%} of median, {best_ratio:.0%} of best; "
            f"target >= {target:.0%}: {verdict}"
        )
    print()
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
    print(
        f"send -> start with NOTIFY ({len(latencies)} sends, {LATENCY_INTERVAL_SECONDS * 1000:.0f} ms apart, "
        f"idle worker polling every 30 s): p50 {statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms, "
        f"max {latencies[-1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
