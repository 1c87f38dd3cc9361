"""Enqueue benchmark: Boss.send() and Boss.insert() against their plain-psycopg ceilings.

    bash bench/cluster.sh start
    .venvs/py3.11-Django__5.2/bin/python bench/enqueue.py [--jobs 5000] [--batch-jobs 100000]
                                                         [--batch 1000] [--repeat 3]
    bash bench/cluster.sh stop

Every scenario runs in this one process, on the same durable cluster, one after the other within
each repeat (so a drift of the machine during the run hits all of them alike), and each run starts
from the same state: an empty job table, just checkpointed. The figures reported are the median of
the repeats, with the best beside it.

Scenarios:
  send          boss.send(queue, {"i": i}), one job per call, each its own transaction (autocommit)
  plain send    the ceiling for send: a raw psycopg connection (autocommit) doing the simplest
                insert the schema allows, INSERT INTO pgboss.job_common (name, data) VALUES
                (%s, %s), once per job, on the same table and indexes
  insert        boss.insert(queue, [...]) in batches of --batch jobs, one transaction per batch
  plain insert  the ceiling for insert: one plain statement per batch, in three ways (a single
                INSERT ... SELECT FROM unnest(jsonb[]), a single multi-row INSERT ... VALUES, and
                executemany in pipeline mode inside one transaction); the fastest is the ceiling
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

# Run as `python bench/enqueue.py`, Python puts bench/ on sys.path, not the repository root that
# holds both django_pgboss and bench.settings.
REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from bench.common import (  # noqa: E402
    SCHEMA,
    TABLE,
    alternate,
    count_jobs,
    fresh_queues,
    memory_total,
    raw_connection,
    reset,
    server_facts,
    source_revision,
)
from django_pgboss.api.boss import Boss  # noqa: E402

# The helpers moved to bench/common.py; these names stay importable from here for scripts written
# against the old place.
__all__ = ["SCHEMA", "TABLE", "count_jobs", "raw_connection", "reset", "server_facts", "source_revision"]

QUEUE = "bench"
SINGLE_SQL = f"INSERT INTO {TABLE} (name, data) VALUES (%s, %s)"
UNNEST_SQL = f"INSERT INTO {TABLE} (name, data) SELECT %s, d FROM unnest(%s::jsonb[]) AS d"


# -- the scenarios: each takes the number of jobs (and the batch size) and inserts them ----------


def boss_send(jobs: int, batch: int) -> None:
    # A fresh Boss per run, so the run pays its one queue lookup (cached per instance) like a new
    # process would; that is one extra round trip in thousands.
    boss = Boss()
    for i in range(jobs):
        boss.send(QUEUE, {"i": i})


def plain_send(conn: psycopg.Connection) -> Callable[[int, int], None]:
    def run(jobs: int, batch: int) -> None:
        cur = conn.cursor()
        for i in range(jobs):
            cur.execute(SINGLE_SQL, (QUEUE, Jsonb({"i": i})))

    return run


def boss_insert(jobs: int, batch: int) -> None:
    boss = Boss()
    for start in range(0, jobs, batch):
        boss.insert(QUEUE, [{"data": {"i": i}} for i in range(start, min(start + batch, jobs))])


def plain_unnest(conn: psycopg.Connection) -> Callable[[int, int], None]:
    def run(jobs: int, batch: int) -> None:
        cur = conn.cursor()
        for start in range(0, jobs, batch):
            data = [Jsonb({"i": i}) for i in range(start, min(start + batch, jobs))]
            cur.execute(UNNEST_SQL, (QUEUE, data))

    return run


def plain_values(conn: psycopg.Connection) -> Callable[[int, int], None]:
    # One statement text per batch size (the last batch may be shorter), so psycopg can prepare it.
    statements: dict[int, str] = {}

    def run(jobs: int, batch: int) -> None:
        cur = conn.cursor()
        for start in range(0, jobs, batch):
            stop = min(start + batch, jobs)
            n = stop - start
            if n not in statements:
                statements[n] = f"INSERT INTO {TABLE} (name, data) VALUES " + ",".join(["(%s, %s)"] * n)
            params: list[object] = []
            for i in range(start, stop):
                params += (QUEUE, Jsonb({"i": i}))
            cur.execute(statements[n], params)

    return run


def plain_executemany(conn: psycopg.Connection) -> Callable[[int, int], None]:
    def run(jobs: int, batch: int) -> None:
        cur = conn.cursor()
        for start in range(0, jobs, batch):
            # One transaction per batch, as one INSERT statement would be; psycopg pipelines the
            # statements, so the batch costs one round trip rather than one per row.
            with conn.transaction():
                cur.executemany(
                    SINGLE_SQL, [(QUEUE, Jsonb({"i": i})) for i in range(start, min(start + batch, jobs))]
                )

    return run


# -- running and reporting -----------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per single-send run (default 5000)")
    parser.add_argument(
        "--batch-jobs", type=int, default=100_000, help="jobs per batched-insert run (default 100000)"
    )
    parser.add_argument("--batch", type=int, default=1000, help="jobs per batch (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each scenario (default 3)")
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    bench_conn = raw_connection()
    boss = Boss()
    fresh_queues(boss, QUEUE)

    # (label, kind, jobs per run, function); kind groups each Boss scenario with its ceilings.
    scenarios = [
        ("boss.send", "send", args.jobs, boss_send),
        ("plain send (INSERT ... VALUES, 1 row)", "send-ceiling", args.jobs, plain_send(bench_conn)),
        ("boss.insert", "insert", args.batch_jobs, boss_insert),
        ("plain insert: unnest(jsonb[])", "insert-ceiling", args.batch_jobs, plain_unnest(bench_conn)),
        ("plain insert: multi-row VALUES", "insert-ceiling", args.batch_jobs, plain_values(bench_conn)),
        (
            "plain insert: executemany, pipeline",
            "insert-ceiling",
            args.batch_jobs,
            plain_executemany(bench_conn),
        ),
    ]
    seconds = alternate(
        admin,
        [(label, jobs, lambda n, run=run: run(n, args.batch)) for label, _kind, jobs, run in scenarios],
        args.repeat,
    )
    boss.delete_queue(QUEUE)

    facts = server_facts(admin)
    print(f"django_pgboss at {source_revision()}")
    print(
        f"PostgreSQL {facts['server_version']} on 127.0.0.1 (TCP); fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']} full_page_writes={facts['full_page_writes']} "
        f"wal_sync_method={facts['wal_sync_method']} shared_buffers={facts['shared_buffers']} "
        f"max_wal_size={facts['max_wal_size']}"
    )
    print(
        f"Python {platform.python_version()}, Django {django.get_version()}, psycopg {psycopg.__version__} "
        f"({psycopg.pq.__impl__}); {os.cpu_count()} CPUs, {memory_total()}; batch {args.batch}, "
        f"median (best) of {args.repeat} runs"
    )
    print()
    print(f"| {'scenario':<40} | {'jobs':>7} | {'seconds':>7} | {'jobs/s':>8} | {'best jobs/s':>11} |")
    print(f"|{'-' * 42}|{'-' * 8}:|{'-' * 8}:|{'-' * 9}:|{'-' * 12}:|")
    median_rate: dict[str, float] = {}
    best_rate: dict[str, float] = {}
    for label, _kind, jobs, _run in scenarios:
        median_s = statistics.median(seconds[label])
        median_rate[label] = jobs / median_s
        best_rate[label] = jobs / min(seconds[label])
        print(
            f"| {label:<40} | {jobs:>7} | {median_s:>7.2f} | {median_rate[label]:>8,.0f} | {best_rate[label]:>11,.0f} |"
        )
    print()
    for kind, target in (("send", 0.70), ("insert", 0.60)):
        (boss_label,) = [label for label, k, *_ in scenarios if k == kind]
        ceilings = [label for label, k, *_ in scenarios if k == f"{kind}-ceiling"]
        ceiling = max(ceilings, key=median_rate.__getitem__)
        ratio = median_rate[boss_label] / median_rate[ceiling]
        best_ratio = best_rate[boss_label] / max(best_rate[c] for c in ceilings)
        verdict = "met" if ratio >= target else "NOT met"
        print(
            f"{boss_label} / ceiling ({ceiling}): {ratio:.0%} of median, {best_ratio:.0%} of best; "
            f"target >= {target:.0%}: {verdict}"
        )


if __name__ == "__main__":
    main()
