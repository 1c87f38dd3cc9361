"""Fixtures of the example project's tests: the shop's queues, and a clean pg-boss schema after committing tests.

The tests under example_project/ run with the example project's own settings (scripts/test.sh runs them in a second
pytest run: ``pytest --ds=example_project.settings example_project``), on the database DATABASE_URL names.
"""

from __future__ import annotations

import pytest
from django.db import connection

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.tasks.registrations import task_registrations
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration, autodiscover, registrations
from example_project.shop import queues


def reset_pgboss_schema() -> None:
    """Empty pg-boss's schema (queues, jobs, schedules, stats) as a fresh migrate leaves it."""
    schema = quote_identifier(pgboss_settings.SCHEMA)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {schema}.delete_queue(name) FROM {schema}.queue WHERE partition")
        cursor.execute(f"UPDATE {schema}.version SET cron_on = NULL, monitor_backoff_on = NULL")
        cursor.execute(
            f"TRUNCATE {schema}.job, {schema}.queue_stats, {schema}.job_dependency, {schema}.warning, "
            f"{schema}.subscription, {schema}.schedule, {schema}.bam, {schema}.queue"
        )


@pytest.fixture(autouse=True)
def _reset_pgboss_schema_after_committing_tests(request):
    """A committing test writes pg-boss rows for real; Django's flush empties only the shop's tables."""
    marker = request.node.get_closest_marker("django_db")
    if "transactional_db" not in request.fixturenames and not (marker and marker.kwargs.get("transaction")):
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    reset_pgboss_schema()


@pytest.fixture
def shop_queues(db):
    """The shop's queues and nightly schedule, as ``manage.py shop_setup`` creates them."""
    queues.setup()


def handlers(*names: str) -> list[Registration]:
    """The registrations pgboss_work would run for these queues (@work handlers and the tasks backend)."""
    autodiscover()
    found = {**registrations(), **task_registrations()}
    return [found[name] for name in names]


@pytest.fixture
def work_off():
    """Run a burst worker over the named queues in this process until nothing is ready, like pgboss_work --burst."""

    def run(*names: str):
        return Worker(handlers(*names), burst=True, grace_seconds=5).run()

    return run
