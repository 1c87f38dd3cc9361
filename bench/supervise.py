"""Supervise benchmark: what one monitor pass (boss.supervise()) costs on a full job table.

    bash bench/cluster.sh start
    .venvs/py3.11-Django__5.2/bin/python bench/supervise.py [--jobs 100000 --jobs 1000000]
                                                           [--window 5]
    bash bench/cluster.sh stop

For each --jobs size (default: 100,000, then 1,000,000): 100 queues (bench_sup_000 to 099, every
tenth one partitioned) get --jobs jobs between them from one INSERT ... SELECT FROM generate_series
through the parent table pgboss.job, so each row lands in its queue's partition or in job_common.
Every job takes its queue's settings (policy, retries, expiry, retention), as Boss's inserts do,
and a state mix: 60% completed (completed_on spread over the last hour), 20% created, 10% active
(started_on in the last 5 minutes, so none is past its 15 minute expiry), 10% failed; created_on
is spread over the last hour. Then VACUUM ANALYZE and CHECKPOINT.

1. Pass cost: the wall time of the first pass (every queue due: claims, counts, snapshots,
   true-up, expiry sweeps, retention), then of a pass after clearing the claim stamps
   (monitor_claim_on and monitor_on; maintain_on is left, so retention does not run again),
   median of 3. Then ours (in a fresh process, which reports its resident size) against pg-boss
   12.35.0's supervise() (bench/node/peers.mjs), alternating, three of each, with 10 % of the jobs
   active and again with none active; each pass's sequential scans of job_common and the rows
   they read (pg_stat_user_tables) show which pass read the whole table, and how often. Between
   the two, one Monitor process (what pgboss_monitor runs) does five full rounds of run_once(),
   its resident size sampled: the monitor's memory over the million jobs. With none active, the
   EXPLAIN (ANALYZE, BUFFERS) of each sweep over the 90 standard queues: what running it costs.
2. Worker slowdown: a plain SKIP LOCKED claim + complete loop (bench/drain.py's ceiling, fetch
   size 10, one process) on a queue refilled to 20,000 waiting jobs, for --window seconds alone,
   then for --window seconds while another process runs supervise passes back to back (each
   after clearing the claim stamps, so each one counts); twice, alternating. A window closes
   early if the worker empties its queue (it claims about 5,500 jobs/s alone here).
3. EXPLAIN (ANALYZE, BUFFERS) of the monitor's hot statements, rendered by django_pgboss.plans and
   run with the parameters the monitor passes, in a transaction that is rolled back.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Same bootstrap as bench/drain.py; the spawned processes run it too, as __mp_main__.
REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from bench.common import SCHEMA, TABLE, memory_total, raw_connection, server_facts, source_revision  # noqa: E402
from bench.drain import CLAIM_SQL, COMPLETE_SQL  # noqa: E402
from bench.peers import node, node_version  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.conf import pgboss_settings  # noqa: E402
from django_pgboss.db.identifiers import advisory_lock_key  # noqa: E402
from django_pgboss.monitor.supervisor import CHUNK_SIZE, EXPIRED_OUTPUT, LOGGED_IDS, STALLED_OUTPUT  # noqa: E402
from django_pgboss.plans import maintenance as maintenance_plans  # noqa: E402
from django_pgboss.plans import retention as retention_plans  # noqa: E402
from django_pgboss.plans import stats as stats_plans  # noqa: E402
from django_pgboss.wire import to_json  # noqa: E402

QUEUES = [f"bench_sup_{i:03d}" for i in range(100)]
PARTITIONED = set(QUEUES[::10])
# The worker's queue is standard: it shares job_common, and its chunk, with 90 of the 100 queues.
WORKER_QUEUE = "bench_sup_worker"
WORKER_JOBS = 20_000
FETCH_SIZE = 10
SECOND_PASSES = 3

# Every column a job needs, the queue's settings copied as Boss's insert copies them. The random
# values are drawn in the inner select, once per row; mod(i / 100, 10) picks the state so each
# queue (mod(i, 100)) gets the same mix.
FILL_SQL = f"""
INSERT INTO {SCHEMA}.job (
  name, data, state, retry_limit, retry_count, retry_delay, retry_backoff, retry_delay_max,
  expire_seconds, deletion_seconds, heartbeat_seconds, policy, dead_letter,
  start_after, created_on, started_on, completed_on, keep_until, output
)
SELECT q.name, jsonb_build_object('i', g.i), s.state, q.retry_limit,
  CASE WHEN s.state = 'failed' THEN q.retry_limit WHEN s.state = 'created' THEN 0 ELSE 1 END,
  q.retry_delay, q.retry_backoff, q.retry_delay_max, q.expire_seconds, q.deletion_seconds,
  q.heartbeat_seconds, q.policy, q.dead_letter,
  g.created, g.created,
  CASE
    WHEN s.state = 'active' THEN greatest(g.created, now() - g.r * interval '5 minutes')
    WHEN s.state <> 'created' THEN g.created + (now() - g.created) * g.r / 2
  END,
  CASE WHEN s.state IN ('completed', 'failed') THEN g.created + (now() - g.created) * g.r END,
  g.created + q.retention_seconds * interval '1 second',
  CASE WHEN s.state = 'failed' THEN '{{"value": {{"message": "bench"}}}}'::jsonb END
