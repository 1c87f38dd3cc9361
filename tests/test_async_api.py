"""Boss's async twins (``await boss.asend(...)``): the same arguments, results, errors and
transactional meaning as the sync calls, and a sync call on a running event loop refused by name.

The coroutines run under ``async_to_sync``, as Django's own test case runs an ``async def`` test:
the twins' thread-sensitive calls then run on the test's thread, on its connection.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connection, transaction

from django_pgboss import Boss, boss
from django_pgboss.api.event_loop import public_methods
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import InvalidQueueName, QueueNotFound
from tests.conftest import database_url

ROOT = Path(__file__).resolve().parents[1]


def other_connection_count(queue: str) -> int:
    """How many jobs of ``queue`` a connection of its own sees (what is committed)."""
    with psycopg.connect(database_url()) as other:
        schema = quote_identifier(pgboss_settings.SCHEMA)
        return other.execute(f"SELECT count(*) FROM {schema}.job WHERE name = %s", [queue]).fetchone()[0]


def run(coroutine_function, *args, **kwargs):
    return async_to_sync(coroutine_function)(*args, **kwargs)


def test_every_public_boss_method_has_an_async_twin_with_its_signature():
    names = public_methods(Boss)
    assert {"send", "insert", "fetch", "complete", "fail", "update", "upsert", "redrive"} <= set(names)
    for name in names:
        twin = getattr(Boss, f"a{name}", None)
        assert twin is not None, f"Boss.{name} has no async twin a{name}"
        assert inspect.iscoroutinefunction(twin), f"Boss.a{name} is not a coroutine function"
        assert inspect.signature(twin) == inspect.signature(getattr(Boss, name)), name
        assert f"[django_pgboss.Boss.{name}]" in twin.__doc__


def test_the_twins_module_is_what_the_generator_writes():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    check = subprocess.run(
        [sys.executable, "scripts/gen_async_twins.py", "--check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.django_db
@pytest.mark.queue("async-q")
def test_asend_afetch_acomplete_round_trip_like_the_sync_calls(queue):
    async def round_trip():
        job_id = await boss.asend(queue, {"n": 1}, priority=3)
        [job] = await boss.afetch(queue, include_metadata=True)
        completed = await boss.acomplete(queue, job, {"ok": True})
        return job_id, job, completed, await boss.aget_job_by_id(queue, job_id)

    job_id, job, completed, stored = run(round_trip)
    assert job.id == job_id and job.data == {"n": 1} and job.priority == 3
    assert completed == 1
    assert stored.state == "completed" and stored.output == {"ok": True}
    # The sync call sees what the twin wrote: one connection, one database.
    assert boss.get_job_by_id(queue, job_id) == stored


@pytest.mark.django_db
@pytest.mark.queue("async-q")
def test_twins_return_what_the_sync_calls_return(queue):
    async def calls():
        ids = await boss.ainsert(queue, [{"data": {"i": i}} for i in range(3)], return_ids=True)
        found = await boss.afind_jobs(queue, queued=True)
        info = await boss.aget_queue(queue)
        failed = await boss.afail(queue, (await boss.afetch(queue))[0], {"why": "test"})
        updated = await boss.aupdate(queue, {"i": 99}, id=ids[2])
        return ids, found, info, failed, updated

    ids, found, info, failed, updated = run(calls)
    assert [job.id for job in found] == ids
    assert info == boss.get_queue(queue)
    assert failed == 1
    assert updated.updated == 1 and boss.get_job_by_id(queue, ids[2]).data == {"i": 99}


@pytest.mark.django_db
@pytest.mark.queue("async-q")
def test_a_twin_runs_the_method_of_the_boss_it_was_awaited_on(queue):
    # The thread-sensitive wrappers are made once per class and method, and bound to the Boss at
    # each call: a subclass's override, and a method replaced on one instance, are what run.
    class AuditedBoss(Boss):
        def send(self, name, data=None, **options):
            return super().send(name, {**data, "audited": True}, **options)

    audited, plain, stand_in = AuditedBoss(), Boss(), Boss()
    stand_in.send = lambda name, data=None, **options: f"stand-in for {name}"

    async def sends():
        return (
            await audited.asend(queue, {"n": 1}),
            await plain.asend(queue, {"n": 2}),
            await stand_in.asend(queue, {"n": 3}),
            await audited.asend(queue, {"n": 4}),
        )

    first, second, third, fourth = run(sends)
    assert boss.get_job_by_id(queue, first).data == {"n": 1, "audited": True}
    assert boss.get_job_by_id(queue, second).data == {"n": 2}
    assert third == f"stand-in for {queue}"
    assert boss.get_job_by_id(queue, fourth).data == {"n": 4, "audited": True}


@pytest.mark.django_db
def test_twins_raise_the_sync_calls_errors_before_any_sql():
    async def bad_name():
        await boss.asend("not a queue name!")

    async def missing_queue():
        await boss.asend("no-such-queue")

    with pytest.raises(InvalidQueueName):
        run(bad_name)
    with pytest.raises(QueueNotFound, match="no-such-queue"):
        run(missing_queue)
    # The caller's transaction (the test's) is still usable.
    assert User.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.queue("async-q")
def test_asend_joins_a_transaction_opened_on_djangos_thread_and_rolls_back_with_it(queue):
    async def send_then_roll_back():
        atomic = transaction.atomic()
        await sync_to_async(atomic.__enter__)()
        await User.objects.acreate(username="ada")
        job_id = await boss.asend(queue, {"user": "ada"})
        seen_outside = await sync_to_async(other_connection_count)(queue)
        await sync_to_async(atomic.__exit__)(RuntimeError, RuntimeError("abort"), None)
        return job_id, seen_outside

    job_id, seen_outside = run(send_then_roll_back)
    assert job_id is not None
    assert seen_outside == 0  # uncommitted: another connection does not see the job
    assert boss.get_job_by_id(queue, job_id) is None
    assert not User.objects.filter(username="ada").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.queue("async-q")
def test_asend_commits_with_the_transaction_it_joined(queue):
    async def send_then_commit():
        atomic = transaction.atomic()
        await sync_to_async(atomic.__enter__)()
        await User.objects.acreate(username="bob")
        job_id = await boss.asend(queue, {"user": "bob"})
        await sync_to_async(atomic.__exit__)(None, None, None)
        return job_id

    job_id = run(send_then_commit)
    assert other_connection_count(queue) == 1
    assert boss.get_job_by_id(queue, job_id).data == {"user": "bob"}
    assert User.objects.filter(username="bob").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.queue("async-q")
def test_a_send_in_a_sync_to_async_wrapped_atomic_block_rolls_back_with_it(queue):
    class Abort(Exception):
        pass

    @sync_to_async
    def place_order():
        with transaction.atomic():
            User.objects.create(username="cy")
            boss.send(queue, {"user": "cy"})
            raise Abort

    async def view():
        with pytest.raises(Abort):
            await place_order()
        return await boss.afind_jobs(queue)

    assert run(view) == []
    assert not User.objects.filter(username="cy").exists()


@pytest.mark.django_db
@pytest.mark.queue("async-q")
def test_a_sync_call_on_a_running_event_loop_names_its_twin(queue):
    async def sync_call_in_async_code():
        boss.send(queue, {"n": 1})

    async def sync_fetch_in_async_code():
        boss.fetch(queue)

    with pytest.raises(SynchronousOnlyOperation, match=r"Boss\.send\(\).*await boss\.asend\(\.\.\.\)"):
        run(sync_call_in_async_code)
    with pytest.raises(SynchronousOnlyOperation, match=r"await boss\.afetch"):
        run(sync_fetch_in_async_code)
    assert boss.find_jobs(queue) == []  # refused before any statement


@pytest.mark.django_db(transaction=True)
@pytest.mark.queue("async-q")
def test_django_allow_async_unsafe_lets_a_sync_call_run_on_the_loop(queue, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")

    async def sync_call_in_async_code():
        try:
            return boss.send(queue, {"n": 1})
        finally:
            connection.close()  # the loop's thread opened a connection of its own

    job_id = run(sync_call_in_async_code)
    assert boss.get_job_by_id(queue, job_id) is not None


def test_off_a_loop_the_sync_calls_are_unchanged():
    # The guard is a check and a call: the method keeps its name, docstring and signature.
    assert Boss.send.__name__ == "send" and Boss.send.__doc__.startswith("Send one job")
    assert "name" in inspect.signature(Boss.send).parameters
    assert connection.vendor == "postgresql"
