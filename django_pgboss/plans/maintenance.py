"""SQL for the monitor's maintenance of jobs: failing the ones whose worker went silent."""

from __future__ import annotations

from django_pgboss.plans.settle import fail_statement


def fail_expired_jobs(schema: str, table: str) -> str:
    """Fail active jobs that ran past their expiry. Parameters: output json, queue names.

    Their worker died, hung, or lost its connection: failing them (the same path as fail(), so
    retries and dead letters apply) hands them to another worker. The worker that overran, if it
    ever finishes, is fenced off by the attempt fence.
    """
    where = (
        f"state = 'active' AND (started_on + expire_seconds * interval '1s') < {schema}.job_now()"
        " AND name = ANY(%s::text[])"
    )
    return fail_statement(schema, table, where)


def fail_stalled_jobs(schema: str, table: str) -> str:
    """Fail active jobs whose heartbeat stopped. Parameters: output json, queue names."""
    where = (
        "state = 'active' AND heartbeat_seconds IS NOT NULL"
        f" AND (heartbeat_on + heartbeat_seconds * interval '1s') < {schema}.job_now()"
        " AND name = ANY(%s::text[])"
    )
    return fail_statement(schema, table, where)


def queue_tables(schema: str, *, by_name: bool) -> str:
    """Each job table with the queues in it: every queue, or those in the array parameter."""
    where = "WHERE name = ANY(%s::text[])" if by_name else ""
    return f"SELECT table_name, array_agg(name ORDER BY name) FROM {schema}.queue {where} GROUP BY table_name"
