"""The monitor's pass over the queues: for now, failing jobs whose worker went silent.

This is what makes a killed worker harmless: its jobs stay active until they pass their expiry
(or, for queues with heartbeat_seconds, until their heartbeat stops), then supervise() fails
them through the ordinary fail path, so they are retried or dead-lettered like any failure.
The full monitor (queue stats, throughput windows, retention, cron) builds on this pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import transaction

from django_pgboss.identifiers import quote_job_table, schema_key
from django_pgboss.options import to_json, validate_queue_name
from django_pgboss.plans import maintenance as maintenance_plans
from django_pgboss.plans import queues as queue_plans

if TYPE_CHECKING:
    from django_pgboss.manager import Boss

#: The outputs a sweep stores, the same as pg-boss's, so either side can read why a job failed.
EXPIRED_OUTPUT = {"value": {"message": "job timed out"}}
STALLED_OUTPUT = {"value": {"message": "job heartbeat timeout"}}


def fail_silent_jobs(boss: Boss, queues: Iterable[str] | None = None) -> dict[str, int]:
    """Fail expired and stalled active jobs; returns {"expired": n, "stalled": m}.

    Each job table is swept under pg-boss's advisory lock for that sweep and table, so concurrent
    monitors (ours or pg-boss's) do not sweep the same rows twice.
    """
    names = None if queues is None else [validate_queue_name(q) for q in queues]
    counts = {"expired": 0, "stalled": 0}
    schema = boss.quoted_schema
    with boss.cursor() as cursor:
        if names is None:
            cursor.execute(maintenance_plans.queue_tables(schema, by_name=False))
        else:
            cursor.execute(maintenance_plans.queue_tables(schema, by_name=True), [names])
        tables = cursor.fetchall()
    sweeps = (
        ("expired", "failJobsByTimeout", maintenance_plans.fail_expired_jobs, EXPIRED_OUTPUT),
        ("stalled", "failJobsByHeartbeat", maintenance_plans.fail_stalled_jobs, STALLED_OUTPUT),
    )
    for table, table_queues in tables:
        table = quote_job_table(table)
        for kind, lock_name, plan, output in sweeps:
            with transaction.atomic(using=boss.using), boss.cursor() as cursor:
                cursor.execute(
                    queue_plans.advisory_lock(), [f".pgboss.{schema_key(boss.schema)}{table}{lock_name}"]
                )
                cursor.execute(plan(schema, table), [to_json(output, "output"), list(table_queues)])
                counts[kind] += cursor.fetchone()[0]
    return counts
