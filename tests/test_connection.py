"""django_pgboss's statements on Django's connection: prepared, and still Django's statements."""

from __future__ import annotations

import datetime
import zoneinfo

import pytest
from django.db import DataError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_pgboss import boss
from django_pgboss.models import Job as JobRow

pytestmark = pytest.mark.django_db


def test_an_execute_wrapper_sees_every_statement(queue):
    seen = []

    def spy(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        boss.send(queue, {"n": 1})
        boss.fetch(queue)
    assert any("INSERT INTO" in sql for sql in seen)
    assert any("SKIP LOCKED" in sql for sql in seen)


def test_logged_queries_include_ours(queue):
    with CaptureQueriesContext(connection) as captured:
        boss.send(queue, {"n": 1})
    assert any("INSERT INTO" in query["sql"] for query in captured.captured_queries)


def test_errors_are_djangos(queue):
    with boss.context.cursor() as cursor, pytest.raises(DataError):
        cursor.execute("SELECT 1 / %s", [0])


def test_a_transaction_broken_by_an_error_refuses_further_statements(queue):
    with transaction.atomic():
        # An error leaving an atomic block without a savepoint marks the transaction as broken.
        with pytest.raises(DataError), transaction.atomic(savepoint=False), boss.context.cursor() as cursor:
            cursor.execute("SELECT 1 / %s", [0])
        with pytest.raises(TransactionManagementError):
            boss.send(queue, {"n": 1})
        transaction.set_rollback(True)


TIMESTAMPS = ("start_after", "created_on", "started_on", "heartbeat_on", "keep_until")


def fetched_and_stored(queue: str):
    """A job fetched with its metadata, and the same row as Django's ORM reads it."""
    boss.send(queue, {"n": 1})
    (job,) = boss.fetch(queue, include_metadata=True)
    return job, JobRow.objects.get(id=job.id)


def test_timestamps_are_the_orms_under_use_tz(queue):
    # Under USE_TZ with the database's TIME_ZONE unset, our statements load timestamptz with
    # psycopg's own loader (db/cursors.py); what comes out is what the ORM returns: aware
    # datetimes in datetime.timezone.utc.
    job, row = fetched_and_stored(queue)
    for name in TIMESTAMPS:
        ours, orms = getattr(job, name), getattr(row, name)
        assert ours == orms, name
        assert ours.tzinfo is datetime.UTC and orms.tzinfo is datetime.UTC, name


def test_timestamps_are_the_orms_without_use_tz(queue):
    with override_settings(USE_TZ=False):
        job, row = fetched_and_stored(queue)
        for name in TIMESTAMPS:
            ours, orms = getattr(job, name), getattr(row, name)
            assert ours == orms and ours.tzinfo is None, name


def test_timestamps_are_the_orms_in_the_databases_time_zone(queue):
    # A TIME_ZONE in DATABASES: Django sets the session's time zone to it and returns datetimes
    # in it, and so do our statements.
    del connection.timezone, connection.timezone_name
    connection.settings_dict["TIME_ZONE"] = "Asia/Kolkata"
    try:
        connection.ensure_timezone()
        job, row = fetched_and_stored(queue)
        for name in TIMESTAMPS:
            ours, orms = getattr(job, name), getattr(row, name)
            assert ours == orms, name
            assert ours.tzinfo == orms.tzinfo == zoneinfo.ZoneInfo("Asia/Kolkata"), name
            assert ours.utcoffset() == orms.utcoffset(), name
    finally:
        connection.settings_dict["TIME_ZONE"] = None
        del connection.timezone, connection.timezone_name
        connection.ensure_timezone()
