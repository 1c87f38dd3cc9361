"""pgqueuer 1.6.0 (janbjorge/pgqueuer), the fourth system of bench/peers.py.

pgqueuer is a bench-only dependency (`pip install -e ".[peers]"`, pyproject.toml's peers extra):
neither its code nor its schema is in this repository. bench/peers.py installs its schema with its
own installer (`Queries.install()`, what `pgq install` runs) into a PostgreSQL schema of its own,
`pgqueuer` (pgqueuer's `PGQUEUER_SCHEMA` setting), truncates its tables before every run, and
uninstalls it (`Queries.uninstall()`, then the schema) at the end. Without pgqueuer installed,
bench/peers.py says so and runs the other systems.

What runs, per workload (the same jobs, payload `{"i": n}`, as the others'):

  insert    its batch enqueue, `Queries.enqueue(entrypoints, payloads, priorities)` with lists of
            1,000, one connection, calls awaited in turn.
  send      `Queries.enqueue(entrypoint, payload, 0)`, one job a call, awaited in turn.
  drain-N   ONE process running its consumer as `pgq run bench.pgqueuer_peer:manager --mode drain
            --batch-size N --max-concurrent-tasks M --dequeue-timeout 0.5` does (through
            `pgqueuer.run()`, the call its CLI makes; see consume()): one QueueManager with a
            no-op `async def` entrypoint, until the queue is empty.

Its fastest documented options, and why:

  - The asyncpg driver, which pgqueuer's benchmark page (docs/comparisons/benchmarks.md) measures
    at about 1.7 times its psycopg driver: one connection (`AsyncpgDriver`) for the enqueues (one
    client awaiting each call in turn) and for drain-1, where its tuning guide's "a direct asyncpg
    connection for the QueueManager" (docs/guides/performance-tuning.md) was the faster here; a
    pool of 5 (`AsyncpgPoolDriver`, pgqueuer's default pool size: one connection keeps the
    LISTEN, four run the statements) for drain-50, which the same guide gives for high-throughput
    deployments and which was the faster there (one connection makes the dequeues, the
    completion flushes and the heartbeat flushes wait for one another behind the driver's lock).
    `--pgqueuer-driver` (bench/peers.py) runs every workload on one driver: `asyncpg`,
    `asyncpg-pool`, or `psycopg`, its async `PsycopgDriver` on the same psycopg 3 as ours.
  - uvloop: `pgq run` runs the consumer on uvloop (pgqueuer depends on it), and so do the
    enqueues here, as its own benchmark tool does.
  - Concurrency 4 is `max_concurrent_tasks`, its per-process cap on picked jobs (the dequeue
    statement enforces it). pgqueuer refuses a cap below twice the batch size, so the cap is
    max(4, 2 x batch size): 4 at batch size 1, 100 at batch size 50 (its least value there; our
    worker holds at most max(concurrency, batch size) = 50 jobs at batch size 50). The other knob,
    the entrypoint's `concurrency_limit`, is a limit across the whole fleet kept in the database
    with a slot per picked job; it is not a process's concurrency, and with a limit of 4 a batch
    of 50 would never fill, so each batch's completions would wait for the log buffer's 0.1 s
    timer (it flushes at batch-size entries or on that timer).
  - The durable tables (its default `durability`), since ours and pg-boss's are durable;
    `balanced` and `volatile` make tables UNLOGGED, which no other system here gets.
  - `--dequeue-timeout 0.5`: how long the consumer waits for a NOTIFY before it polls, pg-boss's
    and our polling interval here; pgqueuer wakes on its table trigger's NOTIFY, so this only
    bounds the wait once the queue is empty. The heartbeat stays on at its default (30 s timeout,
    a beat every 15 s, which no job here lives to see): it cannot be switched off without every
    picked job counting as stale and being picked again. Log aggregation stays at its default
    (every 30 s, only after jobs were logged), which a drain of a few seconds does not reach.

A drain is timed from pgqueuer's own rows, the same way as django_pgboss's and pg-boss's: its log
table (`pgqueuer_log`) gets a row for every pick and every completion, stamped by the statement's
transaction (`created`, `now()`), so the window is the first `picked` row to the last `successful`
one; every job must have a `successful` row and the queue table must be empty afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
VERSION = "1.6.0"
SCHEMA = "pgqueuer"
ENTRYPOINT = "bench_peers"
DRIVERS = ("asyncpg", "asyncpg-pool", "psycopg")
CONCURRENCY = 4
#: How long the consumer waits for a NOTIFY before polling: pg-boss's least polling interval,
#: the one the other two workers use here.
DEQUEUE_TIMEOUT = 0.5

# pgqueuer reads its settings from the environment once (pgqueuer.domain.settings.db_settings()):
# its objects go in a schema of their own, in this process and in the `pgq run` child alike.
os.environ["PGQUEUER_SCHEMA"] = SCHEMA


def installed_version() -> str | None:
    """pgqueuer's installed version, or None when it (or its asyncpg driver) is missing."""
    try:
        version = metadata.version("pgqueuer")
        import asyncpg  # noqa: F401
        import pgqueuer  # noqa: F401
        import uvloop  # noqa: F401
    except (metadata.PackageNotFoundError, ImportError):
        return None
    return version


