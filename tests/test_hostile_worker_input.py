"""Hostile input to what last session added to the worker: a per_job_results handler's entries
(wrong types, ids it was not given, duplicates, outputs too big or not JSON), and the options of
work()/Registration, Worker and pgboss_work (intervals, priorities, grace, max_jobs). Each bad
option is refused with InvalidOption (or a CommandError) naming it, before any SQL; each bad entry
is handled: the job it concerns still ends, with a reason."""

from __future__ import annotations

import uuid

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_pgboss import JobResult, boss
from django_pgboss.exceptions import InvalidOption
from django_pgboss.worker.engine import MAX_GRACE_SECONDS, Worker
from django_pgboss.worker.registry import MAX_INTERVAL_SECONDS, Registration, validated
from tests.helpers import job_row

pytestmark = pytest.mark.django_db(transaction=True)

#: Past the 32 MiB the wire format stores of one text.
HUGE = "x" * (33 * 1024 * 1024)


def test_hostile_per_job_results_leave_every_job_ended_with_a_reason(caplog):
    boss.create_queue("hostile", retry_limit=0)
    ids = boss.insert("hostile", [{"data": {"n": n}} for n in range(7)], return_ids=True)
    missing, upper, duplicate, huge, unencodable, huge_failure, braced = ids
    stranger = str(uuid.uuid4())

    def handler(jobs):
        assert sorted(job.id for job in jobs) == sorted(ids)
        return [
            None,
            42,
            "completed",
            {"id": missing},  # no status
            {"status": "completed"},  # no id
            JobResult(missing, "COMPLETED"),  # not one of pg-boss's statuses
            {"id": [missing], "status": "completed"},
            {"id": missing, "status": ["completed"]},
            JobResult("not-a-uuid", "completed"),
            JobResult.completed(stranger, {"who": "nobody"}),  # a job it was not given
            JobResult.completed(upper.upper(), {"spelled": "upper"}),
            JobResult.failed(duplicate, {"first": True}),
            JobResult.completed(duplicate, {"last": True}),  # the last entry wins, as in pg-boss
            JobResult.completed(huge, HUGE),
            JobResult.completed(unencodable, {"handle": object()}),
            JobResult.failed(huge_failure, HUGE),
            {"id": "{" + braced.replace("-", "") + "}", "status": "completed", "output": 7},
        ]

    Worker(
        [Registration("hostile", handler, batch=True, batch_size=10, per_job_results=True)], burst=True
    ).run()
    state, output = job_row(missing, "state", "output")
    assert state == "failed" and output["name"] == "MissingJobResult"
    assert job_row(upper, "state", "output") == ("completed", {"spelled": "upper"})
    assert job_row(duplicate, "state", "output") == ("completed", {"last": True})
    assert job_row(braced, "state", "output") == ("completed", {"value": 7})  # pg-boss wraps a scalar
    for job_id, reason in ((huge, "cannot be stored as JSON"), (unencodable, "cannot be stored as JSON")):
        state, output = job_row(job_id, "state", "output")
        assert state == "failed" and reason in output["message"], output
    # A failure whose output is too big to store still fails the job, with what can be stored.
    state, output = job_row(huge_failure, "state", "output")
    assert state == "failed" and len(str(output)) < 1024 * 1024
    assert not boss.get_job_by_id("hostile", stranger)
    assert f"{stranger}, which it was not given; ignored" in caplog.text
    assert "which is no JobResult; ignored" in caplog.text


def refused_before_sql(make, named: str) -> None:
    with CaptureQueriesContext(connection) as queries, pytest.raises(InvalidOption, match=named):
        make()
    assert not queries.captured_queries, queries.captured_queries


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"polling_interval_seconds": MAX_INTERVAL_SECONDS + 1}, "polling_interval_seconds"),
        ({"polling_interval_seconds": 1e12}, "polling_interval_seconds"),
        ({"polling_interval_seconds": float("nan")}, "polling_interval_seconds"),
        ({"polling_interval_seconds": "2"}, "polling_interval_seconds"),
        ({"heartbeat_refresh_seconds": 1e12}, "heartbeat_refresh_seconds"),
        ({"heartbeat_refresh_seconds": float("inf")}, "heartbeat_refresh_seconds"),
        ({"notify_polling_interval_seconds": 1e12}, "notify_polling_interval_seconds"),
        ({"min_priority": "1"}, "min_priority"),
        ({"max_priority": 2**40}, "max_priority"),
        ({"min_priority": True}, "min_priority"),
        ({"min_priority": 5, "max_priority": 1}, "min_priority 5 is above max_priority 1"),
        ({"transactional": True, "transaction_timeout_seconds": 1.5}, "transaction_timeout_seconds"),
        ({"transactional": True, "transaction_timeout_seconds": 10**12}, "transaction_timeout_seconds"),
        ({"transactional": "yes"}, "transactional"),
    ],
)
def test_a_hostile_work_option_is_refused_naming_it_before_any_sql(options, named):
    refused_before_sql(lambda: validated(Registration("q", lambda job: None, **options)), named)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"grace_seconds": -1}, "grace_seconds"),
        ({"grace_seconds": float("nan")}, "grace_seconds"),
        ({"grace_seconds": "5"}, "grace_seconds"),
        ({"grace_seconds": MAX_GRACE_SECONDS + 1}, "grace_seconds"),
        ({"max_jobs": 0}, "max_jobs"),
        ({"max_jobs": -3}, "max_jobs"),
        ({"max_jobs": "10"}, "max_jobs"),
        ({"max_jobs": True}, "max_jobs"),
        ({"max_jobs": 2**64}, "max_jobs"),
        ({"burst": "no"}, "burst"),
        ({"listen": 1}, "listen"),
        ({"max_abandoned_threads": -1}, "max_abandoned_threads"),
        ({"max_abandoned_threads": 2**70}, "max_abandoned_threads"),
        ({"max_abandoned_threads": 1.5}, "max_abandoned_threads"),
    ],
)
def test_a_hostile_worker_argument_is_refused_naming_it_before_any_sql(options, named):
    refused_before_sql(lambda: Worker([], **options), named)


@pytest.mark.parametrize("grace", ["nan", "-1", "1e12"])
def test_pgboss_work_refuses_a_hostile_grace_period(grace):
    with pytest.raises(CommandError, match="--grace-seconds must be from 0 to 86400"):
        call_command("pgboss_work", "--queue", "hostile", "--burst", "--grace-seconds", grace)
