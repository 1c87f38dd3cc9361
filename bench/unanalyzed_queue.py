"""A queue the table's statistics do not know yet: one claim of --batch and its completion, timed.

    DATABASE_URL=postgres://postgres@127.0.0.1:55461/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/unanalyzed_queue.py [--jobs 20000 --jobs 100000]

For each --jobs, job_common is emptied, given 10,000 jobs of another queue and analyzed; then a new
queue gets --jobs waiting jobs, and the table is not analyzed again (autovacuum is switched off for
job_common during the run, and switched back on after). That is a queue created, or filled, since
the last ANALYZE: its name is missing from the statistics, and PostgreSQL expects a row or so of it.

Four variants then claim --batch jobs and complete them, --repeats times, alternating, the order
rotated every repeat, each statement planned with its values (prepare=False, as Django's
client-side binding runs them):

  ceiling        the peers bench's plain claim and completion, on its own table (bench/peers.py),
                 with the same two queues in it
  django_pgboss  plans.jobs.fetch_jobs and plans.settle.complete_jobs as they are now
  before         the same two with the queue's name compared as the parameter itself (what they
                 were before plans.fragments.queue_jobs)
  pg-boss        pg-boss 12.35.0's own fetchNextJob and completeJobs text, read from its plans module

It prints each variant's median claim and completion in milliseconds, their sum's ratio to the
ceiling's, and the rows the claim's and completion's scans of the job table visited (one EXPLAIN
ANALYZE of each, rolled back); then ANALYZE runs and the same is measured once more.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers_settings")

import django

django.setup()

from bench.common import FILL_BATCH, TABLE, load_average, raw_connection, server_facts, source_revision  # noqa: E402
from bench.peers import CEILING_CLAIM, CEILING_COMPLETE, CEILING_DDL  # noqa: E402
from bench.pgboss_plans import complete_jobs_sql, fetch_next_job_sql  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.plans import jobs as job_plans  # noqa: E402
from django_pgboss.plans import settle as settle_plans  # noqa: E402
from django_pgboss.plans.fragments import UNSEEN_QUEUE_NAME  # noqa: E402

KNOWN, FRESH = "bench_known", "bench_unanalyzed"
KNOWN_JOBS = 10_000
SCHEMA = '"pgboss"'


def statements(batch: int) -> dict[str, tuple[str, str]]:
    """Each variant's (claim, completion) SQL, with named parameters name, batch_size, ids, output."""
    claim = job_plans.fetch_jobs(SCHEMA, "job_common", policy="standard")
    complete = settle_plans.complete_jobs(SCHEMA, "job_common", fenced=False)
    assert UNSEEN_QUEUE_NAME in claim and UNSEEN_QUEUE_NAME in complete
    return {
        "ceiling": (
            CEILING_CLAIM.replace("%s", "%(name)s", 1).replace("%s", "%(batch_size)s", 1),
            CEILING_COMPLETE.replace("%s", "%(ids)s"),
        ),
        "django_pgboss": (claim, complete),
        "before": (
            claim.replace(UNSEEN_QUEUE_NAME, "%(name)s"),
            complete.replace(UNSEEN_QUEUE_NAME, "%(name)s"),
        ),
        "pg-boss": (fetch_next_job_sql("pgboss", FRESH, limit=batch), complete_jobs_sql("pgboss")),
    }


def fill_tables(admin, jobs: int) -> None:
    """10,000 jobs of KNOWN, ANALYZE, then ``jobs`` of FRESH, in job_common and in the ceiling's table."""
    boss = Boss()
    admin.execute(f"TRUNCATE {TABLE}")
    admin.execute("TRUNCATE ceiling.job")
    for name in (KNOWN, FRESH):
        if boss.get_queue(name) is not None:
            boss.delete_queue(name)
        boss.create_queue(name)
    for start in range(0, KNOWN_JOBS, FILL_BATCH):
        boss.insert(KNOWN, [{"data": {"i": i}} for i in range(start, min(start + FILL_BATCH, KNOWN_JOBS))])
    ceiling_fill = "INSERT INTO ceiling.job (q, data) SELECT %s, jsonb_build_object('i', i) FROM generate_series(0, %s - 1) i"
    admin.execute(ceiling_fill, (KNOWN, KNOWN_JOBS))
    admin.execute(f"VACUUM ANALYZE {TABLE}")
    admin.execute("VACUUM ANALYZE ceiling.job")
    for start in range(0, jobs, FILL_BATCH):
        boss.insert(FRESH, [{"data": {"i": i}} for i in range(start, min(start + FILL_BATCH, jobs))])
    admin.execute(ceiling_fill, (FRESH, jobs))
    admin.execute("CHECKPOINT")


