"""The bulk purges (delete_queued_jobs, delete_stored_jobs, delete_all_jobs) and get_blocked_keys()."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_pgboss import InvalidOption, InvalidQueueName, QueueNotFound, WrongPolicy, boss
from tests.helpers import rows

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.parametrize("partition", [False, True], ids=["shared", "own-table"]),
]


def states(name: str) -> dict[str, int]:
    return dict(rows("SELECT state::text, count(*) FROM {s}.job WHERE name = %s GROUP BY 1", [name]))


@pytest.mark.parametrize("batch_size", [1, 2, 5000])
def test_delete_queued_jobs_deletes_only_waiting_jobs(partition, batch_size):
    boss.create_queue("purge", partition=partition, retry_limit=1, retry_delay=3600)
    boss.create_queue("other", partition=partition)
    boss.insert("purge", [{"data": n} for n in range(7)])
    boss.insert("other", [{"data": n} for n in range(3)])
    active = boss.fetch("purge", batch_size=3)
    boss.complete("purge", active[0])
    boss.fail("purge", active[1])  # waits to retry
    assert states("purge") == {"created": 4, "retry": 1, "active": 1, "completed": 1}
    assert boss.delete_queued_jobs("purge", batch_size=batch_size) == 5
    assert states("purge") == {"active": 1, "completed": 1}
    assert states("other") == {"created": 3}
    assert boss.delete_queued_jobs("purge") == 0


@pytest.mark.parametrize("batch_size", [1, 3, 5000])
def test_delete_stored_jobs_deletes_only_finished_jobs(partition, batch_size):
    boss.create_queue("purge", partition=partition, retry_limit=0)
    boss.insert("purge", [{"data": n} for n in range(8)])
    active = boss.fetch("purge", batch_size=5)
    boss.complete("purge", active[:2])
    boss.cancel("purge", active[2])
    boss.fail("purge", active[3])
    assert states("purge") == {"created": 3, "active": 1, "completed": 2, "cancelled": 1, "failed": 1}
    assert boss.delete_stored_jobs("purge", batch_size=batch_size) == 4
    assert states("purge") == {"created": 3, "active": 1}


def test_delete_all_jobs_of_one_queue_or_of_every_queue(partition):
    for name in ("a", "b", "c"):
        boss.create_queue(name, partition=partition)
        boss.insert(name, [{"data": n} for n in range(4)])
    boss.fetch("a", batch_size=2)
    assert boss.delete_all_jobs("a", batch_size=3) == 4
    assert states("a") == {}
    assert states("b") == {"created": 4}
    assert boss.delete_all_jobs(batch_size=1) == 8
    assert rows("SELECT count(*) FROM {s}.job")[0][0] == 0
    # The queues and their settings stay.
    assert [q.name for q in boss.get_queues()] == ["a", "b", "c"]


def test_purge_bad_input_is_refused_before_any_sql(partition):
    boss.create_queue("purge", partition=partition)
    boss.send("purge")
    for call, args, kwargs, error in [
        (boss.delete_queued_jobs, ("bad name!",), {}, InvalidQueueName),
        (boss.delete_stored_jobs, ("purge",), {"batch_size": 0}, InvalidOption),
        (boss.delete_all_jobs, (None,), {"batch_size": True}, InvalidOption),
        (boss.delete_all_jobs, ("",), {}, InvalidQueueName),
    ]:
        with CaptureQueriesContext(connection) as queries, pytest.raises(error):
            call(*args, **kwargs)
        assert queries.captured_queries == []
    with pytest.raises(QueueNotFound):
        boss.delete_queued_jobs("missing")
    assert states("purge") == {"created": 1}


def test_get_blocked_keys_lists_the_keys_behind_a_failed_job(partition):
    boss.create_queue("fifo", policy="key_strict_fifo", partition=partition, retry_limit=0)
    assert boss.get_blocked_keys("fifo") == []
    for key in ("b", "a", "c"):
        boss.send("fifo", {"key": key}, singleton_key=key)
        boss.send("fifo", {"key": key, "n": 2}, singleton_key=key)
    heads = {job.data["key"]: job for job in boss.fetch("fifo", batch_size=10)}
    boss.fail("fifo", [heads["b"], heads["a"]])
    boss.complete("fifo", heads["c"])
    assert boss.get_blocked_keys("fifo") == ["a", "b"]
    # Retrying the failed head unblocks its key; deleting it does too.
    (failed_a,) = [j.id for j in boss.find_jobs("fifo", key="a") if j.state == "failed"]
    boss.retry("fifo", failed_a)
    assert boss.get_blocked_keys("fifo") == ["b"]
    boss.delete_stored_jobs("fifo")
    assert boss.get_blocked_keys("fifo") == []


def test_get_blocked_keys_on_another_policy_is_a_clear_error(partition):
    boss.create_queue("plain", partition=partition)
    with pytest.raises(WrongPolicy, match="only for key_strict_fifo queues; queue 'plain' is standard"):
        boss.get_blocked_keys("plain")
    with pytest.raises(QueueNotFound):
        boss.get_blocked_keys("missing")
