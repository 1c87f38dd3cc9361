"""SQL for the django.tasks backend: reading a task's job when only its id is known."""

from __future__ import annotations

from django_pgboss.plans.jobs import JOB_COLUMNS


def get_task_job(schema: str) -> str:
    """One job with every column, looked up by id among a set of queues. Parameters: names, id.

    A task result id is a job id, and the caller does not know which of the backend's queues the
    job is in: the parent job table is read with the names as a list, so PostgreSQL prunes the
    scan to the partitions of those queues and probes each by its primary key (name, id).
    """
    return f"SELECT {', '.join(JOB_COLUMNS)} FROM {schema}.job WHERE name = ANY(%(names)s) AND id = %(id)s"


def record_attempt(schema: str, table: str) -> str:
    """Keep a running task attempt's history in its job's data, under ``django_task``, fenced to the
    attempt. Parameters: name, id, attempt (its retry_count), history (json).

    In the data, not the output, because everything that ends an attempt other than the task
    itself (the monitor's expiry, a worker's shutdown, pg-boss's own supervisor) replaces the
    output with its own message: the history of the attempts before must not go with it.
    """
    return f"""
    UPDATE {schema}.{table}
    SET data = jsonb_set(data, '{{django_task}}', %(history)s::jsonb)
    WHERE name = %(name)s AND id = %(id)s AND state = 'active' AND retry_count = %(attempt)s
    """
