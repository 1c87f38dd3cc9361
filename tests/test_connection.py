"""django_pgboss's statements on Django's connection: prepared, and still Django's statements."""

from __future__ import annotations

import datetime
import zoneinfo

import pytest
from django.db import DataError, connection, reset_queries, transaction
from django.db.transaction import TransactionManagementError
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_pgboss import Boss, boss
from django_pgboss.db.installed import not_installed_message
from django_pgboss.exceptions import SchemaNotInstalled
from django_pgboss.models import Job as JobRow
from django_pgboss.observability import tracing
from tests.helpers import install_schema, uninstall_schema

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


def test_debugs_query_log_includes_a_send_however_debug_was_turned_on(queue, settings):
    # Counted rather than read: on Django 5.2 the log keeps no text for a prepared statement
    # (its last_executed_query() reads the psycopg cursor's last query text, which a prepared
    # statement's execution does not set); Django 6 formats it from the statement and parameters.
    boss.send(queue, {"n": 0})  # the queue's route cached: the sends below take the hot path
    with override_settings(DEBUG=True):
        reset_queries()
        boss.send(queue, {"n": 1})
        assert len(connection.queries) == 1
    # An assignment, as Django's test runner makes, rather than override_settings().
    settings.DEBUG = True
    reset_queries()
    boss.send(queue, {"n": 2})
    assert len(connection.queries) == 1
    settings.DEBUG = False
    reset_queries()
    boss.send(queue, {"n": 3})
    assert connection.queries == []


@pytest.mark.django_db(transaction=True)
def test_a_send_on_a_cached_route_says_the_schema_is_gone(monkeypatch):
    # A send of data alone on a cached route takes send()'s hot path when no span is to be
    # recorded (an earlier test may have set a tracer provider for good).
    monkeypatch.setattr(tracing, "active", lambda: False)
    install_schema("hot_path_gone")
    try:
        gone = Boss(schema="hot_path_gone")
        gone.create_queue("q")
        assert gone.send("q", {"n": 1}) is not None  # the queue's route cached
    finally:
        uninstall_schema("hot_path_gone")
    with pytest.raises(SchemaNotInstalled) as raised:
        gone.send("q", {"n": 2})
    assert str(raised.value) == not_installed_message("default")


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
