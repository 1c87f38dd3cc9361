"""The two statements of the worker's drain, on their own: the fetch and the batched completion.

    PGBOSS_BENCH_PORT=55461 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55461/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/drain_statements.py [--jobs 20000] [--batch 50 --batch 500]

For each batch size: a queue of --jobs waiting jobs (filled, vacuumed, analysed, checkpointed), then
the worker's fetch of that many jobs (plans.jobs.fetch_jobs, as Boss.fetch runs it) and the
worker's completion of them with one output each (JobStore.complete_each's statement and
parameters), each timed --repeat times as a prepared statement (psycopg's, on one connection),
every run in a transaction rolled back so each one sees the same table; then EXPLAIN (ANALYZE,
BUFFERS) of each, in a rolled-back transaction too. The completion is measured on jobs the fetch
claimed and committed, which are put back afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

from bench.common import TABLE, fill, fresh_queues, load_average, raw_connection, source_revision
from django_pgboss.api.boss import Boss
from django_pgboss.plans import jobs as job_plans
from django_pgboss.plans import settle as settle_plans

QUEUE = "bench_statements"


def completion_parameters(ids: list[str]) -> dict[str, object]:
    """What JobStore.complete_each() binds for these first attempts, each with a small output."""
    records = ",".join(f'"{job_id}:0":{{"i":{i}}}' for i, job_id in enumerate(ids))
    return {"records": "{" + records + "}", "name": QUEUE, "ids": ids}


def timed(cursor, sql: str, params: dict[str, object], repeat: int) -> list[float]:
    """Milliseconds per run of the prepared statement, each run rolled back."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        cursor.execute(sql, params, prepare=True)
        cursor.fetchall()
        times.append((time.perf_counter() - started) * 1000)
        cursor.connection.rollback()
    return times


def explain(cursor, sql: str, params: dict[str, object]) -> list[str]:
    cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
    lines = [row[0] for row in cursor.fetchall()]
    cursor.connection.rollback()
    # An id array in a plan is a line of a few thousand characters; its start says what it is.
    return [line if len(line) < 200 else line[:200] + " ..." for line in lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="waiting jobs (default 20000)")
    parser.add_argument("--batch", type=int, action="append", help="batch size (default 50 and 500)")
    parser.add_argument("--repeat", type=int, default=15, help="timed runs of each statement (default 15)")
    args = parser.parse_args()
    boss = Boss()
    fresh_queues(boss, QUEUE)
    admin = raw_connection()
    fill(admin, QUEUE, args.jobs)
    conn = raw_connection()
    conn.autocommit = False
    cursor = conn.cursor()
    fetch = job_plans.fetch_jobs("pgboss", "job_common", policy="standard")
    complete = settle_plans.complete_jobs_with_outputs("pgboss", "job_common")
    print(f"django_pgboss at {source_revision()}; {args.jobs} waiting jobs; load average {load_average()}")
    for batch in args.batch or [50, 500]:
        fetched = timed(cursor, fetch, {"name": QUEUE, "batch_size": batch}, args.repeat)
        cursor.execute(fetch, {"name": QUEUE, "batch_size": batch})
        ids = [str(row[0]) for row in cursor.fetchall()]
        conn.commit()
        params = completion_parameters(ids)
        completed = timed(cursor, complete, params, args.repeat)
        for label, times in (("fetch", fetched), ("completion", completed)):
            median = statistics.median(times)
            print(
                f"batch {batch}: {label} median {median:.2f} ms (min {min(times):.2f}), "
                f"{median / batch * 1000:.1f} us a job, prepared, {args.repeat} runs"
            )
        print(f"\nEXPLAIN (ANALYZE, BUFFERS), fetch of {batch}:")
        print("\n".join(explain(cursor, fetch, {"name": QUEUE, "batch_size": batch})))
        print(f"\nEXPLAIN (ANALYZE, BUFFERS), completion of {batch}:")
        print("\n".join(explain(cursor, complete, params)))
        print()
        admin.execute(
            f"UPDATE {TABLE} SET state = 'created', started_on = NULL, heartbeat_on = NULL "
            "WHERE name = %s AND state = 'active'",
            (QUEUE,),
        )
    conn.close()
    boss.delete_queue(QUEUE)


if __name__ == "__main__":
    main()
