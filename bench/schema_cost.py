"""Schema cost benchmark: what schema 46's five new job indexes (job_i13 to job_i17) cost a send and
an insert, against the same calls on schema 43, alternated in one run.

    PGBOSS_BENCH_PORT=55469 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55469/pgboss_bench \\
        .venvs/py3.11-Django__5.2__5.3/bin/python bench/schema_cost.py [--sends 3000] [--jobs 50000] [--rounds 5]
    PGBOSS_BENCH_PORT=55469 bash bench/cluster.sh stop

Each round runs both schemas, the order swapped from one round to the next: the schema is put at
43 (``migrate pgboss 0004``) or 46 (``migrate pgboss``), the bench queue made anew, the job table
emptied and checkpointed; then ``boss.send()`` --sends times (one job a commit) and
``boss.insert()`` of --jobs jobs in calls of 1,000, timed around the loops in this process, with
the WAL each writes (pg_current_wal_insert_lsn() before and after). The figures are the medians
over the rounds of each schema, and the median of the per-round ratio 46 / 43.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:55469/pgboss_bench")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402

from bench.common import SCHEMA, memory_total, raw_connection, server_facts, source_revision  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402

QUEUE = "bench_schema_cost"
BATCH = 1000


def wal(admin: psycopg.Connection) -> int:
    return admin.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()[0]


def at_version(admin: psycopg.Connection, version: int) -> None:
    """The schema at ``version`` (43 or 46) with an empty bench queue, checkpointed."""
    boss = Boss()
    if boss.get_queue(QUEUE) is not None:
        boss.delete_queue(QUEUE)
    call_command("migrate", "pgboss", *(["0004"] if version == 43 else []), verbosity=0)
    found = admin.execute(f"SELECT version FROM {SCHEMA}.version").fetchone()[0]
    assert found == version, found
    boss.create_queue(QUEUE)
    connections.close_all()
    admin.execute(f"TRUNCATE {SCHEMA}.job_common")
    admin.execute("CHECKPOINT")


def one_round(admin: psycopg.Connection, version: int, sends: int, jobs: int) -> dict[str, float]:
    at_version(admin, version)
    boss = Boss()
    boss.get_queue(QUEUE)  # the connection is open before the clock starts
    before, started = wal(admin), time.perf_counter()
    for i in range(sends):
        boss.send(QUEUE, {"i": i})
    send_seconds, send_wal = time.perf_counter() - started, wal(admin) - before
    before, started = wal(admin), time.perf_counter()
    for start in range(0, jobs, BATCH):
        boss.insert(QUEUE, [{"data": {"i": i}} for i in range(start, min(start + BATCH, jobs))])
    insert_seconds, insert_wal = time.perf_counter() - started, wal(admin) - before
    connections.close_all()
    return {
        "send_us": send_seconds / sends * 1e6,
        "send_wal": send_wal / sends,
        "insert_us": insert_seconds / jobs * 1e6,
        "insert_wal": insert_wal / jobs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[int, list[dict[str, float]]] = {43: [], 46: []}
    with raw_connection() as admin:
        admin.autocommit = True
        facts = server_facts(admin)
        print(
            f"# {source_revision()}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{memory_total()}; PostgreSQL {facts['server_version']}, fsync={facts['fsync']}, "
            f"synchronous_commit={facts['synchronous_commit']}, shared_buffers={facts['shared_buffers']}"
        )
        print(
            f"# {args.sends:,} sends and {args.jobs:,} inserted jobs a round, {args.rounds} rounds, order swapped"
        )
        for round_number in range(args.rounds):
            order = (43, 46) if round_number % 2 == 0 else (46, 43)
            for version in order:
                results[version].append(one_round(admin, version, args.sends, args.jobs))
        call_command("migrate", "pgboss", verbosity=0)
        Boss().delete_queue(QUEUE)
    print("| per job | schema 43 | schema 46 | 46 / 43 (median of the rounds' ratios) |")
    print("|---|---|---|---|")
    for key, label, unit in (
        ("send_us", "send, wall", "us"),
        ("send_wal", "send, WAL", "bytes"),
        ("insert_us", "insert (1,000 a call), wall", "us"),
        ("insert_wal", "insert (1,000 a call), WAL", "bytes"),
    ):
        old = statistics.median(r[key] for r in results[43])
        new = statistics.median(r[key] for r in results[46])
        ratio = statistics.median(n[key] / o[key] for o, n in zip(results[43], results[46], strict=True))
        print(f"| {label} | {old:,.1f} {unit} | {new:,.1f} {unit} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