FROM (
  SELECT i, now() - random() * interval '1 hour' AS created, random() AS r
  FROM generate_series(0, %s - 1) AS i
) g
JOIN {SCHEMA}.queue q ON q.name = 'bench_sup_' || lpad(mod(g.i, 100)::text, 3, '0')
CROSS JOIN LATERAL (
  SELECT (CASE
    WHEN mod(g.i / 100, 10) < 6 THEN 'completed'
    WHEN mod(g.i / 100, 10) < 8 THEN 'created'
    WHEN mod(g.i / 100, 10) = 8 THEN 'active'
    ELSE 'failed'
  END)::{SCHEMA}.job_state AS state
) s
"""
# Makes every queue due again. The backoff is cleared too: a pass whose aggregates pinned their
# snapshot past a tenth of autovacuum_naptime defers the next passes' aggregates, and the figures
# would then time passes that count nothing.
RESET_SQL = [
    f"UPDATE {SCHEMA}.queue SET monitor_claim_on = NULL, monitor_on = NULL",
    f"UPDATE {SCHEMA}.version SET monitor_backoff_on = NULL",
]
# A queue-name array literal in a plan line (client-side binding inlines the parameters).
NAME_ARRAY = re.compile(r"'\{bench_sup_[^}]*\}'")


def delete_bench_queues(boss: Boss) -> None:
    # delete_queue() takes the queue's jobs (and its partition) with it.
    for queue in boss.get_queues():
        if queue.name.startswith("bench_sup_"):
            boss.delete_queue(queue.name)


def load(admin: psycopg.Connection, boss: Boss, jobs: int) -> float:
    """Create the 100 queues and their jobs; returns the seconds the fill took."""
    delete_bench_queues(boss)
    for name in QUEUES:
        boss.create_queue(name, partition=name in PARTITIONED)
    started = time.perf_counter()
    admin.execute(FILL_SQL, (jobs,))
    filled = time.perf_counter() - started
    admin.execute(f"VACUUM ANALYZE {SCHEMA}.job")
    admin.execute("CHECKPOINT")
    return filled


def reset_claims(admin: psycopg.Connection) -> None:
    for sql in RESET_SQL:
        admin.execute(sql)


def pass_in_child(results: Any) -> None:
    """One pass in a fresh process; reports its seconds and the process's RSS before and at peak."""
    import resource

    boss = Boss()
    boss.get_queue(QUEUES[0])  # connected, and Django's and Boss's imports paid, before the pass
    before = rss_bytes()
    seconds, report = timed_pass(boss)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    results.put((seconds, before, peak, describe(report)))


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def job_common_reads(admin: psycopg.Connection) -> tuple[int, int]:
    """job_common's sequential scans and the rows they read, as the statistics system counts them.

    A pass runs in a process of its own (ours and pg-boss's), whose backend reports its counts when
    it exits; the wait lets that exit finish before the counts are read.
    """
    time.sleep(1.0)
    admin.execute("SELECT pg_stat_clear_snapshot()")
    row = admin.execute(
        "SELECT seq_scan, seq_tup_read FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'job_common'",
        (SCHEMA.strip('"'),),
    ).fetchone()
    return row[0], row[1]


