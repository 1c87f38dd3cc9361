"""Drain benchmark of transactional handlers: what ``@work(..., transactional=True)`` costs.

    PGBOSS_BENCH_PORT=55463 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55463/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/transactional.py [--jobs 10000] [--processes 4] [--repeat 3]
    PGBOSS_BENCH_PORT=55463 bash bench/cluster.sh stop

The drain of bench/drain.py (same loading, same 4 spawned processes started before the clock, the
end read from the last completed_on, every job checked completed, statements counted from
pg_stat_database.xact_commit), over one queue, each process running
Worker([Registration(queue, handler, batch_size=50, concurrency=4, polling_interval_seconds=0.1,
transactional=...)], burst=True). The handlers:

  noop    returns None and touches no table
  write   inserts one row (the job's id) into bench_effect through Django's connection: the
          smallest handler for which a transaction means anything

and the worker's mode:

  default          the handler in autocommit, its completion batched by the settler
  transactional    the handler and its completion in one transaction on the handler thread

each under Django's default CONN_MAX_AGE = 0 (the handler thread's connection is closed after
each job, so a handler that uses the database opens one per job) and with CONN_MAX_AGE = 60.

All scenarios alternate within each repeat; the table gives the median of the repeats (best beside
it). Each write run also checks that bench_effect holds exactly one row per job.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

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
from bench.drain import CONCURRENCY, QUEUE  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.worker import Worker  # noqa: E402
from django_pgboss.worker.registry import Registration  # noqa: E402

FETCH_SIZE = 50


def noop(job: Any) -> None:
    return None


def write(job: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO bench_effect (job_id) VALUES (%s)", [job.id])


HANDLERS = {"noop": noop, "write": write}


class Scenario(NamedTuple):
    handler: str
    transactional: bool
    conn_max_age: int

    @property
    def label(self) -> str:
        mode = "transactional" if self.transactional else "default"
        return f"{self.handler}, {mode}" + (
            f", CONN_MAX_AGE={self.conn_max_age}" if self.conn_max_age else ""
        )


def drain(scenario: Scenario, ready: Any, go: Any) -> None:
    from django.conf import settings
    from django.db import connections

    # Every connection a thread opens from here on reads the alias's settings again.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = scenario.conn_max_age
    connections.settings["default"]["CONN_MAX_AGE"] = scenario.conn_max_age
    registration = Registration(
        QUEUE,
        HANDLERS[scenario.handler],
        batch_size=FETCH_SIZE,
        concurrency=CONCURRENCY,
        polling_interval_seconds=0.1,
        transactional=scenario.transactional,
    )
    worker = Worker([registration], burst=True)
    ready.release()
    go.wait()
    stats = worker.run()
    if stats.failed or stats.lost:
        raise SystemExit(f"worker: {stats.failed} failed, {stats.lost} lost")


def run_drain(
    admin: psycopg.Connection, scenario: Scenario, processes: int, jobs: int
) -> tuple[float, float]:
    admin.execute("TRUNCATE bench_effect")
    fill(admin, QUEUE, jobs)
    children, go = start_children(drain, (scenario,), processes, scenario.label)
    before = transactions(admin)
    started = time.time()
    go.set()
    join_children(children, scenario.label)
    time.sleep(0.2)
    spent = transactions(admin) - before
    last = last_completed(admin, QUEUE, jobs, scenario.label)
    if scenario.handler == "write":
        effects, distinct = admin.execute(
            "SELECT count(*), count(DISTINCT job_id) FROM bench_effect"
        ).fetchone()
        if effects != jobs or distinct != jobs:
            raise SystemExit(f"{scenario.label}: {effects} rows ({distinct} distinct) for {jobs} jobs")
    return last - started, spent / jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain (default 10000)")
    parser.add_argument("--processes", type=int, default=4, help="draining processes (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each scenario (default 3)")
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    admin.execute("CREATE TABLE IF NOT EXISTS bench_effect (job_id uuid NOT NULL)")
    boss = Boss()
    fresh_queues(boss, QUEUE)
    scenarios = [
        Scenario(handler, transactional, age)
        for handler in HANDLERS
        for age in (0, 60)
        for transactional in (False, True)
    ]
    seconds: dict[Scenario, list[float]] = {s: [] for s in scenarios}
    per_job: dict[Scenario, list[float]] = {s: [] for s in scenarios}
    for repeat in range(args.repeat):
        for scenario in scenarios:
            elapsed, tx = run_drain(admin, scenario, args.processes, args.jobs)
            seconds[scenario].append(elapsed)
            per_job[scenario].append(tx)
            print(
                f"  run {repeat + 1}/{args.repeat} {scenario.label:<38} {args.jobs / elapsed:>8,.0f} jobs/s, "
                f"{tx:.2f} transactions/job",
                file=sys.stderr,
            )
    admin.execute(f"TRUNCATE {TABLE}")
    admin.execute("DROP TABLE bench_effect")
    boss.delete_queue(QUEUE)

    facts = server_facts(admin)
    print(f"django_pgboss at {source_revision()}")
    print(
        f"PostgreSQL {facts['server_version']} on 127.0.0.1 (TCP); fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']} full_page_writes={facts['full_page_writes']}"
    )
    print(
        f"Python {sys.version.split()[0]}, Django {django.get_version()}, psycopg {psycopg.__version__} "
        f"({psycopg.pq.__impl__}); {os.cpu_count()} CPUs, {memory_total()}; {args.processes} processes, "
        f"concurrency {CONCURRENCY}, fetch size {FETCH_SIZE}; median (best) of {args.repeat} runs"
    )
    print()
    print(
        f"| {'scenario':<38} | {'jobs':>6} | {'seconds':>7} | {'jobs/s':>7} | {'best jobs/s':>11} | {'transactions/job':>16} |"
    )
    print(f"|{'-' * 40}|{'-' * 7}:|{'-' * 8}:|{'-' * 8}:|{'-' * 12}:|{'-' * 17}:|")
    rate: dict[Scenario, float] = {}
    for scenario in scenarios:
        median_s = statistics.median(seconds[scenario])
        rate[scenario] = args.jobs / median_s
        print(
            f"| {scenario.label:<38} | {args.jobs:>6} | {median_s:>7.2f} | {rate[scenario]:>7,.0f} "
            f"| {args.jobs / min(seconds[scenario]):>11,.0f} | {statistics.median(per_job[scenario]):>16.2f} |"
        )
    print()
    for handler in HANDLERS:
        for age in (0, 60):
            ratio = rate[Scenario(handler, True, age)] / rate[Scenario(handler, False, age)]
            print(f"{handler}, CONN_MAX_AGE={age}: transactional at {ratio:.0%} of the default's rate")


if __name__ == "__main__":
    main()
