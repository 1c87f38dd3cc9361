"""The worker's fetch loop claims with the claim's generic plan (JobStore.use_generic_plans): one
plan per connection instead of one per fetch, set again after a reconnect, and only on the loop's
own connection (a handler's stays as the user configured it)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test import override_settings

from django_pgboss import boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM_PLANS = (
    "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements "
    "WHERE statement LIKE '%next AS%'"
)


def _in_own_thread(work):
    """Run ``work`` on a thread of its own (its own connection, closed after), return its result."""
    result: list = []
    failure: list = []

    def run():
        try:
            result.append(work())
        except BaseException as exc:  # handed to the test below
            failure.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if failure:
        raise failure[0]
    return result[0]


def _claim_plans(generic: bool) -> tuple[int, int, str]:
    store = JobStore(boss.context)
    for _ in range(6):
        if generic:
            store.use_generic_plans()
        store.fetch("plans", batch_size=2)
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_PLANS)
        generic_plans, custom_plans = cursor.fetchone()
        cursor.execute("SHOW plan_cache_mode")
        mode = cursor.fetchone()[0]
    return int(generic_plans), int(custom_plans), mode


def test_the_claim_is_planned_once_with_generic_plans_and_on_every_fetch_without():
    boss.create_queue("plans")
    boss.insert("plans", [{"data": {"i": i}} for i in range(30)])
    # Without: PostgreSQL plans the claim anew each time (its generic plan is costed for a tenth of
    # the queue, never below a custom plan for the LIMIT it is given).
    generic_plans, custom_plans, mode = _in_own_thread(lambda: _claim_plans(generic=False))
    assert (generic_plans, mode) == (0, "auto")
    assert custom_plans >= 4
    generic_plans, custom_plans, mode = _in_own_thread(lambda: _claim_plans(generic=True))
    assert mode == "force_generic_plan"
    assert custom_plans == 0
    assert generic_plans >= 4


def test_the_fetch_loop_claims_with_generic_plans_again_after_a_reconnect_and_handlers_keep_theirs():
    boss.create_queue("plans")
    boss.insert("plans", [{"data": {"i": i}} for i in range(12)])
    seen: list[tuple[str, int]] = []
    handler_modes: list[str] = []

    def handler(job):
        with connection.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            handler_modes.append(cursor.fetchone()[0])

    worker = Worker([Registration("plans", handler, batch_size=2, concurrency=1)], burst=True, listen=False)
    fetch = worker.jobs.fetch

    def watched_fetch(*args, **kwargs):
        jobs = fetch(*args, **kwargs)
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('plan_cache_mode'), pg_backend_pid()")
            seen.append(cursor.fetchone())
        if len(seen) == 2:
            # A lost connection: the loop's next fetch runs on a new one, which must be set again.
            connection.close()
        return jobs

    worker.jobs.fetch = watched_fetch  # type: ignore[method-assign]
    worker.run()
    assert worker.stats.completed == 12
    assert len(seen) >= 3
    assert {mode for mode, _pid in seen} == {"force_generic_plan"}
    assert len({pid for _mode, pid in seen}) == 2
    assert handler_modes and set(handler_modes) == {"auto"}


def test_without_prepared_statements_the_fetch_loop_leaves_its_connection_as_configured(settings):
    boss.create_queue("plans")
    boss.insert("plans", [{"data": {"i": i}} for i in range(4)])
    seen: list[str] = []
    worker = Worker([Registration("plans", lambda job: None, batch_size=2)], burst=True, listen=False)
    fetch = worker.jobs.fetch

    def watched_fetch(*args, **kwargs):
        jobs = fetch(*args, **kwargs)
        with connection.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            seen.append(cursor.fetchone()[0])
        return jobs

    worker.jobs.fetch = watched_fetch  # type: ignore[method-assign]
    with override_settings(PGBOSS={**settings.PGBOSS, "PREPARED_STATEMENTS": False}):
        worker.run()
    assert worker.stats.completed == 4
    assert seen and set(seen) == {"auto"}
