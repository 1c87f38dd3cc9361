"""The worker's log records as an error tracker and an operator read them: a handler's exception
as one ERROR record per failed attempt carrying the exception itself, a job failed for good as a
WARNING, a job's start and end at DEBUG (``pgboss_work -v 2``), and the start banner."""

from __future__ import annotations

import logging

import pytest

from django_pgboss import boss
from django_pgboss.tasks.compat import task_backends
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.processes import run_worker
from tests.taskapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


class ErrorTrackerHandler(logging.Handler):
    """Keeps every record; ``events`` are those Sentry's logging integration sends as events (at
    its default event_level, ERROR and above; the rest become breadcrumbs), and what makes an
    event an exception with a traceback there is the record's ``exc_info``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def events(self) -> list[logging.LogRecord]:
        return [record for record in self.records if record.levelno >= logging.ERROR]

    def at(self, level: int) -> list[logging.LogRecord]:
        return [record for record in self.records if record.levelno == level]


@pytest.fixture
def tracker():
    """An ErrorTrackerHandler on the django_pgboss logger, at DEBUG; the logger restored after."""
    logger = logging.getLogger("django_pgboss")
    handler = ErrorTrackerHandler()
    saved_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(saved_level)


def burst(*registrations: Registration) -> None:
    Worker(list(registrations), burst=True).run()


def failing_handler(kind: str, raised: list[BaseException]):
    """A handler of ``kind`` that raises a new ValueError on each call, kept in ``raised``."""

    def fail(job) -> None:
        exc = ValueError(f"no such address (attempt {job.retry_count + 1})")
        raised.append(exc)
        raise exc

    if kind == "async":

        async def fail_async(job) -> None:
            fail(job)

        return Registration("flaky", fail_async, polling_interval_seconds=0.1)
    return Registration("flaky", fail, polling_interval_seconds=0.1, transactional=kind == "transactional")


@pytest.mark.parametrize("kind", ["threaded", "async", "transactional"])
def test_a_handler_exception_is_one_error_event_per_attempt_carrying_the_exception(tracker, kind):
    boss.create_queue("flaky", retry_limit=1)
    job_id = boss.send("flaky", {})
    raised: list[BaseException] = []
    # Two bursts: the second runs the retry, whichever way the first ended around it.
    burst(failing_handler(kind, raised))
    burst(failing_handler(kind, raised))
    events = tracker.events
    assert len(raised) == 2
    assert [record.exc_info[1] for record in events] == raised
    assert all(record.exc_info[1] is exc for record, exc in zip(events, raised, strict=True))
    # The traceback reaches into the handler, as an error tracker shows it.
    assert all(record.exc_info[2] is not None for record in events)
    assert [(r.name, r.queue, r.job_id, r.attempt, r.will_retry) for r in events] == [
        ("django_pgboss.worker", "flaky", job_id, 1, True),
        ("django_pgboss.worker", "flaky", job_id, 2, False),
    ]
    assert events[0].getMessage() == (
        f"job {job_id} of flaky failed on attempt 1: ValueError: no such address (attempt 1); it will retry"
    )
    assert events[1].getMessage().endswith("; no retries left")
    (gave_up,) = [r for r in tracker.at(logging.WARNING) if "failed for good" in r.getMessage()]
    assert (
        gave_up.getMessage() == f"job {job_id} of flaky failed for good after 2 attempt(s): no retries left"
    )
    assert (gave_up.queue, gave_up.job_id, gave_up.attempt) == ("flaky", job_id, 2)


def test_a_batch_handler_exception_is_one_event_naming_every_job(tracker):
    boss.create_queue("flaky", retry_limit=0)
    ids = sorted(boss.send("flaky", {"n": n}) for n in range(3))

    def fail_batch(jobs) -> None:
        raise RuntimeError(f"{len(jobs)} jobs at once")

    burst(Registration("flaky", fail_batch, batch=True, batch_size=3, polling_interval_seconds=0.1))
    (event,) = tracker.events
    assert isinstance(event.exc_info[1], RuntimeError) and str(event.exc_info[1]) == "3 jobs at once"
    assert (event.queue, sorted(event.job_ids), event.will_retry) == ("flaky", ids, False)
    warned = sorted(r.job_id for r in tracker.at(logging.WARNING) if "failed for good" in r.getMessage())
    assert warned == ids


def test_a_dead_lettered_job_is_a_warning_naming_its_copy(tracker):
    boss.create_queue("flaky-dlq")
    boss.create_queue("flaky", retry_limit=0, dead_letter="flaky-dlq")
    job_id = boss.send("flaky", {})

    def fail(job) -> None:
        raise ValueError("refused")

    burst(Registration("flaky", fail, polling_interval_seconds=0.1))
    (copy,) = boss.find_jobs("flaky-dlq")
    (warning,) = [r for r in tracker.at(logging.WARNING) if "dead letter" in r.getMessage()]
    assert warning.getMessage() == (
        f"job {job_id} of flaky failed for good and went to its dead letter queue flaky-dlq as job {copy.id}"
    )
    assert (warning.queue, warning.job_id, warning.dead_letter, warning.dead_letter_id) == (
        "flaky",
        job_id,
        "flaky-dlq",
        copy.id,
    )
    # Once, not again as "no retries left".
    assert not [r for r in tracker.at(logging.WARNING) if "no retries left" in r.getMessage()]


def test_a_job_that_succeeds_logs_its_start_and_end_at_debug_and_nothing_above(tracker):
    boss.create_queue("fine")
    job_id = boss.send("fine", {})
    burst(Registration("fine", lambda job: {"ok": True}, polling_interval_seconds=0.1))
    mine = [r for r in tracker.records if getattr(r, "job_id", None) == job_id]
    assert [r.levelname for r in mine] == ["DEBUG", "DEBUG"]
    assert mine[0].getMessage() == f"job {job_id} of fine started (attempt 1)"
    assert mine[1].getMessage().startswith(f"job {job_id} of fine ended in ")
    assert mine[1].getMessage().endswith("s: the handler returned")
    assert mine[1].seconds >= 0
    assert tracker.events == []


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_failing_task_is_an_error_event_with_the_tasks_own_exception(tracker, kind):
    task = tasks.fail_always if kind == "sync" else tasks.async_fail
    result = task.using(retry_limit=0).enqueue("broken input")
    backend = task_backends["default"]
    backend.ensure_queues()
    Worker(backend.registrations(), boss=backend.boss, burst=True).run()
    (event,) = [r for r in tracker.events if r.name == "django_pgboss.worker"]
    exc = event.exc_info[1]
    assert type(exc) is (ValueError if kind == "sync" else LookupError)
    assert str(exc) == "broken input"
    # The traceback is the task's own: its innermost frame is the task function.
    frame = event.exc_info[2]
    while frame.tb_next is not None:
        frame = frame.tb_next
    assert frame.tb_frame.f_code.co_name == task.func.__name__
    assert (event.queue, event.job_id, event.attempt, event.will_retry) == ("default", result.id, 1, False)


def test_pgboss_work_at_verbosity_2_shows_each_jobs_start_and_end():
    boss.create_queue("echo")
    job_id = boss.send("echo", {"n": 1})
    verbose = run_worker("--burst", "--queue", "echo", "-v", "2")
    assert verbose.returncode == 0, verbose.stderr
    assert f"DEBUG django_pgboss.worker: job {job_id} of echo started (attempt 1)" in verbose.stderr
    assert f"DEBUG django_pgboss.worker: job {job_id} of echo ended in " in verbose.stderr
    other = boss.send("echo", {"n": 2})
    default = run_worker("--burst", "--queue", "echo")
    assert default.returncode == 0, default.stderr
    assert "worked 1 job(s): 1 completed" in default.stdout
    assert other not in default.stderr


def test_the_start_banner_says_what_the_worker_runs_and_where():
    from django.db import connection

    boss.create_queue("echo")
    boss.create_queue("slow")
    completed = run_worker("--burst", "--queue", "echo", "--queue", "slow", "--concurrency", "3")
    assert completed.returncode == 0, completed.stderr
    banner = completed.stderr[completed.stderr.index("worker started: django_pgboss ") :]
    settings = connection.settings_dict
    assert f"  database 'default' ({settings['NAME']} on {settings['HOST']}:{settings['PORT']})" in banner
    assert f", schema {boss.schema}\n" in banner
    assert "  burst: drains its queues, then exits; a stop gives running jobs 30s\n" in banner
    assert "  2 queue(s):\n" in banner
    assert "    echo -> tests.workapp.jobs.echo (concurrency 3, batch size 10)\n" in banner
    assert "    slow -> tests.workapp.jobs.slow (concurrency 3, batch size 1)\n" in banner
    if settings["PASSWORD"]:
        assert settings["PASSWORD"] not in banner
