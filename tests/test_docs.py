"""The documentation's examples, run as written: each ```python block of docs/ that is marked
``<!-- tested ... -->`` runs here, against the real API and a real PostgreSQL.

docs/dead-letters.md and docs/tasks.md have their tests beside their features
(tests/test_redrive.py, tests/test_tasks_backend.py)."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction

from django_pgboss import boss
from django_pgboss.worker import Worker, registry
from django_pgboss.worker.registry import registrations

DOCS = Path(__file__).resolve().parents[1] / "docs"

# Django 6.1 deprecates send_mail() without settings.MAILERS; the examples send mail the way a
# Django 5.2 or 6.0 project does, and that warning is Django's, not django_pgboss's.
mailer_deprecation = pytest.mark.filterwarnings("ignore:Django 2028 will not have a default mailer")


def marked_blocks(page: str, count: int) -> list[str]:
    """The python blocks of docs/<page> marked as tested, in order (and exactly ``count`` of them,
    so a block that loses its marker is noticed)."""
    text = (DOCS / page).read_text()
    blocks = re.findall(r"<!-- tested[^>]*-->\n```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == count, f"docs/{page} has {len(blocks)} tested blocks, expected {count}"
    return blocks


def run_block(block: str, page: str, namespace: dict | None = None) -> dict:
    namespace = {} if namespace is None else namespace
    exec(compile(block, f"docs/{page}", "exec"), namespace)
    return namespace


@pytest.fixture
def shop(tmp_path, monkeypatch):
    """The tour's ``shop/jobs.py`` (docs/index.md), importable as ``shop.jobs``; the @work registry
    and sys.modules are restored afterwards."""
    jobs_block = marked_blocks("index.md", 2)[1]
    assert jobs_block.startswith("# shop/jobs.py\n")
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "jobs.py").write_text(jobs_block)
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)
    for module in ("shop.jobs", "shop"):
        sys.modules.pop(module, None)


# -- docs/index.md ---------------------------------------------------------------------------------


@mailer_deprecation
@pytest.mark.django_db(transaction=True)
def test_the_tour_sends_a_job_that_the_worker_runs(shop):
    send_block, _ = marked_blocks("index.md", 2)
    run_block(send_block, "index.md")
    import shop.jobs  # noqa: F401  (registers the handler, as pgboss_work's autodiscovery does)

    registration = registrations()["emails"]
    assert (registration.label, registration.concurrency) == ("shop.jobs.send_welcome_email", 4)
    stats = Worker([registration], burst=True).run()

    assert (stats.completed, stats.failed) == (1, 0)
    assert [(m.subject, m.to) for m in mail.outbox] == [("Welcome", ["ada@example.com"])]
    (job,) = boss.find_jobs("emails")
    assert (job.state, job.output) == ("completed", {"sent_to": "ada@example.com"})
    queue = boss.get_queue("emails")
    assert (queue.retry_limit, queue.retry_backoff, queue.dead_letter) == (3, True, "emails_dlq")


@pytest.mark.django_db(transaction=True)
def test_the_tours_send_rolls_back_with_the_user():
    send_block, _ = marked_blocks("index.md", 2)
    boss.create_queue("emails_dlq")
    boss.create_queue("emails", dead_letter="emails_dlq")
    with pytest.raises(RuntimeError), transaction.atomic():
        run_block(send_block, "index.md")
        raise RuntimeError("the view fails after the send")
    assert not User.objects.filter(username="ada").exists()
    assert boss.find_jobs("emails") == []


# -- docs/queues.md --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_policy_example_runs_as_written():
    """Every call commits on its own, as in an application, so the ledger's jobs get distinct
    created_on (inside one transaction they would share its start time, and FIFO order with it)."""
    (block,) = marked_blocks("queues.md", 1)
    namespace = run_block(block, "queues.md")
    assert namespace["head"].data == {"entry": 1}
    assert [job.data["entry"] for job in boss.find_jobs("ledger")] == [1, 2, 3]


# -- docs/jobs.md ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_sending_example_runs_as_written():
    block, _ = marked_blocks("jobs.md", 2)
    run_block(block, "jobs.md")
    assert len(boss.find_jobs("digests", limit=2000)) == 1004
    (first,) = boss.fetch("digests")
    assert first.data == {"user": 6}  # priority 10 comes first
    later = {job.data["user"] for job in boss.find_jobs("digests", queued=True, limit=2000)}
    assert {8, 9} <= later


@pytest.mark.django_db
def test_the_editing_example_runs_as_written():
    _, block = marked_blocks("jobs.md", 2)
    run_block(block, "jobs.md")
    (job,) = boss.find_jobs("reports")
    assert (job.data, job.priority, job.singleton_key) == ({"week": 13}, 5, "acme")
    assert boss.fetch("reports")[0].id == job.id  # start_after=0: due now


# -- docs/testing.md -------------------------------------------------------------------------------


@mailer_deprecation
@pytest.mark.django_db(transaction=True)
def test_the_testing_page_tests_pass(shop):
    unit, run, worker, spies, clock, timers, worker_timers = marked_blocks("testing.md", 7)

    namespace = run_block(unit, "testing.md")
    namespace["test_the_welcome_email_goes_to_the_user"](None)
    User.objects.all().delete()

    # As pytest-django's db fixture runs them: each in a transaction rolled back afterwards.
    namespace = run_block(run, "testing.md")
    for test in ("test_the_welcome_email_is_sent", "test_a_missing_user_fails_the_job_then_dead_letters_it"):
        with transaction.atomic():
            namespace[test](None)
            transaction.set_rollback(True)
    assert boss.get_queues() == []

    namespace = run_block(worker, "testing.md")
    fixture = inspect.unwrap(namespace["queues"])(None)
    next(fixture)
    namespace["test_a_signup_sends_the_welcome_email"](None)
    next(fixture, None)  # the fixture's teardown
    assert boss.get_queues() == []

    queues = namespace["queues"]
    namespace = run_block(spies, "testing.md", {"queues": queues})
    fixture = inspect.unwrap(queues)(None)
    next(fixture)
    worker_fixture = inspect.unwrap(namespace["worker"])(None)
    running = next(worker_fixture)
    namespace["test_the_worker_sends_the_welcome_email"](running)
    next(worker_fixture, None)
    next(fixture, None)
    assert boss.get_queues() == []

    namespace = run_block(timers, "testing.md")
    namespace["test_the_monitor_fails_a_stuck_job"](None)
    boss.delete_queue("exports")

    namespace = run_block(worker_timers, "testing.md")
    namespace["test_a_stuck_export_fails_at_its_deadline"](None)
    boss.delete_queue("exports")

    namespace = run_block(clock, "testing.md")
    namespace["test_an_unfinished_job_expires"](None)
    (job,) = boss.find_jobs("reports")
    assert (job.state, job.output) == ("failed", {"value": {"message": "job timed out"}})
