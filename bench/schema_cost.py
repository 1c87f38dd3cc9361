"""Schema cost benchmark: what schema 46's five new job indexes (job_i13 to job_i17) cost a send and
an insert, against the same calls on the same table without them, alternated in one run.

    PGBOSS_BENCH_PORT=55469 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55469/pgboss_bench \\
        .venvs/py3.11-Django__5.2__5.3/bin/python bench/schema_cost.py [--sends 3000] [--jobs 50000] [--rounds 5]
    PGBOSS_BENCH_PORT=55469 bash bench/cluster.sh stop

Each round runs both tables, the order swapped from one round to the next: job_common emptied,
with its five indexes of schema 46 (job_i13 to job_i17, built anew on the empty table) or without
them (dropped: job_common as schema 45's migration found it, every other index and column of 46
kept, so the same code runs on both), then checkpointed; then ``boss.send()`` --sends times (one
job a commit) and ``boss.insert()`` of --jobs jobs in calls of 1,000, timed around the loops in
this process, with the WAL each writes (pg_current_wal_insert_lsn() before and after). The figures
are the medians over the rounds of each table, and the median of the per-round ratio. The indexes
are put back at the end.
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


#: Schema 46's new job indexes on job_common, as create_queue() builds them on a new table.
NEW_INDEXES = {
    "job_common_i13": "CREATE UNIQUE INDEX job_common_i13 ON {s}.job_common (name, singleton_key) "
    "WHERE state = 'created' AND upsert_by_key",
    "job_common_i14": "CREATE INDEX job_common_i14 ON {s}.job_common (name, state, blocked, start_after) "
    "WHERE state IN ('created', 'retry', 'active', 'failed')",
    "job_common_i15": "CREATE INDEX job_common_i15 ON {s}.job_common (name, created_on)",
    "job_common_i16": "CREATE INDEX job_common_i16 ON {s}.job_common (name, completed_on) WHERE completed_on IS NOT NULL",
    "job_common_i17": "CREATE INDEX job_common_i17 ON {s}.job_common (name, singleton_key, created_on) "
    "WHERE state < 'active' AND singleton_key IS NOT NULL",
}


def with_indexes(admin: psycopg.Connection, present: bool) -> None:
    """An empty job_common with schema 46's new indexes, or without them, checkpointed."""
    admin.execute(f"TRUNCATE {SCHEMA}.job_common")
    for name, ddl in NEW_INDEXES.items():
        admin.execute(f"DROP INDEX IF EXISTS {SCHEMA}.{name}")
        if present:
            admin.execute(ddl.format(s=SCHEMA))
    admin.execute("CHECKPOINT")


def one_round(admin: psycopg.Connection, present: bool, sends: int, jobs: int) -> dict[str, float]:
    with_indexes(admin, present)
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
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
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
        call_command("migrate", "pgboss", verbosity=0)
        boss = Boss()
        if boss.get_queue(QUEUE) is not None:
            boss.delete_queue(QUEUE)
        boss.create_queue(QUEUE)
        connections.close_all()
        try:
            for round_number in range(args.rounds):
                order = (False, True) if round_number % 2 == 0 else (True, False)
                for present in order:
                    results[present].append(one_round(admin, present, args.sends, args.jobs))
        finally:
            with_indexes(admin, True)
            Boss().delete_queue(QUEUE)
    print(
        "| per job | without job_i13 to job_i17 | schema 46 | with / without (median of the rounds' ratios) |"
    )
    print("|---|---|---|---|")
    for key, label, unit in (
        ("send_us", "send, wall", "us"),
        ("send_wal", "send, WAL", "bytes"),
        ("insert_us", "insert (1,000 a call), wall", "us"),
        ("insert_wal", "insert (1,000 a call), WAL", "bytes"),
    ):
        old = statistics.median(r[key] for r in results[False])
        new = statistics.median(r[key] for r in results[True])
        ratio = statistics.median(n[key] / o[key] for o, n in zip(results[False], results[True], strict=True))
        print(f"| {label} | {old:,.1f} {unit} | {new:,.1f} {unit} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