def claim_and_complete(conn, claim: str, complete: str, batch: int) -> tuple[float, float, int]:
    """One claim of ``batch`` and the completion of what it claimed: (claim ms, complete ms, jobs)."""
    started = time.perf_counter()
    ids = [row[0] for row in conn.execute(claim, {"name": FRESH, "batch_size": batch}, prepare=False)]
    claimed = time.perf_counter()
    conn.execute(complete, {"name": FRESH, "ids": ids, "output": None}, prepare=False)
    done = time.perf_counter()
    return (claimed - started) * 1e3, (done - claimed) * 1e3, len(ids)


def rows_visited(conn, sql: str, params: dict) -> int:
    """The rows the statement's scans of a job table visited (returned plus filtered out), from one
    EXPLAIN ANALYZE in a transaction that is rolled back."""
    visited = 0

    def walk(node: dict) -> None:
        nonlocal visited
        if node.get("Relation Name") in ("job_common", "job") and "Scan" in node["Node Type"]:
            visited += (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for child in node.get("Plans", []):
            walk(child)

    with conn.transaction(force_rollback=True):
        (plan,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params, prepare=False).fetchone()
    walk((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
    return visited


def measure(conn, variants: dict[str, tuple[str, str]], batch: int, repeats: int) -> dict[str, dict]:
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    order = list(variants)
    for repeat in range(repeats):
        rotated = order[repeat % len(order) :] + order[: repeat % len(order)]
        for name in rotated:
            claim_ms, complete_ms, claimed = claim_and_complete(conn, *variants[name], batch)
            if claimed != batch:
                raise SystemExit(f"{name} claimed {claimed} of {batch}: --jobs is too small for --repeats")
            times[name].append((claim_ms, complete_ms))
    results = {}
    for name, (claim, complete) in variants.items():
        with conn.transaction(force_rollback=True):
            ids = [row[0] for row in conn.execute(claim, {"name": FRESH, "batch_size": batch}, prepare=False)]
        results[name] = {
            "claim": statistics.median(t[0] for t in times[name]),
            "complete": statistics.median(t[1] for t in times[name]),
            "claim rows": rows_visited(conn, claim, {"name": FRESH, "batch_size": batch}),
            "complete rows": rows_visited(conn, complete, {"name": FRESH, "ids": ids, "output": None}),
        }
    return results


def report(title: str, results: dict[str, dict]) -> None:
    ceiling = results["ceiling"]["claim"] + results["ceiling"]["complete"]
    print(f"\n{title}\n")
    print(
        "| variant | claim ms | complete ms | both / ceiling | rows the claim read | rows the completion read |"
    )
    print("|---|--:|--:|--:|--:|--:|")
    for name, r in results.items():
        both = r["claim"] + r["complete"]
        print(
            f"| {name} | {r['claim']:.2f} | {r['complete']:.2f} | {both / ceiling:.0%} "
            f"| {r['claim rows']:,} | {r['complete rows']:,} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, action="append", help="jobs in the new queue (repeatable)")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    sizes = args.jobs or [20_000, 100_000]
    if args.batch < 1 or args.repeats < 1 or min(sizes) < 1:
        parser.error("--jobs, --batch and --repeats must be at least 1")
    if min(sizes) < 2 * args.batch * args.repeats * 4:
        parser.error("--jobs must be at least 8 x --batch x --repeats (two measurements of four variants)")
    admin = raw_connection()
    facts = server_facts(admin)
    print(
        f"django_pgboss at {source_revision()}; PostgreSQL {facts['server_version']}, fsync={facts['fsync']}; batch {args.batch}, {args.repeats} repeats"
    )
    admin.execute(CEILING_DDL)
    variants = statements(args.batch)
    conn = raw_connection()
    try:
        for table in (TABLE, "ceiling.job"):
            admin.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        for jobs in sizes:
            fill_tables(admin, jobs)
            print(f"\n## {jobs:,} jobs in a queue created after the last ANALYZE (load {load_average()})")
            report(
                "Not analyzed since the queue was filled:", measure(conn, variants, args.batch, args.repeats)
            )
            admin.execute(f"ANALYZE {TABLE}")
            admin.execute("ANALYZE ceiling.job")
            report("After ANALYZE:", measure(conn, variants, args.batch, args.repeats))
    finally:
        for table in (TABLE, "ceiling.job"):
            admin.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
        boss = Boss()
        for name in (KNOWN, FRESH):
            if boss.get_queue(name) is not None:
                boss.delete_queue(name)
        admin.execute("TRUNCATE ceiling.job")


if __name__ == "__main__":
    main()
