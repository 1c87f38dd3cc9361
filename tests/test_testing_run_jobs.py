"""django_pgboss.testing.run_jobs(): registered handlers run on the test's thread until the queues
are idle, inside the test's transaction or outside it, each call ending as under a worker."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.db import connection

from django_pgboss import Boss, JobResult, work
from django_pgboss import signals as pgboss_signals
from django_pgboss.exceptions import InvalidOption, InvalidQueueName, QueueNotFound
from django_pgboss.testing import TestClock, run_jobs
from django_pgboss.worker import registry

boss = Boss()


@pytest.fixture
def handlers():
    """Handlers registered for one test, the registry as it was afterwards. The installed apps'
    jobs modules are imported first (run_jobs() imports them), so that what they register stays."""
    registry.autodiscover()
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)


def _register_user_writer(queue: str = "signups", **options):
    @work(queue, **options)
    def create_user(job):
        user = User.objects.create_user(job.data["username"])
        return {"user": user.pk}

    return create_user


@pytest.mark.django_db
def test_a_job_runs_inside_the_tests_transaction(handlers):
    _register_user_writer()
    boss.create_queue("signups")
    job_id = boss.send("signups", {"username": "ada"})

    run = run_jobs("signups")

    user = User.objects.get(username="ada")
    assert [(ran.id, ran.state, ran.output, ran.attempt) for ran in run] == [
        (job_id, "completed", {"user": user.pk}, 1)
    ]
    assert run.idle
    assert boss.get_job_by_id("signups", job_id).state == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_job_runs_outside_a_transaction_as_under_a_worker(handlers):
    _register_user_writer()
    boss.create_queue("signups")
    job_id = boss.send("signups", {"username": "grace"})

    run = run_jobs()  # every registered queue that exists

    assert [ran.id for ran in run.completed] == [job_id]
    assert User.objects.filter(username="grace").exists()


@pytest.mark.django_db
def test_a_failing_handler_retries_then_dead_letters(handlers):
    @work("payments")
    def charge(job):
        raise ValueError(f"card {job.data['card']} declined")

    boss.create_queue("payments-dead")
    boss.create_queue("payments", retry_limit=2, retry_delay=0, dead_letter="payments-dead")
    job_id = boss.send("payments", {"card": "4242"})

    run = run_jobs("payments")

    assert [(ran.id, ran.attempt, ran.state) for ran in run] == [
        (job_id, 1, "retry"),
        (job_id, 2, "retry"),
        (job_id, 3, "failed"),
    ]
    assert all(isinstance(ran.error, ValueError) for ran in run)
    assert run.failed[0].output["message"] == "card 4242 declined"
    copy = boss.fetch("payments-dead")[0]
    assert copy.data == {"card": "4242"}


@pytest.mark.django_db
def test_a_retry_waits_for_its_delay_on_the_test_clock(handlers):
    attempts = []

    @work("reports")
    def build(job):
        attempts.append(job.retry_count)
        if job.retry_count == 0:
            raise RuntimeError("the source is not ready")
        return "built"

    with TestClock(dt.datetime(2030, 1, 1, tzinfo=dt.UTC)) as clock:
        boss.create_queue("reports", retry_limit=1, retry_delay=60)
        job_id = boss.send("reports")

        first = run_jobs("reports")
        assert [ran.state for ran in first] == ["retry"]
        assert len(run_jobs("reports")) == 0  # the retry is not due yet

        clock.advance(seconds=61)
        second = run_jobs("reports")

    assert [(ran.id, ran.state, ran.output) for ran in second] == [(job_id, "completed", {"value": "built"})]
    assert attempts == [0, 1]


@pytest.mark.django_db
def test_ignore_start_after_runs_delayed_retries_and_deferred_jobs_now(handlers):
    @work("later")
    def later(job):
        if job.retry_count == 0 and job.data.get("fail_first"):
            raise RuntimeError("first attempt fails")
        return job.data

    boss.create_queue("later", retry_limit=1, retry_delay=3600)
    deferred = boss.send("later", {"n": 1}, start_after=3600)
    retried = boss.send("later", {"n": 2, "fail_first": True})

    assert [ran.id for ran in run_jobs("later")] == [retried]  # its first attempt; the other waits

    run = run_jobs("later", ignore_start_after=True)

    assert sorted((ran.id, ran.state) for ran in run) == sorted(
        [(deferred, "completed"), (retried, "completed")]
    )


@pytest.mark.django_db
def test_a_handlers_failed_statement_leaves_the_tests_transaction_usable(handlers):
    @work("divide")
    def divide(job):
        User.objects.create_user("written-before-the-error")
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    boss.create_queue("divide", retry_limit=0)
    job_id = boss.send("divide")

    run = run_jobs("divide")

    assert [ran.state for ran in run] == ["failed"]
    assert "division by zero" in run.failed[0].output["message"]
    # The transaction the test runs in goes on: its savepoint took the handler's writes back.
    assert not User.objects.filter(username="written-before-the-error").exists()
    assert boss.get_job_by_id("divide", job_id).state == "failed"
    assert boss.send("divide") is not None


@pytest.mark.django_db
def test_a_handler_that_swallows_a_database_error_fails_its_job_with_the_reason(handlers):
    @work("swallow")
    def swallow(job):
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 / 0")
        except Exception:
            pass
        return "fine, it says"

    boss.create_queue("swallow", retry_limit=0)
    boss.send("swallow")

    run = run_jobs("swallow")

    assert [ran.state for ran in run] == ["failed"]
    assert "left the transaction on database 'default' aborted" in run.failed[0].output["message"]
    assert User.objects.count() == 0  # the test's transaction still answers


@pytest.mark.django_db
def test_a_handler_that_raises_keeps_its_writes_as_under_a_worker(handlers):
    @work("half")
    def half(job):
        User.objects.create_user("half-done")
        raise RuntimeError("the second step failed")

    boss.create_queue("half", retry_limit=0)
    boss.send("half")

    run = run_jobs("half")

    assert [ran.state for ran in run] == ["failed"]
    assert User.objects.filter(username="half-done").exists()


@pytest.mark.django_db
def test_an_exception_out_of_run_jobs_leaves_the_tests_transaction_usable(handlers):
    _register_user_writer("nowhere")
    User.objects.create_user("before")

    with pytest.raises(QueueNotFound):
        run_jobs("nowhere")  # registered, but the queue was never created

    assert list(User.objects.values_list("username", flat=True)) == ["before"]
    boss.create_queue("nowhere")
    boss.send("nowhere", {"username": "after"})
    assert [ran.state for ran in run_jobs("nowhere")] == ["completed"]


def test_bad_arguments_are_refused_before_any_sql(handlers):
    # No database access in this test: a statement would fail it with pytest-django's error.
    _register_user_writer()
    with pytest.raises(InvalidOption, match="max_jobs"):
        run_jobs(max_jobs=0)
    with pytest.raises(InvalidOption, match="queues must be"):
        run_jobs(queues=5)
    with pytest.raises(InvalidQueueName):
        run_jobs(queues=["bad name!"])
    with pytest.raises(InvalidOption, match="queues is empty"):
        run_jobs(queues=[])
    with pytest.raises(InvalidOption, match="ignore_start_after"):
        run_jobs(ignore_start_after="yes")
    with pytest.raises(InvalidOption, match="no database"):
        run_jobs(using="elsewhere")
    with pytest.raises(InvalidOption, match=r"no @work handler for queue\(s\) 'unknown'"):
        run_jobs("unknown")


@pytest.mark.django_db
def test_a_batch_handler_with_per_job_results_settles_each_job(handlers):
    @work("batch", batch=True, batch_size=3, per_job_results=True)
    def handle(jobs):
        results = []
        for job in jobs:
            kind = job.data["kind"]
            if kind == "ok":
                results.append(JobResult.completed(job, {"done": job.data["n"]}))
            elif kind == "retry":
                results.append(JobResult.failed(job, {"message": "try again"}))
            else:
                results.append(JobResult.dead_letter(job, {"message": "never"}))
        return results

    boss.create_queue("batch-dead")
    boss.create_queue("batch", retry_limit=3, retry_delay=60, dead_letter="batch-dead")
    ok = boss.send("batch", {"kind": "ok", "n": 1})
    again = boss.send("batch", {"kind": "retry", "n": 2})
    never = boss.send("batch", {"kind": "dead", "n": 3})

    run = run_jobs("batch")

    assert {ran.id: (ran.state, ran.output) for ran in run} == {
        ok: ("completed", {"done": 1}),
        again: ("retry", {"message": "try again"}),
        never: ("failed", {"message": "never"}),
    }
    assert [job.data for job in boss.fetch("batch-dead")] == [{"kind": "dead", "n": 3}]


@pytest.mark.django_db
def test_a_batch_of_several_jobs_completes_without_an_output_as_pg_boss_stores_it(handlers):
    @work("many", batch=True, batch_size=5)
    def handle(jobs):
        return {"count": len(jobs)}

    boss.create_queue("many")
    for n in range(3):
        boss.send("many", {"n": n})

    run = run_jobs("many")

    assert [(ran.state, ran.output) for ran in run] == [("completed", None)] * 3


@pytest.mark.django_db
def test_a_transactional_handler_commits_or_rolls_back_with_its_job(handlers):
    @work("tx", transactional=True, transaction_timeout_seconds=2)
    def tx(job):
        User.objects.create_user(job.data["username"])
        if job.data.get("fail"):
            raise RuntimeError("rolled back")
        return "committed"

    boss.create_queue("tx", retry_limit=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), current_setting('transaction_timeout', true)"
        )
        bounds_before = cursor.fetchone()
    kept = boss.send("tx", {"username": "kept"})
    lost = boss.send("tx", {"username": "lost", "fail": True})

    run = run_jobs("tx")

    assert {ran.id: ran.state for ran in run} == {kept: "completed", lost: "failed"}
    assert list(User.objects.values_list("username", flat=True)) == ["kept"]
    # The run's bound does not outlive it in the test's transaction.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), current_setting('transaction_timeout', true)"
        )
        assert cursor.fetchone() == bounds_before


@pytest.mark.django_db
def test_an_async_handler_runs_with_the_tests_transaction_in_sight(handlers):
    User.objects.create_user("visible")

    @work("async")
    async def count_users(job):
        return {"users": await User.objects.acount()}

    boss.create_queue("async")
    boss.send("async")

    run = run_jobs("async")

    assert [(ran.state, ran.output) for ran in run] == [("completed", {"users": 1})]


@pytest.mark.django_db
def test_max_jobs_bounds_a_run_that_would_not_end(handlers):
    @work("chain")
    def chain(job):
        boss.send("chain", {"n": job.data["n"] + 1})
        return job.data["n"]

    boss.create_queue("chain")
    boss.send("chain", {"n": 0})

    run = run_jobs("chain", max_jobs=3)

    assert [ran.output for ran in run] == [{"value": 0}, {"value": 1}, {"value": 2}]
    assert not run.idle


@pytest.mark.django_db
def test_run_jobs_sends_the_workers_signals(handlers):
    _register_user_writer()
    seen = []

    def on_started(sender, queue, job, **kwargs):
        seen.append(("started", queue, job.data["username"]))

    def on_completed(sender, queue, job, output, **kwargs):
        seen.append(("completed", queue, output == {"user": User.objects.get(username="ada").pk}))

    pgboss_signals.job_started.connect(on_started)
    pgboss_signals.job_completed.connect(on_completed)
    try:
        boss.create_queue("signups")
        boss.send("signups", {"username": "ada"})
        run_jobs("signups")
    finally:
        pgboss_signals.job_started.disconnect(on_started)
        pgboss_signals.job_completed.disconnect(on_completed)

    assert seen == [("started", "signups", "ada"), ("completed", "signups", True)]


@pytest.mark.django_db
def test_a_tasks_backends_task_runs_and_its_result_is_read_inside_the_tests_transaction():
    from django_pgboss.tasks.compat import TaskResultStatus, task_backends
    from tests.taskapp import tasks

    added = tasks.add.enqueue(2, 3)
    failing = tasks.fail_always.enqueue("broken input")

    run = run_jobs(["default"])

    assert sorted((ran.id, ran.state) for ran in run if ran.state != "retry") == sorted(
        [(added.id, "completed"), (failing.id, "failed")]
    )
    backend = task_backends["default"]
    done = backend.get_result(added.id)
    assert (done.status, done.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    broken = backend.get_result(failing.id)
    assert broken.status == TaskResultStatus.FAILED
    assert len(broken.errors) == 3  # the backend's QUEUE_OPTIONS: retry_limit 2
