"""The enqueue statements alone: insert()'s and send()'s, before and after issue 21's changes, and
pg-boss 12.35.0's insert, timed on one connection with the server's CPU per job beside the wall time.

    PGBOSS_BENCH_PORT=55460 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55460/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/enqueue_statements.py [--calls 20] [--sends 2000] \\
        [--rounds 5] [--explain]

Each statement runs prepared (psycopg's automatic preparing, as Boss's cursor does), in autocommit
(each execution its own commit), on a raw psycopg connection, so that only the statement and its
commit differ between the rows; the statements alternate within each round, the order reversed
every other round, each run from an empty, checkpointed job table. The figures are medians over
the rounds: wall time, and the CPU time of the connection's backend process (read from /proc:
the cluster must run on this machine), which a loaded machine moves much less than the wall time.

insert, 1,000 data-only jobs a call (--calls calls a run):
  before: insert_jobs     the general batch statement (a JSON recordset of every option, ON CONFLICT
                          DO NOTHING): what insert() ran for data-only jobs before 8750dac, and runs
                          still for jobs that name an option
  pg-boss insertJobs      pg-boss 12.35.0's plans.insertJobs() text, from its own module (Node)
  now, in a transaction   insert_data_jobs() with ON CONFLICT, as insert() runs it in the caller's
                          transaction or on a queue with a policy
  now, autocommit         insert_data_jobs() without ON CONFLICT: a standard queue, autocommit
send, one job a call (--sends calls a run):
  before                  insert_job() as it was before 27f0349: gen_random_uuid() and RETURNING id
  now                     insert_job(): the id drawn in Python and bound, the row count read

With --explain, EXPLAIN (ANALYZE, BUFFERS, WAL) of each insert statement once, generic plan, in a
rolled-back transaction (so the deferred foreign-key checks, which fire at commit, are not in it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    TABLE,
    count_jobs,
    fresh_queues,
    load_average,
    raw_connection,
    reset,
    source_revision,
)
from bench.pgboss_plans import insert_jobs_sql
from django_pgboss.api.boss import Boss
from django_pgboss.plans import jobs as job_plans

QUEUE = "bench_statements"
PER_CALL = 1000


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one backend process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    admin, conn, cases: dict[str, Callable[[object, int], None]], calls: int, jobs_per_call: int, rounds: int
) -> dict[str, tuple[float, float]]:
    """Median (wall, backend CPU) in microseconds per job for each case."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    wall: dict[str, list[float]] = {label: [] for label in cases}
    cpu: dict[str, list[float]] = {label: [] for label in cases}
    for index in range(rounds):
        order = list(cases) if index % 2 == 0 else list(reversed(cases))
        for label in order:
            run = cases[label]
            reset(admin)
            cursor = conn.cursor()
            run(cursor, -1)  # prepared from here on
            before_cpu, started = backend_cpu(pid), time.perf_counter()
            for i in range(calls):
                run(cursor, i)
            elapsed = time.perf_counter() - started
            jobs = calls * jobs_per_call
            wall[label].append(elapsed / jobs * 1e6)
            cpu[label].append((backend_cpu(pid) - before_cpu) / jobs * 1e6)
            if count_jobs(admin) != jobs + jobs_per_call:
                raise SystemExit(
                    f"{label}: {count_jobs(admin)} jobs in {TABLE}, expected {jobs + jobs_per_call}"
                )
        print(f"  round {index + 1}/{rounds} done (load {load_average()})", file=sys.stderr, flush=True)
    reset(admin)
    return {label: (statistics.median(wall[label]), statistics.median(cpu[label])) for label in cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="insert calls of 1,000 jobs a run (default 20)")
    parser.add_argument("--sends", type=int, default=2000, help="sends a run (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN (ANALYZE, BUFFERS, WAL) each insert")
    args = parser.parse_args()

    boss = Boss()
    fresh_queues(boss, QUEUE)
    schema = boss.context.quoted_schema
    admin, conn = raw_connection(), raw_connection()
    data = [{"i": i} for i in range(PER_CALL)]
    recordset = json.dumps([{"data": d} for d in data])
    array = json.dumps(data)
    inserts = {
        "before: insert_jobs": (
            job_plans.insert_jobs(schema, "job_common", returning=False),
            {"jobs": recordset, "name": QUEUE},
        ),
        "pg-boss insertJobs": (insert_jobs_sql(schema, QUEUE, return_id=False), {"jobs": recordset}),
        "now, in a transaction": (
            job_plans.insert_data_jobs(schema, "job_common", on_conflict=True, returning=False, notify=False),
            {"data": array, "name": QUEUE},
        ),
        "now, autocommit": (
            job_plans.insert_data_jobs(
                schema, "job_common", on_conflict=False, returning=False, notify=False
            ),
            {"data": array, "name": QUEUE},
        ),
    }

    def insert_case(sql: str, params: dict) -> Callable[[object, int], None]:
        return lambda cursor, i: cursor.execute(sql, params, prepare=True)

    send_now = job_plans.insert_job(schema, "job_common", on_conflict=False, options=False)
    # What insert_job() was before 27f0349: the id drawn by the server and returned.
    send_before = send_now.replace("%(id)s::uuid", "gen_random_uuid()") + "RETURNING id\n"

    def before(cursor, i: int) -> None:
        row = cursor.execute(send_before, {"name": QUEUE, "data": f'{{"i":{i}}}'}, prepare=True).fetchone()
        str(row[0])

    def now(cursor, i: int) -> None:
        job_id = str(uuid.uuid4())
        cursor.execute(send_now, {"name": QUEUE, "id": job_id, "data": f'{{"i":{i}}}'}, prepare=True)
        assert cursor.rowcount == 1

    started_load = load_average()
    insert_figures = measure(
        admin, conn, {k: insert_case(*v) for k, v in inserts.items()}, args.calls, PER_CALL, args.rounds
    )
    send_figures = measure(admin, conn, {"before": before, "now": now}, args.sends, 1, args.rounds)

    print(
        f"django_pgboss at {source_revision()}; load average {started_load} at the start, {load_average()} at the end"
    )
    print(f"{args.rounds} rounds; {args.calls} calls of {PER_CALL} jobs (insert), {args.sends} sends a run")
    print()
    print("| statement | wall us/job | backend CPU us/job |")
    print("|---|--:|--:|")
    for label, (wall, cpu) in insert_figures.items():
        print(f"| insert, {label} | {wall:,.1f} | {cpu:,.1f} |")
    for label, (wall, cpu) in send_figures.items():
        print(f"| send, {label} | {wall:,.0f} | {cpu:,.0f} |")
    if args.explain:
        for label, (sql, params) in inserts.items():
            reset(admin)
            with conn.transaction():
                conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                plan = [row[0] for row in conn.execute("EXPLAIN (ANALYZE, BUFFERS, WAL) " + sql, params)]
                raise psycopg.Rollback()
            print(f"\n{label}:")
            for line in plan:
                print(f"    {line}")
        reset(admin)
    boss.delete_queue(QUEUE)


if __name__ == "__main__":
    main()
