"""The README's examples, run as written: a user's first code must work when pasted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from django_pgboss import boss
from django_pgboss.worker import registry
from django_pgboss.worker.registry import registrations
from django_pgboss.worker.runner import Worker
from tests.helpers import job_row

README = Path(__file__).resolve().parents[1] / "README.md"


def python_block(marker: str) -> str:
    """The README's python code block that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (block,) = [block for block in blocks if marker in block]
    return block


@pytest.fixture
def clean_registry():
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)


@pytest.mark.django_db(transaction=True)
def test_the_readme_jobs_module_runs_under_the_worker(clean_registry):
    emails = []
    namespace = {"__name__": "shop.jobs", "send_the_email": emails.append}
    exec(compile(python_block("# shop/jobs.py"), "README.md (shop/jobs.py)", "exec"), namespace)
    registration = registrations()["emails"]
    assert (registration.label, registration.concurrency) == ("shop.jobs.send_email", 4)

    boss.create_queue("emails-dead")
    boss.create_queue("emails", retry_limit=3, retry_backoff=True, dead_letter="emails-dead")
    job_id = boss.send("emails", {"order": 7}, priority=5)
    Worker([registration], burst=True).run()
    assert emails == [{"order": 7}]
    assert job_row(job_id, "state", "output") == ("completed", {"sent": True})


@pytest.mark.django_db
def test_the_readme_send_fetch_and_settle_example_runs(clean_registry):
    from django.db import transaction

    code = python_block("boss.fetch(")
    created = []

    class Order:
        class objects:  # stands in for the user's model manager
            @staticmethod
            def create(*args, **kwargs):
                created.append(kwargs)
                return type("order", (), {"pk": 42})()

    sent = []

    def send_the_email(data):
        sent.append(data)

    namespace = {"Order": Order, "send_the_email": send_the_email, "transaction": transaction}
    exec(compile(code, "README.md", "exec"), namespace)  # create(...) passes Ellipsis: valid as written
    assert sent == [{"order": 42}]
    (job,) = boss.find_jobs("emails")
    assert (job.state, job.output, job.priority) == ("completed", {"sent": True}, 5)