def max_concurrent_tasks(batch_size: int) -> int:
    """The consumer's cap: concurrency 4, raised to the least pgqueuer accepts (2 x batch size)."""
    return max(CONCURRENCY, 2 * batch_size)


def _run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    import uvloop

    return uvloop.run(coroutine)


async def _connect(dsn: str, driver: str) -> tuple[Any, Any]:
    """One connection and pgqueuer's driver over it; the caller closes the connection."""
    if driver == "asyncpg":
        import asyncpg
        from pgqueuer.db import AsyncpgDriver

        connection = await asyncpg.connect(dsn)
        return connection, AsyncpgDriver(connection)
    if driver == "asyncpg-pool":
        import asyncpg
        from pgqueuer.db import AsyncpgPoolDriver

        # The listener keeps one connection; the other CONCURRENCY run the statements, so a
        # dequeue, a completion flush and a heartbeat flush need not wait for one another.
        pool = await asyncpg.create_pool(dsn, min_size=CONCURRENCY + 1, max_size=CONCURRENCY + 1)
        return pool, AsyncpgPoolDriver(pool)
    if driver == "psycopg":
        import psycopg
        from pgqueuer.db import PsycopgDriver

        connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        return connection, PsycopgDriver(connection)
    raise ValueError(f"driver: {driver!r} is not one of {DRIVERS}")


async def _with_queries(dsn: str, driver: str, body: Callable[[Any], Awaitable[Any]]) -> Any:
    from pgqueuer.queries import Queries

    connection, pgq_driver = await _connect(dsn, driver)
    try:
        return await body(Queries(pgq_driver))
    finally:
        await connection.close()


def _payload(i: int) -> bytes:
    return json.dumps({"i": i}).encode()


def install(dsn: str) -> None:
    """A fresh pgqueuer schema: what a previous run left is uninstalled first, then its installer."""

    async def body(queries: Any) -> None:
        if await queries.schema_is_installed():
            await queries.uninstall()
        await queries.install()

    _run(_with_queries(dsn, "asyncpg", body))


def uninstall(dsn: str) -> None:
    async def body(queries: Any) -> None:
        await queries.uninstall()

    _run(_with_queries(dsn, "asyncpg", body))


def tables() -> tuple[str, str, str]:
    """The queue table, its log and its statistics, schema-qualified."""
    from pgqueuer.domain.settings import db_settings

    names = db_settings().qualified
    return names.queue_table, names.queue_table_log, names.statistics_table


def truncate(admin: Any) -> None:
    """Empty pgqueuer's tables (psycopg admin connection); its trigger's NOTIFY reaches no one."""
    admin.execute(f"TRUNCATE {', '.join(tables())}")


def insert(dsn: str, driver: str, jobs: int, per_call: int) -> float:
    """`per_call` jobs a Queries.enqueue() call, awaited in turn; seconds around the loop."""

    async def body(queries: Any) -> float:
        started = time.perf_counter()
        for start in range(0, jobs, per_call):
            count = min(per_call, jobs - start)
            await queries.enqueue(
                [ENTRYPOINT] * count, [_payload(i) for i in range(start, start + count)], [0] * count
            )
        return time.perf_counter() - started

    return _run(_with_queries(dsn, driver, body))


def send(dsn: str, driver: str, jobs: int) -> float:
    """One Queries.enqueue() a job, awaited in turn; seconds around the loop."""

    async def body(queries: Any) -> float:
        started = time.perf_counter()
        for i in range(jobs):
            await queries.enqueue(ENTRYPOINT, _payload(i), 0)
        return time.perf_counter() - started

    return _run(_with_queries(dsn, driver, body))


