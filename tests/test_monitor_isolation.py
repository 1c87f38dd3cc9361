"""A monitor pass survives what one queue does: a queue deleted mid-pass, a queue whose statements fail."""

from __future__ import annotations

import logging
import threading

import pytest
from django.db import connection, connections

from django_pgboss import boss
from django_pgboss.db.identifiers import quote_job_table
from tests.helpers import job_row, rows


def expire(job_id: str) -> None:
    rows("UPDATE {s}.job SET started_on = started_on - interval '1 hour' WHERE id = %s", [job_id])


def expired_job(queue: str) -> str:
    boss.create_queue(queue, expire_in_seconds=60, retry_limit=0)
    boss.send(queue)
    (job,) = boss.fetch(queue)
    expire(job.id)
    return job.id


@pytest.mark.django_db(transaction=True)
def test_a_pass_skips_a_partitioned_queue_deleted_while_it_runs(caplog):
    boss.create_queue("doomed", partition=True)
    boss.send("doomed")
    survivor = expired_job("survivor")
    doomed_table = quote_job_table(boss.get_queue("doomed").table_name)

    def drop_before_the_count(execute, sql, params, many, context):
        # The pass has read the queue list and claimed the queue: it is about to read its table.
        if doomed_table in sql and not dropped.is_set():
            dropped.set()
            thread = threading.Thread(target=delete_elsewhere)
            thread.start()
            thread.join(timeout=30)
        return execute(sql, params, many, context)

    def delete_elsewhere() -> None:
        try:
            boss.delete_queue("doomed")
        finally:
            connections.close_all()

    dropped = threading.Event()
    with (
        caplog.at_level(logging.INFO, logger="django_pgboss.monitor"),
        connection.execute_wrapper(drop_before_the_count),
    ):
        report = boss.supervise()
    assert dropped.is_set() and boss.get_queue("doomed") is None
    assert report.vanished == ["doomed"]
    assert report.failed == []
    assert "survivor" in report.counted and report.expired == 1
    assert job_row(survivor, "state") == ("failed",)
    assert "queue 'doomed' was deleted during the pass; skipped" in caplog.text


@pytest.mark.django_db
def test_one_queue_whose_statements_fail_is_left_out_and_the_others_are_swept(caplog):
    healthy, broken = expired_job("healthy"), expired_job("broken")
    # A real error from the database for one queue's rows only, in the table both queues share:
    # the expiry sweep deletes and re-inserts each expired job, and this refuses the broken one's.
    rows(
        "CREATE FUNCTION {s}.refuse_broken() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN RAISE EXCEPTION 'the broken queue refuses'; END$$"
    )
    rows(
        "CREATE TRIGGER refuse_broken BEFORE DELETE ON {s}.job_common FOR EACH ROW "
        "WHEN (OLD.name = 'broken') EXECUTE FUNCTION {s}.refuse_broken()"
    )
    with caplog.at_level(logging.ERROR, logger="django_pgboss.monitor"):
        report = boss.supervise()
    assert report.expired == 1
    assert job_row(healthy, "state") == ("failed",)
    assert job_row(broken, "state") == ("active",)
    assert [name for name, _ in report.failed] == ["broken"]
    assert "the broken queue refuses" in report.failed[0][1]
    assert "queue 'broken' skipped" in caplog.text
    # The test's own transaction (the pass ran inside it) is still usable.
    assert rows("SELECT count(*) FROM {s}.queue")[0][0] == 2
