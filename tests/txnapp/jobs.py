"""Transactional handlers the worker tests run (tests/test_transactional.py), steered by job data.

An app of its own, added to a worker process through PGBOSS_TEST_EXTRA_APPS, so the other worker
tests' handlers are not affected. Each handler writes an auth Group named for the job's attempt:
the row a test looks for to see whether the handler's writes committed.
"""

from __future__ import annotations

import time

from django.contrib.auth.models import Group

from django_pgboss import boss, work
from tests.workapp.jobs import _note


def _write_row(job) -> str:
    name = f"{job.id}-{job.retry_count}"
    Group.objects.create(name=name)
    _note(job, "wrote")
    return name


@work("txn", transactional=True, concurrency=2, polling_interval_seconds=0.2)
def txn(job):
    row = _write_row(job)
    time.sleep(job.data.get("sleep", 0))
    if job.data.get("fail_first") and job.retry_count == 0:
        raise RuntimeError("first attempt fails after its write")
    if job.data.get("settle") == "complete":
        # The handler completes its own job (inside its transaction): the worker's completion
        # then has nothing to do, and the run still commits.
        boss.complete("txn", job, {"settled_by": "handler"})
    return {"row": row}


@work("txn-bounded", transactional=True, transaction_timeout_seconds=1, polling_interval_seconds=0.2)
def txn_bounded(job):
    row = _write_row(job)
    # Idle in the transaction past its one-second bound: PostgreSQL ends it.
    time.sleep(job.data.get("sleep", 0))
    return {"row": row}


@work("txn-batch", transactional=True, batch=True, batch_size=5, polling_interval_seconds=0.2)
def txn_batch(jobs):
    for job in jobs:
        _write_row(job)
    if any(job.data.get("fail") for job in jobs):
        raise RuntimeError("one job of the batch fails, so the whole batch rolls back")
    return {"batch": len(jobs)}