def fill(admin: Any, dsn: str, jobs: int, per_call: int) -> None:
    """An empty queue, then `jobs` queued jobs (its own enqueue), an empty log, vacuumed,
    analysed and checkpointed, as the other systems' tables before a drain."""
    truncate(admin)
    insert(dsn, "asyncpg", jobs, per_call)
    queue, log, _ = tables()
    # Its enqueue logs a `queued` row per job; the drain's window is read from the log alone.
    admin.execute(f"TRUNCATE {log}")
    for table in (queue, log):
        admin.execute(f"VACUUM ANALYZE {table}")
    admin.execute("CHECKPOINT")


def drain(dsn: str, driver: str, batch_size: int) -> None:
    """pgqueuer's consumer in a child process, drain mode, until the queue is empty (see the
    module's docstring): `python bench/pgqueuer_peer.py BATCH_SIZE`, which runs `pgqueuer.run()`."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "PEERS_PGQUEUER_DSN": dsn,
        "PEERS_PGQUEUER_DRIVER": driver,
    }
    command = [sys.executable, str(Path(__file__).resolve()), str(batch_size)]
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"pgqueuer's consumer exited with {done.returncode}: {done.stderr[-2000:]}")


def drain_window(admin: Any, jobs: int) -> float:
    """The drain's time from pgqueuer's log: first pick to last completion; checks every job."""
    queue, log, _ = tables()
    first, last, completed = admin.execute(
        f"SELECT extract(epoch FROM min(created) FILTER (WHERE status = 'picked'))::float8, "
        f"extract(epoch FROM max(created) FILTER (WHERE status = 'successful'))::float8, "
        f"count(DISTINCT job_id) FILTER (WHERE status = 'successful') FROM {log} WHERE entrypoint = %s",
        (ENTRYPOINT,),
    ).fetchone()
    left = admin.execute(f"SELECT count(*) FROM {queue}").fetchone()[0]
    if completed != jobs or left:
        raise SystemExit(f"pgqueuer: {completed} of {jobs} jobs completed, {left} left in its queue table")
    return last - first


def enqueued(admin: Any) -> int:
    queue, _, _ = tables()
    return admin.execute(
        f"SELECT count(*) FROM {queue} WHERE entrypoint = %s AND status = 'queued'", (ENTRYPOINT,)
    ).fetchone()[0]


@asynccontextmanager
async def manager() -> AsyncIterator[Any]:
    """`pgq run`'s factory: one QueueManager on one connection, a no-op entrypoint."""
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    connection, driver = await _connect(
        os.environ["PEERS_PGQUEUER_DSN"], os.environ.get("PEERS_PGQUEUER_DRIVER", "asyncpg")
    )
    queue_manager = QueueManager(Queries(driver))

    # PEERS_PGQUEUER_LIMIT=N: the entrypoint's fleet-wide concurrency_limit instead (see above).
    @queue_manager.entrypoint(ENTRYPOINT, concurrency_limit=int(os.environ.get("PEERS_PGQUEUER_LIMIT", 0)))
    async def noop(job: Job) -> None:
        return None

    try:
        yield queue_manager
    finally:
        await connection.close()


def consume(batch_size: int) -> None:
    """What `pgq run bench.pgqueuer_peer:manager --mode drain --batch-size N
    --max-concurrent-tasks M --dequeue-timeout 0.5` runs: pgqueuer.run(), the Python API its CLI
    calls, on uvloop as its CLI runs it. The CLI itself is not used: pgqueuer 1.6.0's `pgq run`
    fails before it starts with typer 0.29 (its --log-level option reaches the logger set-up as a
    str, `AttributeError: 'str' object has no attribute 'name'`)."""
    import pgqueuer
    from pgqueuer import types

    _run(
        pgqueuer.run(
            manager,
            mode=types.QueueExecutionMode.drain,
            batch_size=batch_size,
            max_concurrent_tasks=int(os.environ.get("PEERS_PGQUEUER_CAP", max_concurrent_tasks(batch_size))),
            dequeue_timeout=timedelta(seconds=DEQUEUE_TIMEOUT),
        )
    )


if __name__ == "__main__":
    consume(int(sys.argv[1]))
