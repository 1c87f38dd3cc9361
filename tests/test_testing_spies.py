"""wait_for_job() and JobSpy (pg-boss's spies): a test waits for a job's state, with a real worker
on a thread of the test process, in another process, or with run_jobs()."""

from __future__ import annotations

import pytest

from django_pgboss import Boss, work
from django_pgboss.exceptions import InvalidOption, InvalidQueueName, JobStateUnreachable, WaitTimedOut
from django_pgboss.testing import JobSpy, run_jobs, wait_for_job
from django_pgboss.worker import registry
from django_pgboss.worker.registry import Registration
from tests.processes import in_process, start_worker

boss = Boss()


def _double(job):
    if job.data.get("fail"):
        raise ValueError("cannot double that")
    return {"doubled": job.data["n"] * 2}


@pytest.fixture
def doubling(transactional_db):
    """Queue "doubling", its handler on a Worker running on a thread of the test process."""
    boss.create_queue("doubling", retry_limit=0)
    worker, thread = in_process(Registration("doubling", _double, polling_interval_seconds=0.2))
    yield worker
    worker.stop()
    thread.join(30)


def test_wait_for_job_returns_the_job_once_a_worker_on_a_thread_completed_it(doubling):
    job_id = boss.send("doubling", {"n": 21})

    job = wait_for_job("doubling", job_id, "completed", timeout=30)

    assert (job.id, job.state, job.output) == (job_id, "completed", {"doubled": 42})


def test_wait_for_job_says_at_once_when_the_job_ended_otherwise(doubling):
    job_id = boss.send("doubling", {"n": 1, "fail": True})

    with pytest.raises(JobStateUnreachable, match=r"is 'failed'.*cannot double that"):
        wait_for_job("doubling", job_id, "completed", timeout=30)


@pytest.mark.django_db(transaction=True)
def test_wait_for_job_sees_a_worker_in_another_process():
    boss.create_queue("echo")
    job_id = boss.send("echo", {"from": "the test"})
    worker = start_worker("--queue", "echo")
    try:
        job = wait_for_job("echo", job_id, timeout=60)
    finally:
        worker.terminate()
        worker.communicate(timeout=60)

    assert job.output["echo"] == {"from": "the test"}
    assert job.output["pid"] == worker.pid


@pytest.mark.django_db
def test_wait_for_job_gives_up_after_its_timeout_saying_where_the_job_is():
    boss.create_queue("idle")
    job_id = boss.send("idle")

    with pytest.raises(WaitTimedOut, match=r"did not become 'completed' within 0.1s: it is 'created'"):
        wait_for_job("idle", job_id, timeout=0.1)


def test_wait_for_job_refuses_bad_arguments_before_any_sql():
    with pytest.raises(InvalidQueueName):
        wait_for_job("bad name!", "00000000-0000-0000-0000-000000000000")
    with pytest.raises(InvalidOption, match="id"):
        wait_for_job("q", "not-a-uuid")
    with pytest.raises(InvalidOption, match="state must be one of"):
        wait_for_job("q", "00000000-0000-0000-0000-000000000000", "done")
    with pytest.raises(InvalidOption, match="timeout"):
        wait_for_job("q", "00000000-0000-0000-0000-000000000000", timeout=-1)
    with pytest.raises(InvalidOption, match="no database"):
        wait_for_job("q", "00000000-0000-0000-0000-000000000000", using="elsewhere")


def test_a_spy_records_what_a_worker_on_a_thread_handled(doubling):
    with JobSpy("doubling") as spy:
        first = boss.send("doubling", {"n": 1})
        boss.send("doubling", {"n": 2})
        failing = boss.send("doubling", {"n": 3, "fail": True})

        done = spy.wait_for_job(lambda data: data["n"] == 2, "completed", timeout=30)
        by_id = spy.wait_for_job_with_id(first, "completed", timeout=30)
        failed = spy.wait_for_job_with_id(failing, "failed", timeout=30)

    assert (done.name, done.state, done.output) == ("doubling", "completed", {"doubled": 4})
    assert (by_id.id, by_id.data, by_id.output) == (first, {"n": 1}, {"doubled": 2})
    assert failed.output["message"] == "cannot double that"
    assert {(job.id, job.state) for job in spy.jobs} >= {(first, "active"), (first, "completed")}
    spy.clear()
    assert spy.jobs == []


@pytest.mark.django_db
def test_a_spy_sees_what_run_jobs_ran_and_skips_a_failure_that_will_retry():
    registry.autodiscover()  # what run_jobs() imports stays registered after the test
    saved = dict(registry._registry)
    try:

        @work("flaky-once")
        def flaky(job):
            if job.retry_count == 0:
                raise RuntimeError("not yet")
            return "done"

        boss.create_queue("flaky-once", retry_limit=1, retry_delay=0)
        job_id = boss.send("flaky-once", {"k": "v"})
        with JobSpy("flaky-once") as spy:
            run_jobs("flaky-once")
    finally:
        registry._registry.clear()
        registry._registry.update(saved)

    assert [(job.id, job.state) for job in spy.jobs] == [(job_id, "active"), (job_id, "completed")]
    assert spy.wait_for_job_with_id(job_id, "completed", timeout=0).output == {"value": "done"}


@pytest.mark.django_db
def test_a_spy_wait_gives_up_after_its_timeout():
    with JobSpy("nothing") as spy, pytest.raises(WaitTimedOut, match=r"within 0\.1s"):
        spy.wait_for_job(lambda data: True, "completed", timeout=0.1)


def test_a_spy_refuses_bad_arguments():
    with pytest.raises(InvalidQueueName):
        JobSpy("bad name!")
    spy = JobSpy("q")
    with pytest.raises(InvalidOption, match="state is one of"):
        spy.wait_for_job(lambda data: True, "retry")
    with pytest.raises(InvalidOption, match="selector"):
        spy.wait_for_job("not a function")
