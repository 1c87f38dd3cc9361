"""Where a send's server time goes: one job a commit, the ceiling's statement against ours, pg-boss's,
and the same statement on scratch copies of pg-boss's job table with parts of the schema taken off.

    PGBOSS_BENCH_PORT=55462 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55462/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/send_server.py [--sends 3000] [--rounds 5] \\
        [--only LABEL ...] [--waldump]

Every variant runs on one raw psycopg connection (server-side binding, prepared after its first
call, autocommit: each send its own commit), so only the statement, the table and the commit differ
between rows. Within each round every variant runs once, the order rotated round by round, each
from empty, checkpointed tables. Per send, medians over the rounds:

  wall        the client's clock around the loop (one round trip and one WAL flush a send)
  backend     CPU time of the connection's backend, from /proc/<pid>/schedstat (nanoseconds)
  cluster     CPU time of the whole cluster (backends, WAL writer, checkpointer...), from /proc/<pid>/stat
  WAL         bytes of WAL a send writes (pg_current_wal_insert_lsn() before and after the loop)

With --waldump, the first round's WAL of each variant is read back with pg_waldump --stats=record
(PostgreSQL's own, beside the server's binaries), and the records a send writes are printed by type.

The variants (django_pgboss's statement is insert_job(on_conflict=False, options=False), what send()
runs for a job without options on a standard queue outside a transaction):

  ceiling                   the peers bench's: INSERT INTO ceiling.job (q, data) VALUES, a bigserial
                            key, one partial index, no foreign key
  ours                      insert_job() into pgboss.job_common, as send() runs it
  ours, settings bound      the same row with the queue's settings bound as parameters (VALUES),
                            instead of read from the queue row
  ours, FOR KEY SHARE ...   ours locking the queue row itself, the lock the foreign key's check
                            takes at commit
  ours, queue row by TID    ours reading the queue row by its tuple id (bound) and name, a TID
                            scan instead of the primary key's index scan
  pg-boss send              pg-boss 12.35.0's own send() statement (plans.insertJobs(), returnId,
                            a one-job JSON array), here prepared (pg-boss's client does not prepare)
  scratch ...               insert_job() on a scratch copy (schema send_scratch, never pgboss) of
                            job_common and of the queue table, with what the label says taken off:
                            "copy" is the whole of it (both deferred foreign keys, all twelve indexes)
  ceiling + ...             the ceiling's statement on a copy of its table with parts of ours added
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django.core.management import call_command

from bench.common import (
    fresh_queues,
    load_average,
    process_schedstat,
    raw_connection,
    server_facts,
    source_revision,
)
from bench.peers import CEILING_DDL, server_cpu
from bench.pgboss_plans import insert_jobs_sql
from django_pgboss.api.boss import Boss
from django_pgboss.plans import jobs as job_plans

QUEUE = "bench_send_server"
SCRATCH = "send_scratch"
JOB_COMMON = "pgboss.job_common"
WALDUMP = "/usr/lib/postgresql/15/bin/pg_waldump"

#: The foreign keys of pg-boss's job table, as its schema declares them (on the scratch queue copy).
Q_FKEY = (
    f"FOREIGN KEY (name) REFERENCES {SCRATCH}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED"
)
DLQ_FKEY = f"FOREIGN KEY (dead_letter) REFERENCES {SCRATCH}.queue (name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED"
#: The indexes a standard job has an entry in: the primary key and the fetch index.
ENTERED_INDEXES = ("job_common_pkey", "job_common_i11")


def pgboss_job(i: int) -> str:
    """What pg-boss's send(QUEUE, {i}) binds: its #toJobPayload() of a job without options, in an array."""
    return json.dumps(
        [
            {
                "id": None,
                "name": QUEUE,
                "data": {"i": i},
                "singletonKey": None,
                "singletonOffset": 0,
                "groupId": None,
                "groupTier": None,
                "deadLetter": None,
            }
        ]
    )


# -- the scratch schema --------------------------------------------------------------------------


def index_definitions(admin: psycopg.Connection) -> dict[str, str]:
    """job_common's indexes, name -> CREATE INDEX text (pg_indexes), the primary key's included."""
    rows = admin.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'pgboss' AND tablename = 'job_common'"
    ).fetchall()
    return dict(rows)


