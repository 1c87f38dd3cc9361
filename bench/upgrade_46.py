"""Upgrade benchmark: a populated schema 43 taken to 46 while a sender and a worker keep going, and
the longest pause either saw.

    PGBOSS_BENCH_PORT=55468 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55468/pgboss_bench \\
        .venvs/py3.11-Django__5.2__5.3/bin/python bench/upgrade_46.py [--jobs 1000000]
    PGBOSS_BENCH_PORT=55468 bash bench/cluster.sh stop

Each scenario starts from the same state: the schema rolled back to 43 (``migrate pgboss 0004``),
``--jobs`` waiting jobs in a standard queue (job_common) and a tenth of that in a queue with a table
of its own, filled by INSERT ... SELECT, then VACUUM ANALYZE and CHECKPOINT. Two probe processes
start: a sender (a send's insert in a loop, to the standard queue) and a worker (a claim of ten
with SKIP LOCKED, then their completion, from the same queue), each recording how long every call
took and when it started (plain statements of the API's shape, since the code running beside a
schema at 43 is the previous release's). Then, timed in this process:

- ``migrate`` (migrations 0005 to 0007): the columns, create_queue() and the bam rows for the
  tables that hold jobs;
- ``bam pass``: the monitor's bam pass building job_i13 to job_i17 on both tables with
  ``CREATE INDEX CONCURRENTLY``, one after another, as ``pgboss_monitor`` does;
- ``inline builds`` (the comparison, a separate scenario): the same indexes built by plain
  ``CREATE INDEX`` in one transaction, as the released steps of migration 0001 from older schemas
  built theirs (they queue them in bam now), which holds a lock that stops every write to each
  table while it builds.

For each phase it prints the wall time, how many sends and fetches completed during it, and the
longest and median call of each: the longest pause a sender or worker saw.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:55468/pgboss_bench")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402

from bench.common import SCHEMA, memory_total, raw_connection, server_facts, source_revision  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.monitor import Monitor  # noqa: E402

QUEUE = "bench_upgrade"
OWN_QUEUE = "bench_upgrade_own"
FILL_SQL = f"""
INSERT INTO {SCHEMA}.job (name, data, policy, created_on, start_after, keep_until)
SELECT %s, jsonb_build_object('i', i), 'standard', now(), now(), now() + interval '14 days'
FROM generate_series(1, %s) AS i
"""
CONCURRENTLY = re.compile(r"\s+CONCURRENTLY\b", re.IGNORECASE)


SEND_SQL = f"""
INSERT INTO {SCHEMA}.job_common (name, data, policy, start_after, keep_until)
VALUES (%s, '{{"by": "probe"}}', 'standard', now(), now() + interval '14 days')
"""
CLAIM_SQL = f"""
WITH next AS (
  SELECT id FROM {SCHEMA}.job_common
  WHERE name = %s AND state < 'active' AND NOT blocked AND start_after < now()
  ORDER BY priority DESC, created_on LIMIT 10 FOR UPDATE SKIP LOCKED
)
UPDATE {SCHEMA}.job_common j SET state = 'active', started_on = now(), retry_count = retry_count + 1
FROM next WHERE j.name = %s AND j.id = next.id
RETURNING j.id
"""
COMPLETE_SQL = f"UPDATE {SCHEMA}.job_common SET state = 'completed', completed_on = now() WHERE name = %s AND id = ANY(%s)"


def probe(kind: str, stop, results) -> None:
    """Send to QUEUE ("send"), or claim ten of its jobs and complete them ("fetch"), until told to
    stop; report (start, seconds) of every call, and every error a call raised (the probe goes on,
    as a worker would).

    The probes are plain psycopg statements of the shape pg-boss's send, fetch and complete take
    (the same rows, indexes and locks), because they must run on both schemas: at 43 the running
    code is the previous release's, whose statements are not this checkout's.
    """
    calls, errors = [], []
    with raw_connection() as conn:
        conn.autocommit = True
        while not stop.is_set():
            started = time.time()
            try:
                if kind == "send":
                    conn.execute(SEND_SQL, (QUEUE,))
                else:
                    ids = [row[0] for row in conn.execute(CLAIM_SQL, (QUEUE, QUEUE)).fetchall()]
                    conn.execute(COMPLETE_SQL, (QUEUE, ids))
            except psycopg.Error as exc:
                errors.append(f"{type(exc).__name__}: {exc}".splitlines()[0])
            calls.append((started, time.time() - started))
    results.put((kind, calls, errors))


def prepare(admin: psycopg.Connection, jobs: int) -> None:
    """Schema 43 with ``jobs`` waiting jobs in QUEUE and a tenth of that in OWN_QUEUE."""
    call_command("migrate", "pgboss", verbosity=0)
    boss = Boss()
    for name in (QUEUE, OWN_QUEUE):
        if boss.get_queue(name) is not None:
            boss.delete_queue(name)
    call_command("migrate", "pgboss", "0004", verbosity=0)
    connections.close_all()
    # Schema 43's own create_queue(): this checkout's API reads schema 46's columns.
    admin.execute(f"SELECT {SCHEMA}.create_queue(%s, %s::jsonb)", (QUEUE, '{"policy": "standard"}'))
    admin.execute(
        f"SELECT {SCHEMA}.create_queue(%s, %s::jsonb)",
        (OWN_QUEUE, '{"policy": "standard", "partition": true}'),
    )
    admin.execute(FILL_SQL, (QUEUE, jobs))
    admin.execute(FILL_SQL, (OWN_QUEUE, max(jobs // 10, 1)))
    admin.execute(f"VACUUM ANALYZE {SCHEMA}.job")
    admin.execute("CHECKPOINT")


def inline_builds(admin: psycopg.Connection) -> None:
    """The bam commands run without CONCURRENTLY, all in one transaction (the comparison)."""
    commands = [
        row[0]
        for row in admin.execute(
            f"SELECT command FROM {SCHEMA}.bam WHERE status = 'pending' ORDER BY created_on"
        ).fetchall()
    ]
    with admin.transaction():
        for command in commands:
            admin.execute(CONCURRENTLY.sub("", command))
        admin.execute(
            f"UPDATE {SCHEMA}.bam SET status = 'completed', completed_on = now() WHERE status = 'pending'"
        )


def phase_figures(calls: list[tuple[float, float]], start: float, end: float) -> tuple[int, float, float]:
    """How many calls ended in [start, end], the longest call that overlapped it, and the median."""
    during = [seconds for began, seconds in calls if began < end and began + seconds > start]
    if not during:
        return 0, 0.0, 0.0
    return len(during), max(during), statistics.median(during)


def run(admin: psycopg.Connection, jobs: int, inline: bool) -> list[tuple[str, float, float, dict]]:
    prepare(admin, jobs)
    stop = multiprocessing.Event()
    results: multiprocessing.Queue = multiprocessing.Queue()
    probes = [multiprocessing.Process(target=probe, args=(kind, stop, results)) for kind in ("send", "fetch")]
    for child in probes:
        child.start()
    time.sleep(2.0)  # both probes connect and warm up first
    phases = []
    started = time.time()
    call_command("migrate", "pgboss", verbosity=0)
    phases.append(("migrate (0005 to 0007)", started, time.time()))
    started = time.time()
    if inline:
        inline_builds(admin)
        phases.append(("inline builds (CREATE INDEX, one transaction)", started, time.time()))
    else:
        report = Monitor(cron=False).build_indexes(gated=False)
        assert not report.failed, report.failed
        phases.append((f"bam pass ({len(report.completed)} CONCURRENTLY builds)", started, time.time()))
    time.sleep(1.0)
    stop.set()
    reports = [results.get(timeout=120) for _ in probes]
    for child in probes:
        child.join(timeout=60)
    calls = {kind: made for kind, made, _ in reports}
    for kind, _, errors in reports:
        if errors:
            print(f"# {kind}: {len(errors)} call(s) failed; the first: {errors[0]}")
    return [(name, start, end, calls) for name, start, end in phases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="waiting jobs in job_common")
    args = parser.parse_args()
    with raw_connection() as admin:
        admin.autocommit = True
        facts = server_facts(admin)
        print(
            f"# {source_revision()}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{memory_total()}; PostgreSQL {facts['server_version']}, fsync={facts['fsync']}, "
            f"synchronous_commit={facts['synchronous_commit']}, shared_buffers={facts['shared_buffers']}"
        )
        print(
            f"# {args.jobs:,} waiting jobs in job_common and {max(args.jobs // 10, 1):,} in a queue's own table"
        )
        print(
            "| phase | time | sends | longest send | median send | fetches | longest fetch | median fetch |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for inline in (False, True):
            for name, start, end, calls in run(admin, args.jobs, inline):
                sends, send_max, send_median = phase_figures(calls["send"], start, end)
                fetches, fetch_max, fetch_median = phase_figures(calls["fetch"], start, end)
                print(
                    f"| {name} | {end - start:.1f} s | {sends:,} | {send_max * 1000:,.0f} ms | "
                    f"{send_median * 1000:.1f} ms | {fetches:,} | {fetch_max * 1000:,.0f} ms | "
                    f"{fetch_median * 1000:.1f} ms |",
                    flush=True,
                )
        boss = Boss()
        for name in (QUEUE, OWN_QUEUE):
            boss.delete_queue(name)


if __name__ == "__main__":
    main()
