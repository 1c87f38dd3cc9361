"""Transactional handlers (issue 22 item 3): the handler's writes and its job's completion commit
together or not at all, in real worker processes; the transaction's bound is PostgreSQL's."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction

from django_pgboss import boss, work
from django_pgboss.api.jobs import JobStore
from django_pgboss.exceptions import InvalidOption
from django_pgboss.worker.registry import Registration
from django_pgboss.worker.transactional import (
    TRANSACTION_GRACE_SECONDS,
    run_in_transaction,
    transaction_timeout,
)
from tests.helpers import job_row, rows
from tests.processes import in_process, run_worker, start_worker, wait_for
from tests.test_worker import marker_lines

pytestmark = pytest.mark.django_db(transaction=True)

TXN_APP = {"PGBOSS_TEST_EXTRA_APPS": "tests.txnapp"}


def groups() -> list[str]:
    return sorted(Group.objects.values_list("name", flat=True))


# -- real worker processes -------------------------------------------------------------------------


def test_a_transactional_handler_that_succeeds_commits_its_row_with_its_completed_job():
    boss.create_queue("txn")
    ids = [boss.send("txn", {"n": n}) for n in range(3)]
    result = run_worker("--queue", "txn", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert groups() == sorted(f"{job_id}-0" for job_id in ids)
    for job_id in ids:
        assert job_row(job_id, "state", "output") == ("completed", {"row": f"{job_id}-0"})


def test_a_transactional_handler_that_raises_after_its_write_leaves_no_row_and_its_job_retried():
    boss.create_queue("txn", retry_limit=1)
    job_id = boss.send("txn", {"fail_first": True})
    result = run_worker("--queue", "txn", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    # The first attempt wrote its row and raised: the row went with the rollback. The retry's
    # row is the only one, committed with the completion.
    assert groups() == [f"{job_id}-1"]
    assert job_row(job_id, "state", "retry_count", "output") == ("completed", 1, {"row": f"{job_id}-1"})


def test_a_transactional_handler_failing_every_attempt_leaves_no_row_and_the_error_stored():
    boss.create_queue("txn-dead")
    boss.create_queue("txn", retry_limit=0, dead_letter="txn-dead")
    job_id = boss.send("txn", {"fail_first": True})
    result = run_worker("--queue", "txn", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert groups() == []
    state, output = job_row(job_id, "state", "output")
    assert state == "failed"
    assert output["message"] == "first attempt fails after its write"
    assert [job.source_id for job in boss.find_jobs("txn-dead")] == [job_id]


def test_a_transactional_worker_killed_mid_transaction_leaves_no_row_and_the_job_retried_after_expiry(
    tmp_path,
):
    marker = tmp_path / "marker"
    boss.create_queue("txn", expire_in_seconds=1, retry_limit=2)
    job_id = boss.send("txn", {"sleep": 30, "marker": str(marker)})
    worker = start_worker("--queue", "txn", **TXN_APP)
    try:
        # The row is written (uncommitted) and the handler sleeps inside its transaction.
        wait_for(lambda: marker_lines(marker, "wrote"), timeout=30)
    finally:
        worker.kill()
        worker.communicate(timeout=30)
    assert groups() == []
    assert job_row(job_id, "state") == ("active",)
    wait_for(lambda: boss.supervise(interval_seconds=1).expired == 1, timeout=10, interval=1.1)
    assert job_row(job_id, "state", "retry_count") == ("retry", 0)
    # The retry, quick this time, commits its own row and nothing of the killed attempt's.
    rows("UPDATE {s}.job SET data = '{}'::jsonb WHERE id = %s", [job_id])
    result = run_worker("--queue", "txn", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert groups() == [f"{job_id}-1"]
    assert job_row(job_id, "state", "retry_count") == ("completed", 1)


def test_a_transactional_handler_past_its_bound_fails_at_its_deadline_without_its_row():
    # The bound (1 s) comes before the expiry, so it is the deadline: the worker fails the job
    # then, and the handler, returning at 3 s, has its transaction rolled back (PostgreSQL has
    # ended it by then anyway).
    boss.create_queue("txn-bounded", retry_limit=0)
    job_id = boss.send("txn-bounded", {"sleep": 3})
    result = run_worker("--queue", "txn-bounded", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert groups() == []
    state, output = job_row(job_id, "state", "output")
    assert state == "failed"
    assert output["name"] == "JobDeadlineExceeded"
    assert "exceeded 1s (transaction_timeout_seconds)" in output["message"], output
    # The next job runs on a fresh connection and commits.
    second = boss.send("txn-bounded", {"sleep": 0})
    result = run_worker("--queue", "txn-bounded", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert job_row(second, "state") == ("completed",)
    assert groups() == [f"{second}-0"]


def test_postgresql_itself_ends_a_transaction_that_outlives_its_bound():
    # The run on its own, without the worker's deadline: what the server enforces.
    boss.create_queue("txn")
    store = JobStore(boss.context)

    def handler(job):
        Group.objects.create(name="late")
        time.sleep(job.data["sleep"])  # idle in the transaction, past its bound
        return {"done": True}

    registration = Registration("txn", handler, transactional=True, transaction_timeout_seconds=1)
    boss.send("txn", {"sleep": 2})
    (job,) = boss.fetch("txn")
    outcome, failure = run_in_transaction(store, registration, [job])
    assert outcome == "failed"
    assert "outlived its bound of 1s (transaction_timeout_seconds)" in str(failure)
    assert groups() == []
    assert job_row(job.id, "state") == ("active",)  # the caller (the worker's settler) fails it
    # The connection the server ended is replaced: the next run commits.
    boss.send("txn", {"sleep": 0})
    (quick,) = boss.fetch("txn")
    assert run_in_transaction(store, registration, [quick]) == ("completed", [quick.id])
    assert groups() == ["late"]


def test_a_transactional_batch_commits_or_rolls_back_as_a_whole():
    boss.create_queue("txn-batch", retry_limit=0)
    good = boss.insert("txn-batch", [{"data": {"n": n}} for n in range(3)], return_ids=True)
    result = run_worker("--queue", "txn-batch", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert groups() == sorted(f"{job_id}-0" for job_id in good)
    Group.objects.all().delete()
    bad = boss.insert("txn-batch", [{"data": {"n": 0}}, {"data": {"fail": True}}], return_ids=True)
    result = run_worker("--queue", "txn-batch", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert groups() == []
    assert {job_row(job_id, "state")[0] for job_id in bad} == {"failed"}


def test_a_handler_that_completes_its_own_job_in_its_transaction_commits():
    boss.create_queue("txn")
    job_id = boss.send("txn", {"settle": "complete"})
    result = run_worker("--queue", "txn", "--burst", **TXN_APP)
    assert result.returncode == 0, result.stderr
    assert groups() == [f"{job_id}-0"]
    assert job_row(job_id, "state", "output") == ("completed", {"settled_by": "handler"})


# -- in process: a claim lost while the handler runs --------------------------------------------


def test_a_run_whose_claim_lapsed_rolls_back_and_leaves_the_newer_attempt_alone():
    boss.create_queue("txn", retry_limit=3)
    job_id = boss.send("txn", {})
    entered, release = threading.Event(), threading.Event()

    def handler(job):
        Group.objects.create(name="stale")
        entered.set()
        release.wait(30)
        return {"from": "stale"}

    registration = Registration("txn", handler, transactional=True, polling_interval_seconds=0.1)
    worker, thread = in_process(registration)
    try:
        assert entered.wait(10)
        worker.stop()
        rows("UPDATE {s}.job SET started_on = started_on - interval '1 hour' WHERE id = %s", [job_id])
        assert boss.supervise().expired == 1
        (newer,) = boss.fetch("txn")
        assert newer.retry_count == 1
    finally:
        release.set()
        thread.join(30)
    assert groups() == []
    assert job_row(job_id, "state", "retry_count") == ("active", 1)
    assert worker.stats.lost == 1 and worker.stats.completed == 0
    assert boss.complete("txn", newer, {"from": "newer"}) == 1


def test_the_transaction_bound_defaults_to_the_expiry_plus_a_grace_and_takes_the_option():
    registration = Registration("txn", lambda job: None, transactional=True)
    boss.create_queue("txn", expire_in_seconds=40)
    boss.send("txn", {}, expire_in_seconds=70)
    boss.send("txn", {})
    jobs = boss.fetch("txn", batch_size=2)
    assert transaction_timeout(registration, jobs) == 70 + TRANSACTION_GRACE_SECONDS
    bounded = Registration("txn", lambda job: None, transactional=True, transaction_timeout_seconds=9)
    assert transaction_timeout(bounded, jobs) == 9


def test_the_bound_is_set_for_the_transaction_only_and_a_tighter_one_the_connection_has_wins():
    store = JobStore(boss.context)
    with pytest.raises(InvalidOption, match="needs an open transaction"):
        store.bound_transaction(5)
    with transaction.atomic():
        applied = store.bound_transaction(5)
        with connection.cursor() as cursor:
            cursor.execute("SHOW idle_in_transaction_session_timeout")
            inside = cursor.fetchone()[0]
    if "transaction_timeout" in applied:  # PostgreSQL 17 and later
        assert applied == {"transaction_timeout": "5s"}
    else:
        assert applied == {"idle_in_transaction_session_timeout": "5s", "statement_timeout": "5s"}
        assert inside == "5s"
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
        cursor.execute("SET statement_timeout = '2s'")
    try:
        with transaction.atomic():
            applied = store.bound_transaction(5)
        if "statement_timeout" in applied:
            assert applied["statement_timeout"] == "2s"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")


@pytest.mark.parametrize(
    ("session", "expected"),
    [("90s", "90s"), ("1500ms", "1500ms"), ("1h", "200s"), ("2d", "200s"), ("0", "200s")],
)
def test_the_bound_reads_the_connections_own_timeout_in_any_unit(session, expected):
    # The statement reads the connection's value as PostgreSQL shows it, in its unit.
    store = JobStore(boss.context)
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = %s", [session])
    try:
        with transaction.atomic():
            applied = store.bound_transaction(200)
        if "transaction_timeout" not in applied:  # before PostgreSQL 17
            assert applied["statement_timeout"] == expected
            assert applied["idle_in_transaction_session_timeout"] == "200s"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"transactional": True, "transaction_timeout_seconds": 0},
            "transaction_timeout_seconds must be an integer >= 1",
        ),
        (
            {"transactional": True, "transaction_timeout_seconds": -5},
            "transaction_timeout_seconds must be an integer >= 1",
        ),
        (
            {"transactional": True, "transaction_timeout_seconds": 1.5},
            "transaction_timeout_seconds must be an integer",
        ),
        (
            {"transactional": True, "transaction_timeout_seconds": 10**9},
            "transaction_timeout_seconds must be at most",
        ),
        ({"transaction_timeout_seconds": 30}, "transaction_timeout_seconds needs transactional=True"),
        ({"transactional": "yes"}, "transactional must be True or False"),
        ({"transactionl": True}, "unknown option(s) 'transactionl' (did you mean 'transactional'?)"),
        (
            {"transactional": True, "batch": True, "per_job_results": True},
            "transactional cannot be combined with per_job_results",
        ),
    ],
    ids=[
        "zero",
        "negative",
        "float",
        "too-long",
        "without-transactional",
        "not-a-bool",
        "unknown",
        "per-job",
    ],
)
def test_bad_transactional_options_are_refused_naming_the_option(options, message):
    with pytest.raises(InvalidOption) as refused:
        work("txn-bad", **options)(lambda job: None)
    assert message in str(refused.value)


def test_the_worker_command_refuses_a_bad_transactional_registration_before_any_fetch():
    boss.create_queue("txn")
    job_id = boss.send("txn", {})
    result = run_worker("--queue", "txn", "--burst", PGBOSS_TEST_EXTRA_APPS="tests.txnbroken")
    assert result.returncode == 1
    assert "invalid @work registration" in result.stderr
    assert "transaction_timeout_seconds must be an integer >= 1, not 0" in result.stderr
    assert "Traceback" not in result.stderr
    assert job_row(job_id, "state") == ("created",)


def test_a_sigterm_lets_a_running_transactional_job_commit(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("txn")
    job_id = boss.send("txn", {"sleep": 1, "marker": str(marker)})
    worker = start_worker("--queue", "txn", **TXN_APP)
    try:
        wait_for(lambda: marker_lines(marker, "wrote"), timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0, stderr
    assert groups() == [f"{job_id}-0"]
    assert job_row(job_id, "state") == ("completed",)


@pytest.mark.parametrize(("max_age", "warned"), [(0, True), (60, False)])
def test_a_transactional_worker_says_when_each_job_would_open_a_connection(
    monkeypatch, caplog, max_age, warned
):
    from django.db import connections

    from django_pgboss.worker import Worker

    boss.create_queue("txn")
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", max_age)
    caplog.set_level("WARNING", logger="django_pgboss.worker")
    Worker([Registration("txn", lambda job: None, transactional=True)], burst=True).run()
    found = [
        r.getMessage() for r in caplog.records if "each job opens a new database connection" in r.getMessage()
    ]
    assert bool(found) is warned
    if warned:
        assert "transactional queue(s) txn" in found[0]