def scratch_table(
    admin: psycopg.Connection,
    table: str,
    indexes: dict[str, str],
    *,
    q_fkey: bool,
    dlq_fkey: bool,
    check: bool = True,
) -> None:
    """A copy of job_common's columns and defaults as send_scratch.<table>, with the given indexes,
    foreign keys (against the scratch copy of the queue table) and, with ``check``, its CHECK
    constraint (a key_strict_fifo job needs a singleton key)."""
    including = "INCLUDING DEFAULTS INCLUDING GENERATED" + (" INCLUDING CONSTRAINTS" if check else "")
    admin.execute(f"CREATE TABLE {SCRATCH}.{table} (LIKE {JOB_COMMON} {including})")
    for name, definition in indexes.items():
        copied = definition.replace(f"ON {JOB_COMMON} ", f"ON {SCRATCH}.{table} ", 1)
        copied = copied.replace(f"INDEX {name} ", f"INDEX {table}_{name} ", 1)
        if f"{SCRATCH}.{table}" not in copied:
            raise SystemExit(f"could not copy {definition!r}")
        admin.execute(copied)
    if q_fkey:
        admin.execute(f"ALTER TABLE {SCRATCH}.{table} ADD CONSTRAINT {table}_q_fkey {Q_FKEY}")
    if dlq_fkey:
        admin.execute(f"ALTER TABLE {SCRATCH}.{table} ADD CONSTRAINT {table}_dlq_fkey {DLQ_FKEY}")


def build_scratch(admin: psycopg.Connection) -> dict[str, str]:
    """The scratch schema: a copy of the queue table with the bench queue's row, copies of
    job_common with parts taken off, and copies of the ceiling's table with parts added. Returns
    every scratch job table's qualified name by its label."""
    admin.execute(f"DROP SCHEMA IF EXISTS {SCRATCH} CASCADE")
    admin.execute(f"CREATE SCHEMA {SCRATCH}")
    admin.execute(f"CREATE TABLE {SCRATCH}.queue (LIKE pgboss.queue INCLUDING ALL)")
    admin.execute(f"INSERT INTO {SCRATCH}.queue SELECT * FROM pgboss.queue WHERE name = %s", (QUEUE,))
    every = index_definitions(admin)
    if len(every) != 12:
        raise SystemExit(f"job_common has {len(every)} indexes, expected pg-boss's 12: {sorted(every)}")
    entered = {name: every[name] for name in ENTERED_INDEXES}
    pkey = {"job_common_pkey": every["job_common_pkey"]}
    no_i11 = {name: definition for name, definition in every.items() if name != "job_common_i11"}
    # label: (table, indexes, q_fkey, dlq_fkey, the CHECK constraint)
    tables = {
        "scratch copy": ("copy", every, True, True, True),
        "scratch, no CHECK": ("no_check", every, True, True, False),
        "scratch, no dlq_fkey": ("no_dlq", every, True, False, True),
        "scratch, no foreign keys": ("no_fk", every, False, False, True),
        "scratch, 2 indexes (pkey, job_i11)": ("entered", entered, True, True, True),
        "scratch, 2 indexes, no foreign keys, no CHECK": ("entered_bare", entered, False, False, False),
        "scratch, pkey only, no foreign keys, no CHECK": ("pkey_bare", pkey, False, False, False),
        "scratch, no job_i11": ("no_i11", no_i11, True, True, True),
    }
    for table, indexes, q_fkey, dlq_fkey, check in tables.values():
        scratch_table(admin, table, indexes, q_fkey=q_fkey, dlq_fkey=dlq_fkey, check=check)
    ceiling = CEILING_DDL.split("CREATE TABLE IF NOT EXISTS ceiling.job", 1)[1].split(";", 1)[0]
    admin.execute(f"CREATE TABLE {SCRATCH}.ceiling_fk {ceiling}")
    admin.execute(f"CREATE INDEX ON {SCRATCH}.ceiling_fk (q, id) WHERE state = 'created'")
    admin.execute(
        f"ALTER TABLE {SCRATCH}.ceiling_fk ADD FOREIGN KEY (q) REFERENCES {SCRATCH}.queue (name) "
        "ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED"
    )
    # The ceiling with pg-boss's key: a random uuid drawn by the client, (q, id) the primary key.
    admin.execute(
        f"CREATE TABLE {SCRATCH}.ceiling_uuid (id uuid NOT NULL, q text NOT NULL, state text NOT NULL "
        "DEFAULT 'created', data jsonb, created_on timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (q, id))"
    )
    admin.execute(f"CREATE INDEX ON {SCRATCH}.ceiling_uuid (q, created_on) WHERE state = 'created'")
    admin.execute(
        f"ALTER TABLE {SCRATCH}.ceiling_uuid ADD FOREIGN KEY (q) REFERENCES {SCRATCH}.queue (name) "
        "ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED"
    )
    names = {label: f"{SCRATCH}.{table}" for label, (table, *_) in tables.items()}
    names["ceiling + deferred FK"] = f"{SCRATCH}.ceiling_fk"
    names["ceiling + uuid key + deferred FK"] = f"{SCRATCH}.ceiling_uuid"
    return names


