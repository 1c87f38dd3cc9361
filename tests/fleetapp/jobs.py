"""The mixed fleet's Python handlers: one per queue, transactional, the same as tests/node/fleet.mjs's.

Each run appends a ``run`` line to the ledger file before its work and an ``end`` line after it,
and writes its effect (a row of EFFECT_TABLE naming the job, the attempt and this process) inside
the transaction that completes the job. tests/fleet.py reads both to tell what happened.
"""

from __future__ import annotations

import os
import time

from django.db import connection

from django_pgboss import work
from tests.fleetapp import CONCURRENCY, EFFECT_TABLE, EXPIRY_QUEUE, HEARTBEAT_QUEUE, LEDGER_ENV


def ledger_line(event: str, queue: str, job) -> None:
    """Append one line to the ledger; a single small write in append mode, so lines from many
    processes never interleave."""
    line = f"{event} {queue} {job.id} {job.retry_count} python {os.getpid()} {time.time():.6f}\n"
    with open(os.environ[LEDGER_ENV], "a") as ledger:
        ledger.write(line)


def run(queue: str, job) -> dict:
    ledger_line("run", queue, job)
    time.sleep(job.data["ms"] / 1000)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {EFFECT_TABLE} (job_id, queue, attempt, side, pid) VALUES (%s, %s, %s, %s, %s)",
            [job.id, queue, job.retry_count, "python", os.getpid()],
        )
    ledger_line("end", queue, job)
    return {"side": "python", "pid": os.getpid()}


@work(EXPIRY_QUEUE, transactional=True, concurrency=CONCURRENCY, polling_interval_seconds=0.5)
def expiry(job):
    return run(EXPIRY_QUEUE, job)


@work(HEARTBEAT_QUEUE, transactional=True, concurrency=CONCURRENCY, polling_interval_seconds=0.5)
def heartbeat(job):
    return run(HEARTBEAT_QUEUE, job)
