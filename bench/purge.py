"""Purge benchmark: what delete_queued_jobs() costs on a queue of a million jobs, and how long it
holds its locks, batched against pg-boss's single DELETE.

    PGBOSS_BENCH_PORT=55467 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55467/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/purge.py [--jobs 1000000] [--batch 1000 --batch 5000 ...]
    PGBOSS_BENCH_PORT=55467 bash bench/cluster.sh stop

Each scenario starts from the same state: the queue bench_purge (standard, so in job_common with
every other standard queue) refilled with --jobs created jobs by one INSERT ... SELECT, then
VACUUM ANALYZE and CHECKPOINT. Then the purge runs in this process, in autocommit, while a probe
process edits random jobs of the queue one at a time (``UPDATE ... SET priority = priority`` by
id, the row lock an update(), cancel() or complete() of that job takes) and records how long each
edit waited. Per scenario:

- the purge's wall time and its rows per second;
- the longest statement of the purge, timed around the execute in this process: each statement
  is its own transaction, so this bounds the longest time any row stayed locked (for the single
  DELETE, the whole purge);
- the probe's longest and median wait: what another client touching the queue's rows saw.

Scenarios: ``delete_queued_jobs(batch_size=B)`` for each --batch, and "single DELETE", the
statement pg-boss 12.35's deleteQueuedJobs() runs (``DELETE FROM job WHERE name = $1 AND state <
'active'``), run the same way.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:55467/pgboss_bench")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import SCHEMA, memory_total, raw_connection, server_facts, source_revision  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402

QUEUE = "bench_purge"
FILL_SQL = f"""
INSERT INTO {SCHEMA}.job (name, data, policy, created_on, start_after, keep_until)
SELECT %s, jsonb_build_object('i', i), 'standard', now(), now(), now() + interval '14 days'
FROM generate_series(1, %s) AS i
"""
SINGLE_DELETE_SQL = f"DELETE FROM {SCHEMA}.job_common WHERE name = %s AND state < 'active'"
PROBE_SQL = f"UPDATE {SCHEMA}.job_common SET priority = priority WHERE name = %s AND id = %s"


def probe(ids: list[str], stop: multiprocessing.Event, results: multiprocessing.Queue) -> None:
    """Edit random jobs of the queue one at a time until told to stop; report each wait."""
    waits = []
    with raw_connection() as conn:
        conn.autocommit = True
        rng = random.Random(7)
        while not stop.is_set():
            job_id = rng.choice(ids)
            started = time.perf_counter()
            conn.execute(PROBE_SQL, (QUEUE, job_id))
            waits.append(time.perf_counter() - started)
    results.put(waits)


def fill(admin: psycopg.Connection, jobs: int) -> list[str]:
    admin.execute(f"DELETE FROM {SCHEMA}.job_common WHERE name = %s", (QUEUE,))
    admin.execute(FILL_SQL, (QUEUE, jobs))
    admin.execute(f"VACUUM ANALYZE {SCHEMA}.job_common")
    admin.execute("CHECKPOINT")
    sample = admin.execute(
        f"SELECT id::text FROM {SCHEMA}.job_common TABLESAMPLE SYSTEM (1) WHERE name = %s LIMIT 5000",
        (QUEUE,),
    ).fetchall()
    return [row[0] for row in sample]


def run(admin: psycopg.Connection, jobs: int, batch: int | None) -> dict[str, float]:
    ids = fill(admin, jobs)
    statements: list[float] = []

    def timed(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append(time.perf_counter() - started)

    stop = multiprocessing.Event()
    results: multiprocessing.Queue = multiprocessing.Queue()
    prober = multiprocessing.Process(target=probe, args=(ids, stop, results))
    prober.start()
    time.sleep(1.0)  # the probe connects and warms up before the purge starts
    boss = Boss()
    started = time.perf_counter()
    with connection.execute_wrapper(timed):
        if batch is None:
            with connection.cursor() as cursor:
                cursor.execute(SINGLE_DELETE_SQL, [QUEUE])
                deleted = cursor.rowcount
        else:
            deleted = boss.delete_queued_jobs(QUEUE, batch_size=batch)
    elapsed = time.perf_counter() - started
    stop.set()
    waits = results.get(timeout=60)
    prober.join(timeout=60)
    assert deleted == jobs, (deleted, jobs)
    left = admin.execute(f"SELECT count(*) FROM {SCHEMA}.job_common WHERE name = %s", (QUEUE,)).fetchone()[0]
    assert left == 0, left
    return {
        "seconds": elapsed,
        "rows_per_second": jobs / elapsed,
        "statements": len(statements),
        "longest_statement": max(statements),
        "probe_max": max(waits),
        "probe_median": statistics.median(waits),
        "probe_edits": len(waits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, action="append", help="batch sizes (default 1000, 5000, 20000)")
    args = parser.parse_args()
    batches: list[int | None] = [*(args.batch or [1000, 5000, 20000]), None]
    call_command("migrate", verbosity=0)
    boss = Boss()
    boss.create_queue(QUEUE)
    with raw_connection() as admin:
        admin.autocommit = True
        facts = server_facts(admin)
        print(
            f"# {source_revision()}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{memory_total()}; PostgreSQL {facts['server_version']}, fsync={facts['fsync']}, "
            f"synchronous_commit={facts['synchronous_commit']}, shared_buffers={facts['shared_buffers']}"
        )
        print(f"# {args.jobs} created jobs in one standard queue (job_common)")
        print(
            "| scenario | time | rows/s | statements | longest statement (lock held) | probe wait max | probe wait median |"
        )
        print("|---|---|---|---|---|---|---|")
        for batch in batches:
            result = run(admin, args.jobs, batch)
            name = "single DELETE (pg-boss)" if batch is None else f"delete_queued_jobs(batch_size={batch})"
            print(
                f"| {name} | {result['seconds']:.1f} s | {result['rows_per_second']:,.0f} | "
                f"{result['statements']} | {result['longest_statement'] * 1000:,.0f} ms | "
                f"{result['probe_max'] * 1000:,.0f} ms | {result['probe_median'] * 1000:.2f} ms |",
                flush=True,
            )
    boss.delete_queue(QUEUE)


if __name__ == "__main__":
    main()