# -- the variants ---------------------------------------------------------------------------------

Send = Callable[[Any, int], None]


def variants(admin: psycopg.Connection, scratch: dict[str, str]) -> dict[str, tuple[str, Send]]:
    """label -> (the table it writes, one send)."""
    ours = job_plans.insert_job("pgboss", "job_common", on_conflict=False, options=False)
    settings = admin.execute(
        "SELECT expire_seconds, deletion_seconds, retention_seconds, retry_limit, retry_delay, "
        "COALESCE(retry_backoff, false), retry_delay_max, policy, dead_letter, heartbeat_seconds "
        "FROM pgboss.queue WHERE name = %s",
        (QUEUE,),
    ).fetchone()
    bound_names = (
        "expire_seconds",
        "deletion_seconds",
        "retention_seconds",
        "retry_limit",
        "retry_delay",
        "retry_backoff",
        "retry_delay_max",
        "policy",
        "dead_letter",
        "heartbeat_seconds",
    )
    bound = dict(zip(bound_names, settings, strict=True))
    bound_sql = """
    INSERT INTO pgboss.job_common (id, name, data, priority, start_after, created_on, singleton_key,
      singleton_on, group_id, group_tier, expire_seconds, deletion_seconds, keep_until, retry_limit,
      retry_delay, retry_backoff, retry_delay_max, policy, dead_letter, heartbeat_seconds)
    VALUES (%(id)s::uuid, %(name)s, %(data)s::jsonb, 0, pgboss.job_now(), pgboss.job_now(), NULL, NULL,
      NULL, NULL, %(expire_seconds)s::int, %(deletion_seconds)s::int,
      pgboss.job_now() + %(retention_seconds)s::int * interval '1s', %(retry_limit)s::int,
      %(retry_delay)s::int, %(retry_backoff)s::bool, %(retry_delay_max)s::int, %(policy)s::text,
      %(dead_letter)s::text, %(heartbeat_seconds)s::int)
    """
    pgboss_sql = insert_jobs_sql("pgboss", QUEUE, return_id=True)
    ceiling_sql = "INSERT INTO {table} (q, data) VALUES (%(name)s, %(data)s::jsonb)"

    def ours_on(table: str) -> Send:
        sql = ours.replace(JOB_COMMON, table)
        if table.startswith(SCRATCH):
            sql = sql.replace("pgboss.queue", f"{SCRATCH}.queue")
        if sql.count(table) != 1:
            raise SystemExit(f"could not point insert_job() at {table}")

        def send(cursor: Any, i: int) -> None:
            cursor.execute(
                sql, {"name": QUEUE, "id": str(uuid.uuid4()), "data": f'{{"i":{i}}}'}, prepare=True
            )
            if cursor.rowcount != 1:
                raise SystemExit(f"{table}: a send wrote {cursor.rowcount} rows")

        return send

    def ceiling_on(table: str, with_id: bool = False) -> Send:
        sql = ceiling_sql.format(table=table)
        if with_id:
            sql = sql.replace("(q, data) VALUES (", "(id, q, data) VALUES (%(id)s::uuid, ")

        def send(cursor: Any, i: int) -> None:
            params = {"name": QUEUE, "data": f'{{"i":{i}}}'}
            if with_id:
                params["id"] = str(uuid.uuid4())
            cursor.execute(sql, params, prepare=True)

        return send

    def bound_send(cursor: Any, i: int) -> None:
        cursor.execute(
            bound_sql, {**bound, "name": QUEUE, "id": str(uuid.uuid4()), "data": f'{{"i":{i}}}'}, prepare=True
        )

    def pgboss_send(cursor: Any, i: int) -> None:
        cursor.execute(pgboss_sql, {"jobs": pgboss_job(i)}, prepare=True)
        str(cursor.fetchone()[0])

    # The statement taking the lock the foreign key's check at commit takes (FOR KEY SHARE of the
    # queue row): the check then finds the row locked by its own transaction.
    locking_sql = ours.rstrip() + "\n    FOR KEY SHARE OF q\n"

    def locking_send(cursor: Any, i: int) -> None:
        cursor.execute(
            locking_sql, {"name": QUEUE, "id": str(uuid.uuid4()), "data": f'{{"i":{i}}}'}, prepare=True
        )

    # The queue row read by its tuple id (a TID scan) instead of through its primary key, the
    # name still checked: the same visible row, or none when the row has moved since.
    tid_sql = ours.replace("WHERE q.name = %(name)s", "WHERE q.ctid = %(ctid)s::tid AND q.name = %(name)s")
    if tid_sql == ours:
        raise SystemExit("could not add the TID condition to insert_job()")
    queue_ctid = admin.execute("SELECT ctid::text FROM pgboss.queue WHERE name = %s", (QUEUE,)).fetchone()[0]

    def tid_send(cursor: Any, i: int) -> None:
        params = {"name": QUEUE, "ctid": queue_ctid, "id": str(uuid.uuid4()), "data": f'{{"i":{i}}}'}
        cursor.execute(tid_sql, params, prepare=True)
        if cursor.rowcount != 1:
            raise SystemExit("the TID scan missed the queue row")

    every: dict[str, tuple[str, Send]] = {
        "ceiling": ("ceiling.job", ceiling_on("ceiling.job")),
        "ours, queue row by TID": (JOB_COMMON, tid_send),
        "ours": (JOB_COMMON, ours_on(JOB_COMMON)),
        "ours, settings bound": (JOB_COMMON, bound_send),
        "ours, FOR KEY SHARE in the statement": (JOB_COMMON, locking_send),
        "pg-boss send": (JOB_COMMON, pgboss_send),
    }
    for label, table in scratch.items():
        if label.startswith("ceiling"):
            every[label] = (table, ceiling_on(table, with_id="uuid" in label))
        else:
            every[label] = (table, ours_on(table))
    return every


