"""Small helpers the job API tests share: raw reads of what the database holds."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.operations import render_sql
from django_pgboss.plans.fragments import plus_seconds


def schema_sql() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


def rows(sql: str, params: Any = None) -> list[tuple]:
    """Run a query with ``{s}`` standing for the quoted schema and return every row."""
    with connection.cursor() as cursor:
        cursor.execute(sql.replace("{s}", schema_sql()), params)
        return cursor.fetchall() if cursor.description is not None else []


def move_back(job_id: str, column: str, seconds: float) -> None:
    """Move one job's moment ``column`` (started_on, heartbeat_on, ...) ``seconds`` into the past:
    a claim that lapsed, a heartbeat that stopped. Spelled with fragments.plus_seconds(), as the
    statements spell time arithmetic in an UPDATE that Citus runs on the distributed job table."""
    rows(
        f"UPDATE {{s}}.job SET {column} = {plus_seconds(column, '%s::float8')} WHERE id = %s",
        [-seconds, job_id],
    )


def install_schema(schema: str) -> None:
    """Create pg-boss's schema in ``schema`` as the migrations do (0001's file, then the steps of
    0005 to 0007), without the migration records, which the suite's own schema holds (they are
    per database, not per schema)."""
    with connection.cursor() as cursor:
        cursor.execute(render_sql("0001_initial.sql", schema), None)
        for version in (44, 45, 46):
            cursor.execute(render_sql(f"upgrade/v{version - 1}_to_v{version}.sql", schema), None)


def uninstall_schema(schema: str) -> None:
    """Remove what install_schema() created, as `migrate pgboss zero` does."""
    with connection.cursor() as cursor:
        for version in (46, 45, 44):
            cursor.execute(render_sql(f"rollback/v{version}_to_v{version - 1}.sql", schema), None)
        cursor.execute(render_sql("0001_initial.down.sql", schema), None)


JSON_COLUMNS = {"data", "output", "source_output"}


def job_row(job_id: str, *columns: str) -> tuple:
    """Columns of one job; jsonb columns decoded (Django's connection reads jsonb as text)."""
    (row,) = rows(f"SELECT {', '.join(columns)} FROM {{s}}.job WHERE id = %s", [job_id])
    return tuple(
        json.loads(value) if column in JSON_COLUMNS and isinstance(value, str) else value
        for column, value in zip(columns, row, strict=True)
    )


def stats_partitions() -> set[str]:
    """The names of queue_stats' daily partitions in the schema under test."""
    return {
        name
        for (name,) in rows(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
            "WHERE p.relname = 'queue_stats' AND n.nspname = %s",
            [pgboss_settings.SCHEMA],
        )
    }


def count_jobs(name: str | None = None) -> int:
    if name is None:
        return rows("SELECT count(*) FROM {s}.job")[0][0]
    return rows("SELECT count(*) FROM {s}.job WHERE name = %s", [name])[0][0]


def pgboss_settings_with(**changes: Any):
    """override_settings for some PGBOSS keys, keeping the others (the suite's SCHEMA above all)."""
    from django.conf import settings
    from django.test import override_settings

    return override_settings(PGBOSS={**getattr(settings, "PGBOSS", {}), **changes})


#: The two kinds of handler a worker runs: on a handler thread, and on its event loop.
HANDLER_KINDS = ("sync", "async")


def handler_of(kind: str, body: Any, *, sleep_before: float = 0.0, sleep_after: float = 0.0) -> Any:
    """``body`` (a sync function of the job, or of the jobs with ``batch=True``) as a handler of
    ``kind``: "sync" runs it on a handler thread, "async" is an ``async def`` calling it on the
    worker's loop (so ``body`` must neither block nor query). Each sleeps as its kind does
    (time.sleep, asyncio.sleep) before and after the body, and returns the body's value."""
    import asyncio
    import time

    if kind == "sync":

        def handler(job: Any) -> Any:
            time.sleep(sleep_before)
            value = body(job)
            time.sleep(sleep_after)
            return value

        return handler
    if kind != "async":
        raise ValueError(f"kind must be one of {HANDLER_KINDS}, not {kind!r}")

    async def async_handler(job: Any) -> Any:
        await asyncio.sleep(sleep_before)
        value = body(job)
        await asyncio.sleep(sleep_after)
        return value

    return async_handler
