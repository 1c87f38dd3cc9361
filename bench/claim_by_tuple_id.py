"""The claim's UPDATE finding its rows by tuple id, against finding them by primary key, alternated.

plans.jobs.fetch_jobs has the UPDATE reach the rows its candidates' scan locked by their tuple
ids (``j.ctid = ANY(ARRAY(SELECT ctid FROM next))``, a TID scan); before, the candidates' scan
returned their ids and the UPDATE found each row by one descent of the primary key
(``j.name = (SELECT %(name)s::text) AND j.id = ANY(ARRAY(SELECT id FROM next))``). This script
builds the earlier text from today's, fills a queue with --jobs waiting jobs, analyzes the table,
and runs both claims of --batch jobs --repeats times, alternating, each rolled back, on one plain
psycopg connection with prepared statements (the worker's are). It prints each one's median and
best client-seen time, and the UPDATE's scan and execution time from one EXPLAIN ANALYZE of each.

    DATABASE_URL=postgres://postgres@127.0.0.1:55461/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/claim_by_tuple_id.py --jobs 20000 --batch 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers_settings")

from bench.common import SCHEMA, fill, load_average, raw_connection, source_revision
from django_pgboss.api.boss import Boss
from django_pgboss.plans.jobs import fetch_jobs

QUEUE = "bench_claim_tid"
BY_TUPLE_ID = "WHERE j.ctid = ANY(ARRAY(SELECT ctid FROM next))"
BY_PRIMARY_KEY = "WHERE j.name = (SELECT %(name)s::text) AND j.id = ANY(ARRAY(SELECT id FROM next))"


def statements() -> dict[str, str]:
    """Today's claim, and the same claim as it found its rows before (by primary key)."""
    today = fetch_jobs(SCHEMA, "job_common", policy="standard")
    if BY_TUPLE_ID not in today:
        raise SystemExit("plans.jobs.fetch_jobs no longer updates by tuple id; this script compares that")
    before = today.replace(BY_TUPLE_ID, BY_PRIMARY_KEY).replace(
        "SELECT j.ctid, j.priority, j.created_on", "SELECT j.id, j.priority, j.created_on"
    )
    return {"by primary key (before)": before, "by tuple id (now)": today}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=31)
    args = parser.parse_args()
    if min(args.jobs, args.batch, args.repeats) < 1 or args.batch > args.jobs:
        parser.error("--jobs, --batch and --repeats must be at least 1, and --batch at most --jobs")
    boss = Boss()
    if boss.get_queue(QUEUE) is not None:
        boss.delete_queue(QUEUE)
    boss.create_queue(QUEUE)
    admin = raw_connection()
    admin.autocommit = True
    fill(admin, QUEUE, args.jobs)
    admin.execute(f"ANALYZE {SCHEMA}.job_common")
    print(
        f"django_pgboss at {source_revision()}; {args.jobs} waiting jobs, claims of {args.batch}, "
        f"{args.repeats} alternated repeats, each rolled back; load {load_average()}"
    )
    conn = raw_connection()
    conn.prepare_threshold = 0
    params = {"name": QUEUE, "batch_size": args.batch}
    claims = statements()
    timings: dict[str, list[float]] = {label: [] for label in claims}
    for _ in range(args.repeats):
        for label, sql in claims.items():
            started = time.perf_counter()
            claimed = conn.execute(sql, params).fetchall()
            timings[label].append(time.perf_counter() - started)
            conn.rollback()
            if len(claimed) != args.batch:
                raise SystemExit(f"{label}: claimed {len(claimed)} jobs, not {args.batch}")
    for label, sql in claims.items():
        plan = [row[0] for row in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()]
        conn.rollback()
        scan = next(line.strip() for line in plan if "on job_common j_1" in line and "Scan" in line)
        update = next(line.strip() for line in plan if line.strip().startswith("->  Update"))
        execution = next(line.strip() for line in plan if line.startswith("Execution Time"))
        print(
            f"{label:<24} median {statistics.median(timings[label]) * 1000:.2f} ms, "
            f"best {min(timings[label]) * 1000:.2f} ms\n    {update}\n    {scan}\n    {execution}"
        )
    boss.delete_queue(QUEUE)


if __name__ == "__main__":
    main()
