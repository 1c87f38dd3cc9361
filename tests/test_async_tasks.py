"""The tasks backend from async code: aenqueue() and aget_result() on Django's thread-sensitive
path (so a task joins the transaction the async code opened there), and the sync calls refused on
a running event loop with the name of what to await."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import SynchronousOnlyOperation
from django.db import transaction

from django_pgboss.tasks.compat import TaskResultStatus, task_backends
from tests.helpers import count_jobs
from tests.taskapp import tasks
from tests.test_tasks_backend import result_of, work_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_aenqueue_joins_the_transaction_opened_on_djangos_thread():
    async def enqueue_then_roll_back():
        atomic = transaction.atomic()
        await sync_to_async(atomic.__enter__)()
        await User.objects.acreate(username="task-ada")
        result = await tasks.add.aenqueue(1, 2)
        await sync_to_async(atomic.__exit__)(RuntimeError, RuntimeError("abort"), None)
        return result

    lost = async_to_sync(enqueue_then_roll_back)()
    assert count_jobs() == 0, f"job {lost.id} outlived the rolled-back transaction"
    assert not User.objects.filter(username="task-ada").exists()


def test_aenqueue_then_aget_result_after_a_worker_ran_it():
    async def enqueue():
        return await tasks.add.aenqueue(20, 22)

    result = async_to_sync(enqueue)()
    assert result.status == TaskResultStatus.READY
    work_tasks()

    async def read():
        return await task_backends["default"].aget_result(result.id)

    read_back = async_to_sync(read)()
    assert read_back.status == TaskResultStatus.SUCCESSFUL and read_back.return_value == 42
    assert read_back == result_of(result)


def test_enqueue_and_get_result_on_a_running_loop_name_what_to_await():
    async def enqueue_in_async_code():
        tasks.add.enqueue(1, 2)

    async def get_result_in_async_code():
        task_backends["default"].get_result("00000000-0000-0000-0000-000000000000")

    with pytest.raises(SynchronousOnlyOperation, match=r"await task\.aenqueue\(\.\.\.\)"):
        async_to_sync(enqueue_in_async_code)()
    with pytest.raises(SynchronousOnlyOperation, match=r"await backend\.aget_result\(\.\.\.\)"):
        async_to_sync(get_result_in_async_code)()