def ours_against_pgboss(admin: psycopg.Connection, label: str, rounds: int = 3) -> None:
    """Our pass and pg-boss 12.35.0's supervise() alternately, each after clearing the claims.

    Ours runs in a fresh process so its resident size is the monitor's; pg-boss's in Node
    (bench/node/peers.mjs), timed around the call. Both count every queue (persistQueueStats on).
    """
    ctx = multiprocessing.get_context("spawn")
    ours: list[float] = []
    theirs: list[float] = []
    for round_ in range(rounds):
        for side in ("ours", "pg-boss") if round_ % 2 == 0 else ("pg-boss", "ours"):
            reset_claims(admin)
            scans_before, rows_before = job_common_reads(admin)
            if side == "ours":
                results = ctx.Queue()
                child = ctx.Process(target=pass_in_child, args=(results,))
                child.start()
                seconds, before, peak, what = results.get(timeout=600)
                child.join(timeout=60)
                ours.append(seconds)
                print(
                    f"  {label}: ours {seconds:.2f} s, RSS {before / 2**20:.0f} MiB before the pass, "
                    f"peak {peak / 2**20:.0f} MiB ({what})",
                    file=sys.stderr,
                )
            else:
                outcome = node("supervise", queue="-")
                theirs.append(outcome["seconds"])
                print(
                    f"  {label}: pg-boss {outcome['seconds']:.2f} s, peak RSS {outcome['maxRssBytes'] / 2**20:.0f} MiB",
                    file=sys.stderr,
                )
            scans, rows = job_common_reads(admin)
            whose = "our" if side == "ours" else "pg-boss's"
            print(
                f"  {label}: {whose} pass read job_common in {scans - scans_before} sequential scan(s), "
                f"{rows - rows_before:,} rows",
                file=sys.stderr,
            )
    print(
        f"{label}: django_pgboss pass median {statistics.median(ours):.2f} s "
        f"({', '.join(f'{x:.2f}' for x in ours)}); pg-boss 12.35.0 supervise() median "
        f"{statistics.median(theirs):.2f} s ({', '.join(f'{x:.2f}' for x in theirs)}); "
        f"ratio {statistics.median(ours) / statistics.median(theirs):.2f}"
    )


def monitor_in_child(passes: int, results: Any) -> None:
    """A Monitor (what pgboss_monitor runs: the pass, index health, flows, bam, cron) in one process
    for ``passes`` full rounds (run_once()), every queue due in each, its resident size sampled
    every 50 ms; reports the size before the first round, after each, and the peak."""
    import threading

    from django_pgboss.monitor import Monitor

    monitor = Monitor()
    monitor.context.queue_exists(QUEUES[0])  # connected, the imports paid, before the first round
    with raw_connection() as admin:
        before = rss_bytes()
        peak = before
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, rss_bytes())
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rounds = []
        for _ in range(passes):
            reset_claims(admin)
            started = time.perf_counter()
            report, _cron = monitor.run_once()
            rounds.append((time.perf_counter() - started, rss_bytes(), len(report.counted)))
        done.set()
        sampler.join()
    results.put((before, rounds, max(peak, *(r[1] for r in rounds))))


