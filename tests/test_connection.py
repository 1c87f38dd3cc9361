"""django_pgboss's statements on Django's connection: prepared, and still Django's statements."""

from __future__ import annotations

import pytest
from django.db import DataError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from django_pgboss import boss

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