# -- measuring ------------------------------------------------------------------------------------


def wal_lsn(admin: psycopg.Connection) -> int:
    return int(admin.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()[0])


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def reset(admin: psycopg.Connection, tables: list[str]) -> None:
    admin.execute(f"TRUNCATE {', '.join(sorted(set(tables)))}")
    admin.execute("CHECKPOINT")


def waldump(admin: psycopg.Connection, start: int, end: int) -> list[tuple[str, int, int, int]]:
    """(record type, count, record bytes, full-page-image bytes) of the WAL between two LSNs."""
    wal_dir = Path(admin.execute("SHOW data_directory").fetchone()[0]) / "pg_wal"
    done = subprocess.run(
        [WALDUMP, "--stats=record", "-p", str(wal_dir), "-s", lsn_text(start), "-e", lsn_text(end)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"pg_waldump failed: {done.stderr[-1000:]}")
    rows = []
    for line in done.stdout.splitlines():
        match = re.match(r"(\S+/\S+)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)", line)
        if match and int(match.group(2)):
            rows.append((match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4))))
    return rows


def measure(
    admin: psycopg.Connection,
    conn: psycopg.Connection,
    cases: dict[str, tuple[str, Send]],
    sends: int,
    rounds: int,
    dump: bool,
) -> tuple[dict[str, dict[str, float]], dict[str, list[tuple[str, int, int, int]]]]:
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    tables = [table for table, _ in cases.values()]
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in cases}
    records: dict[str, list[tuple[str, int, int, int]]] = {}
    labels = list(cases)
    for index in range(rounds):
        shift = index % len(labels)
        order = labels[shift:] + labels[:shift]
        if index % 2:
            order.reverse()
        for label in order:
            table, send = cases[label]
            reset(admin, tables)
            cursor = conn.cursor()
            send(cursor, -1)  # prepared from here on
            send(cursor, -2)
            lsn, cluster, cpu = wal_lsn(admin), server_cpu(admin), process_schedstat(pid)[0]
            started = time.perf_counter()
            for i in range(sends):
                send(cursor, i)
            wall = time.perf_counter() - started
            cpu, cluster, end = process_schedstat(pid)[0] - cpu, server_cpu(admin) - cluster, wal_lsn(admin)
            found = admin.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            if found != sends + 2:
                raise SystemExit(f"{label}: {found} rows in {table}, expected {sends + 2}")
            figures = samples[label]
            figures.setdefault("wall", []).append(wall / sends * 1e6)
            figures.setdefault("backend", []).append(cpu / sends / 1e3)
            figures.setdefault("cluster", []).append(cluster / sends * 1e6)
            figures.setdefault("wal", []).append((end - lsn) / sends)
            if dump and index == 0:
                records[label] = waldump(admin, lsn, end)
        print(f"  round {index + 1}/{rounds} done (load {load_average()})", file=sys.stderr, flush=True)
    reset(admin, tables)
    medians = {
        label: {name: statistics.median(values) for name, values in figures.items()}
        for label, figures in samples.items()
    }
    return medians, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=3000, help="sends a run (default 3000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--only", action="append", help="only this variant (repeatable; the ceiling always runs)"
    )
    parser.add_argument(
        "--waldump", action="store_true", help="the WAL records of a send, by type (pg_waldump)"
    )
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    boss = Boss()
    fresh_queues(boss, QUEUE)
    admin, conn = raw_connection(), raw_connection()
    admin.execute(CEILING_DDL)
    scratch = build_scratch(admin)
    cases = variants(admin, scratch)
    if args.only:
        unknown = set(args.only) - set(cases)
        if unknown:
            raise SystemExit(f"unknown variants {sorted(unknown)}; known: {sorted(cases)}")
        cases = {label: case for label, case in cases.items() if label == "ceiling" or label in args.only}
    started_load = load_average()
    medians, records = measure(admin, conn, cases, args.sends, args.rounds, args.waldump)
    facts = server_facts(admin)
    print(
        f"django_pgboss at {source_revision()}; load average {started_load} at the start, {load_average()} at the end"
    )
    print(
        f"PostgreSQL {facts['server_version']}; fsync={facts['fsync']} synchronous_commit={facts['synchronous_commit']} "
        f"full_page_writes={facts['full_page_writes']} wal_sync_method={facts['wal_sync_method']}"
    )
    print(f"{args.rounds} rounds of {args.sends} sends a variant; medians per send")
    print()
    print("| variant | wall us | backend CPU us | cluster CPU us | WAL bytes |")
    print("|---|--:|--:|--:|--:|")
    for label, figures in medians.items():
        print(
            f"| {label} | {figures['wall']:,.0f} | {figures['backend']:,.1f} | {figures['cluster']:,.0f} "
            f"| {figures['wal']:,.0f} |"
        )
    for label, rows in records.items():
        print(f"\n{label}: WAL records a send (round 1, pg_waldump --stats=record)")
        print("| record | a send | bytes a send | FPI bytes a send |")
        print("|---|--:|--:|--:|")
        for kind, count, size, fpi in rows:
            print(
                f"| {kind} | {count / args.sends:.3f} | {size / args.sends:,.1f} | {fpi / args.sends:,.1f} |"
            )
    admin.execute(f"DROP SCHEMA {SCRATCH} CASCADE")
    boss.delete_queue(QUEUE)


if __name__ == "__main__":
    main()