def long_lived_monitor(label: str, passes: int = 5) -> None:
    """The monitor's resident size over ``passes`` full rounds in one process (issue 21 item 4)."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=monitor_in_child, args=(passes, results))
    child.start()
    before, rounds, peak = results.get(timeout=1800)
    child.join(timeout=60)
    print(
        f"{label}: one Monitor process, {passes} rounds of run_once(): RSS {before / 2**20:.1f} MiB before, "
        f"{', '.join(f'{rss / 2**20:.1f}' for _, rss, _ in rounds)} MiB after each round "
        f"({', '.join(f'{seconds:.1f}' for seconds, _, _ in rounds)} s, "
        f"{', '.join(str(counted) for _, _, counted in rounds)} queues counted); peak {peak / 2**20:.1f} MiB"
    )


def timed_pass(boss: Boss) -> tuple[float, Any]:
    started = time.perf_counter()
    report = boss.supervise()
    return time.perf_counter() - started, report


def describe(report: Any) -> str:
    return (
        f"counted {len(report.counted)}, trued up {report.trued_up}, expired {report.expired}, "
        f"stalled {report.stalled}, maintained {len(report.maintained)}, deleted {report.deleted}, "
        f"aggregate {report.stats_seconds:.2f} s, backoff {report.backoff_seconds}"
    )


# -- worker slowdown: each side runs in its own process --------------------------------------------


def worker_loop(seconds: float, ready: Any, go: Any, results: Any) -> None:
    with raw_connection() as conn:
        cur = conn.cursor()
        ready.release()
        go.wait()
        done = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            ids = [
                row[0]
                for row in cur.execute(CLAIM_SQL, (WORKER_QUEUE, FETCH_SIZE, WORKER_QUEUE), prepare=True)
            ]
            if not ids:
                break
            cur.execute(COMPLETE_SQL, (WORKER_QUEUE, ids), prepare=True)
            done += len(ids)
        results.put(("worker", done, time.perf_counter() - started))


def supervise_loop(ready: Any, go: Any, stop: Any, results: Any) -> None:
    boss = Boss()
    passes = []
    with raw_connection() as admin:
        ready.release()
        go.wait()
        while not stop.is_set():
            reset_claims(admin)
            passes.append(timed_pass(boss)[0])
    results.put(("supervise", passes, None))


def refill_worker_queue(admin: psycopg.Connection) -> None:
    admin.execute(f"DELETE FROM {TABLE} WHERE name = %s", (WORKER_QUEUE,))
    admin.execute(
        f"INSERT INTO {TABLE} (name, data) SELECT %s, jsonb_build_object('i', i) FROM generate_series(1, %s) AS i",
        (WORKER_QUEUE, WORKER_JOBS),
    )
    admin.execute(f"VACUUM ANALYZE {TABLE}")


def worker_window(
    admin: psycopg.Connection, seconds: float, *, with_supervise: bool
) -> tuple[float, float, list[float]]:
    """One window of the worker loop; returns (jobs/s, its seconds, supervise pass seconds).

    The window closes early when the worker empties its queue: the rate is over what it ran.
    """
    refill_worker_queue(admin)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Semaphore(0)
    go = ctx.Event()
    stop = ctx.Event()
    results = ctx.Queue()
    children = [ctx.Process(target=worker_loop, args=(seconds, ready, go, results))]
    if with_supervise:
        children.append(ctx.Process(target=supervise_loop, args=(ready, go, stop, results)))
    for child in children:
        child.start()
    for _ in children:
        if not ready.acquire(timeout=60):
            raise SystemExit("a process did not start within 60 s")
    go.set()
    outcome = {}
    # The worker reports when its window closes; only then is the supervisor told to stop, and it
    # reports after finishing the pass in progress.
    kind, value, elapsed = results.get(timeout=seconds + 120)
    outcome[kind] = (value, elapsed)
    stop.set()
    if with_supervise:
        kind, value, elapsed = results.get(timeout=600)
        outcome[kind] = (value, elapsed)
    for child in children:
        child.join(timeout=60)
        if child.exitcode != 0:
            raise SystemExit(f"a process exited with {child.exitcode}")
    done, elapsed = outcome["worker"]
    return done / elapsed, elapsed, outcome.get("supervise", ([], None))[0]


# -- EXPLAIN ------------------------------------------------------------------------------------------


def explain_hot_statements(admin: psycopg.Connection) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) each hot statement as the monitor renders and parameterises it.

    Through a Django cursor (client-side binding: the planner sees the values, a custom plan, which
    is also what a prepared statement gets for its first five runs); rolled back, so the claims and
    counts leave no trace.
    """
    schema = SCHEMA
    table = "job_common"
    chunk = sorted(set(QUEUES) - PARTITIONED)[:CHUNK_SIZE]
    interval = pgboss_settings.MONITOR_INTERVAL_SECONDS
    statements = [
        (
            "claim_due_queues (monitor_claim_on)",
            stats_plans.claim_due_queues(schema, "monitor_claim_on", fallback="monitor_on"),
            {"names": chunk, "seconds": interval},
        ),
        (
            "cache_queue_stats (throughput on), job_common",
            stats_plans.cache_queue_stats(schema, table, throughput=True),
            {
                "names": chunk,
                "lock_key": advisory_lock_key(schema, "queue-stats"),
                "reset_max": stats_plans.reset_max_seconds(interval),
            },
        ),
        (
            "fail_expired_jobs, job_common",
            maintenance_plans.fail_expired_jobs(schema, table),
            {"output": to_json(EXPIRED_OUTPUT, "output"), "names": chunk, "tally_ids": LOGGED_IDS},
        ),
        (
            "deletion_batch (the first of one queue's retention walk), job_common",
            retention_plans.deletion_batch(schema, table, after=False),
            {
                "name": chunk[0],
                "edge_offset": retention_plans.DELETION_BATCH_SIZE - 1,
                "retained_before": dt.datetime.now(dt.UTC) - dt.timedelta(seconds=10),
            },
        ),
    ]
    reset_claims(admin)
    for label, sql, params in statements:
        print(f"\n-- {label}, {len(chunk)} queues")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            for (line,) in cursor.fetchall():
                # The chunk's names, spelled out in each filter, would drown the plan.
                print(NAME_ARRAY.sub(f"'{{<{len(chunk)} names>}}'", line))
            transaction.set_rollback(True)


def explain_sweeps(admin: psycopg.Connection) -> None:
    """EXPLAIN of each sweep over the 90 standard queues with no job active: what a pass that ran
    them (pg-boss's, or ours before the count told it no job was active) pays for nothing."""
    chunk = sorted(set(QUEUES) - PARTITIONED)[:CHUNK_SIZE]
    sweeps = (
        ("fail_expired_jobs", maintenance_plans.fail_expired_jobs, EXPIRED_OUTPUT),
        ("fail_stalled_jobs", maintenance_plans.fail_stalled_jobs, STALLED_OUTPUT),
    )
    for name, plan, output in sweeps:
        print(f"\n-- {name}, job_common, {len(chunk)} queues, no job active")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "EXPLAIN (ANALYZE, BUFFERS) " + plan(SCHEMA, "job_common"),
                {"output": to_json(output, "output"), "names": chunk, "tally_ids": LOGGED_IDS},
            )
            for (line,) in cursor.fetchall():
                print(NAME_ARRAY.sub(f"'{{<{len(chunk)} names>}}'", line))
            transaction.set_rollback(True)


# -- running and reporting ------------------------------------------------------------------------


def run_size(admin: psycopg.Connection, boss: Boss, jobs: int, window: float, skip_worker: bool) -> None:
    filled = load(admin, boss, jobs)
    table_rows = admin.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
    print(f"\n## {jobs:,} jobs in 100 queues (10 partitioned); job_common holds {table_rows:,} rows")
    print(f"fill: {filled:.1f} s ({jobs / filled:,.0f} jobs/s)")

    first, report = timed_pass(boss)
    print(f"first pass: {first:.2f} s ({describe(report)})")
    seconds = []
    for i in range(SECOND_PASSES):
        reset_claims(admin)
        elapsed, report = timed_pass(boss)
        seconds.append(elapsed)
        print(
            f"  pass after clearing the claims, {i + 1}/{SECOND_PASSES}: {elapsed:.2f} s ({describe(report)})",
            file=sys.stderr,
        )
    print(
        f"pass after clearing the claims: median {statistics.median(seconds):.2f} s "
        f"(min {min(seconds):.2f}, max {max(seconds):.2f}) of {SECOND_PASSES}"
    )

    ours_against_pgboss(admin, f"{jobs:,} jobs, 10% active")
    long_lived_monitor(f"{jobs:,} jobs, 10% active")
    # With no job active the sweeps have nothing to find: ours skips them (the count says so),
    # pg-boss's read every row of each chunk for nothing.
    admin.execute(f"UPDATE {SCHEMA}.job SET state = 'completed', completed_on = now() WHERE state = 'active'")
    admin.execute(f"VACUUM ANALYZE {SCHEMA}.job")
    ours_against_pgboss(admin, f"{jobs:,} jobs, none active")
    explain_sweeps(admin)

    if skip_worker:
        return
    boss.create_queue(WORKER_QUEUE)
    for round_ in range(2):
        alone, alone_s, _ = worker_window(admin, window, with_supervise=False)
        beside, beside_s, passes = worker_window(admin, window, with_supervise=True)
        print(
            f"worker (SKIP LOCKED claim + complete, fetch size {FETCH_SIZE}), round {round_ + 1}: "
            f"{alone:,.0f} jobs/s alone ({alone_s:.1f} s), {beside:,.0f} jobs/s beside supervise "
            f"({beside_s:.1f} s, {beside / alone:.0%}); passes: {', '.join(f'{p:.2f}' for p in passes)} s"
        )
    boss.delete_queue(WORKER_QUEUE)

    explain_hot_statements(admin)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs",
        type=int,
        action="append",
        help="jobs in total over the 100 queues (repeatable; default both 100000 and 1000000)",
    )
    parser.add_argument("--window", type=float, default=5.0, help="seconds per worker window (default 5)")
    parser.add_argument(
        "--skip-worker", action="store_true", help="leave out the worker slowdown windows and the EXPLAINs"
    )
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    boss = Boss()
    facts = server_facts(admin)
    print(f"django_pgboss at {source_revision()}; pg-boss 12.35.0 (Node {node_version()})")
    print(
        f"PostgreSQL {facts['server_version']} on 127.0.0.1 (TCP); fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']} shared_buffers={facts['shared_buffers']}"
    )
    print(
        f"Python {platform.python_version()}, Django {django.get_version()}, psycopg {psycopg.__version__} "
        f"({psycopg.pq.__impl__}); {os.cpu_count()} CPUs, {memory_total()}; "
        f"PERSIST_QUEUE_STATS={pgboss_settings.PERSIST_QUEUE_STATS}"
    )
    try:
        for jobs in args.jobs or [100_000, 1_000_000]:
            run_size(admin, boss, jobs, args.window, args.skip_worker)
    finally:
        delete_bench_queues(boss)


if __name__ == "__main__":
    main()
