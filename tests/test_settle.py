"""Settling: complete, cancel, resume, delete, touch, get and find, and the 12.35 attempt fence."""

from __future__ import annotations

import uuid

import pytest

from django_pgboss import InvalidJobReference, Job, QueueNotFound, boss
from tests.helpers import job_row, move_back, rows

pytestmark = [pytest.mark.django_db, pytest.mark.queue("work")]


def claimed(queue: str, n: int = 1) -> list[Job]:
    boss.insert(queue, [{"data": {"n": i}} for i in range(n)])
    return boss.fetch(queue, batch_size=n)


def lapse_and_reclaim(queue: str, job: Job) -> Job:
    """What happens when a claim lapses: the job is put back (as expiry does) and fetched again."""
    rows("UPDATE {s}.job SET state = 'retry' WHERE id = %s", [job.id])
    (again,) = boss.fetch(queue)
    assert (again.id, again.retry_count) == (job.id, job.retry_count + 1)
    return again


def test_complete_stores_the_output(queue):
    (job,) = claimed(queue)
    assert boss.complete(queue, job, {"sent": True}) == 1
    state, output, completed_on = job_row(job.id, "state", "output", "completed_on")
    assert (state, output) == ("completed", {"sent": True})
    assert completed_on is not None


@pytest.mark.parametrize(
    ("output", "stored"),
    [
        (None, None),
        ({"a": 1}, {"a": 1}),
        ([1, 2], {"value": [1, 2]}),
        ("done", {"value": "done"}),
        (7, {"value": 7}),
    ],
)
def test_output_is_always_an_object(queue, output, stored):
    (job,) = claimed(queue)
    boss.complete(queue, job.id, output)
    assert job_row(job.id, "output") == (stored,)


def test_complete_include_queued_completes_waiting_jobs_too(queue):
    created = boss.send(queue, {"n": 1})
    assert boss.complete(queue, created, {"done": "early"}, include_queued=True) == 1
    assert job_row(created, "state", "output") == ("completed", {"done": "early"})
    boss.create_queue("retrying", retry_limit=2)
    boss.send("retrying")
    (job,) = boss.fetch("retrying")
    boss.fail("retrying", job)
    assert boss.complete("retrying", job.id, include_queued=True) == 1
    assert job_row(job.id, "state") == ("completed",)
    # A fenced settle still needs the active attempt it names.
    waiting = boss.send(queue)
    assert boss.complete(queue, {"id": waiting, "retry_count": 0}, include_queued=True) == 0


def test_complete_many_by_ids_and_by_jobs(queue):
    jobs = claimed(queue, 6)
    assert boss.complete(queue, [j.id for j in jobs[:3]]) == 3
    assert boss.complete(queue, jobs[3:]) == 3
    assert rows("SELECT count(*) FROM {s}.job WHERE state = 'completed'") == [(6,)]


def test_complete_counts_only_active_jobs(queue):
    waiting = boss.send(queue)
    assert boss.complete(queue, waiting) == 0
    assert job_row(waiting, "state") == ("created",)
    (job,) = boss.fetch(queue)
    boss.complete(queue, job)
    assert boss.complete(queue, job) == 0


def test_complete_unknown_id_counts_zero(queue):
    assert boss.complete(queue, str(uuid.uuid4())) == 0


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        "not-a-uuid",
        [f"{uuid.uuid4()}", {"id": str(uuid.uuid4()), "retry_count": 0}],
        {"id": str(uuid.uuid4())},
        {"id": str(uuid.uuid4()), "retry_count": -1},
        {"id": str(uuid.uuid4()), "retry_count": True},
        42,
    ],
)
def test_bad_job_references(queue, bad):
    with pytest.raises(InvalidJobReference):
        boss.complete(queue, bad)


def test_settle_on_unknown_queue(queue):
    with pytest.raises(QueueNotFound):
        boss.complete("elsewhere", str(uuid.uuid4()))


def test_cancel_and_resume(queue):
    waiting = boss.send(queue)
    assert boss.cancel(queue, waiting) == 1
    state, completed_on = job_row(waiting, "state", "completed_on")
    assert state == "cancelled" and completed_on is not None
    assert boss.fetch(queue) == []
    assert boss.cancel(queue, waiting) == 0
    assert boss.resume(queue, waiting) == 1
    assert job_row(waiting, "state", "completed_on") == ("created", None)
    assert boss.resume(queue, waiting) == 0
    assert [j.id for j in boss.fetch(queue)] == [waiting]


def test_cancel_an_active_job(queue):
    (job,) = claimed(queue)
    assert boss.cancel(queue, job) == 1
    assert job_row(job.id, "state") == ("cancelled",)


def test_completed_jobs_cannot_be_cancelled(queue):
    (job,) = claimed(queue)
    boss.complete(queue, job)
    assert boss.cancel(queue, job.id) == 0


def test_delete_job_in_any_state(queue):
    waiting = boss.send(queue)
    (active,) = boss.fetch(queue)
    boss.send(queue)
    assert boss.delete_job(queue, [waiting]) == 1
    assert boss.delete_job(queue, active) == 0  # already gone: the first send was the one fetched
    assert rows("SELECT count(*) FROM {s}.job") == [(1,)]


def test_touch_refreshes_the_heartbeat_of_active_jobs_only(queue):
    (job,) = claimed(queue)
    move_back(job.id, "heartbeat_on", 3600)
    assert boss.touch(queue, job) == 1
    (heartbeat,) = job_row(job.id, "heartbeat_on")
    assert rows("SELECT %s::timestamptz = now()", [heartbeat]) == [(True,)]
    waiting = boss.send(queue)
    assert boss.touch(queue, waiting) == 0


def test_get_job_by_id(queue):
    job_id = boss.send(queue, {"n": 1}, priority=2)
    job = boss.get_job_by_id(queue, job_id)
    assert (job.id, job.data, job.state, job.priority, job.name) == (job_id, {"n": 1}, "created", 2, queue)
    assert boss.get_job_by_id(queue, str(uuid.uuid4())) is None
    boss.create_queue("other")
    assert boss.get_job_by_id("other", job_id) is None
    with pytest.raises(InvalidJobReference):
        boss.get_job_by_id(queue, "nope")


def test_find_jobs_by_id_key_data_and_queued(queue):
    a = boss.send(queue, {"customer": 7, "kind": "invoice"}, singleton_key="k1")
    b = boss.send(queue, {"customer": 7, "kind": "receipt"})
    c = boss.send(queue, {"customer": 8})
    assert {j.id for j in boss.find_jobs(queue)} == {a, b, c}
    assert [j.id for j in boss.find_jobs(queue, id=b)] == [b]
    assert [j.id for j in boss.find_jobs(queue, key="k1")] == [a]
    assert {j.id for j in boss.find_jobs(queue, data={"customer": 7})} == {a, b}
    assert [j.id for j in boss.find_jobs(queue, data={"customer": 7, "kind": "receipt"})] == [b]
    boss.fetch(queue, batch_size=3)
    assert boss.find_jobs(queue, queued=True) == []
    assert len(boss.find_jobs(queue, limit=2)) == 2


# -- the attempt fence (pg-boss 12.35, #925) ----------------------------------------------------


def test_stale_attempt_cannot_complete_reclaimed_job(queue):
    (stale,) = claimed(queue)
    current = lapse_and_reclaim(queue, stale)
    assert boss.complete(queue, stale, {"from": "stale"}) == 0
    assert job_row(stale.id, "state", "output") == ("active", None)
    assert boss.complete(queue, current, {"from": "current"}) == 1
    assert job_row(stale.id, "output") == ({"from": "current"},)


def test_stale_attempt_cannot_fail_reclaimed_job(queue):
    (stale,) = claimed(queue)
    current = lapse_and_reclaim(queue, stale)
    assert boss.fail(queue, stale, {"from": "stale"}) == 0
    assert job_row(stale.id, "state", "retry_count") == ("active", current.retry_count)


def test_stale_attempt_cannot_delete_touch_or_cancel_reclaimed_job(queue):
    (stale,) = claimed(queue)
    current = lapse_and_reclaim(queue, stale)
    assert boss.delete_job(queue, stale) == 0
    assert boss.touch(queue, stale) == 0
    assert boss.cancel(queue, stale) == 0
    assert job_row(stale.id, "state") == ("active",)
    assert boss.touch(queue, current) == 1
    assert boss.delete_job(queue, current) == 1


def test_fence_pairs_accept_any_uuid_spelling(queue):
    (job,) = claimed(queue)
    shouting = {"id": job.id.upper(), "retry_count": job.retry_count}
    assert boss.complete(queue, shouting) == 1
    (other,) = claimed(queue)
    braced = {"id": "{" + other.id.replace("-", "") + "}", "retry_count": other.retry_count + 1}
    assert boss.complete(queue, braced) == 0  # the wrong attempt stays fenced out whatever the spelling


def test_bare_ids_are_not_fenced(queue):
    (stale,) = claimed(queue)
    lapse_and_reclaim(queue, stale)
    assert boss.complete(queue, stale.id) == 1


def test_a_job_is_fenced_to_its_own_attempt_in_a_mixed_batch(queue):
    first, second = claimed(queue, 2)
    lapse_and_reclaim(queue, first)
    assert boss.complete(queue, [first, second]) == 1
    assert job_row(first.id, "state") == ("active",)
    assert job_row(second.id, "state") == ("completed",)


def test_job_attempt_property(queue):
    (job,) = claimed(queue)
    assert job.attempt == {"id": job.id, "retry_count": 0}
    assert boss.complete(queue, job.attempt) == 1


def test_complete_each_with_two_attempts_of_one_job_in_a_batch_completes_only_the_active_one(queue):
    # The settler can hold a late result of an attempt failed at its deadline beside the next
    # attempt's result for the same job: each result is matched to its own attempt, not to its id.
    from django_pgboss.api.jobs import JobStore

    (stale,) = claimed(queue)
    current = lapse_and_reclaim(queue, stale)
    store = JobStore(boss.context)
    for batch in (
        [(stale, {"from": "stale"}), (current, {"from": "current"})],
        [(current, {"from": "current"}), (stale, {"from": "stale"})],
    ):
        rows("UPDATE {s}.job SET state = 'active', output = NULL WHERE id = %s", [current.id])
        assert store.complete_each(queue, batch) == [current.id]
        assert job_row(current.id, "state", "output") == ("completed", {"from": "current"})


def test_complete_each_stores_none_as_null_and_takes_any_spelling_of_an_id(queue):
    from django_pgboss.api.jobs import JobStore

    first, second = claimed(queue, 2)
    spelled = {"id": second.id.upper().replace("-", ""), "retry_count": second.retry_count}
    done = JobStore(boss.context).complete_each(queue, [(first, None), (spelled, {"n": 2})])
    assert sorted(done) == sorted([first.id, second.id])
    assert rows("SELECT output IS NULL FROM {s}.job WHERE id = %s", [first.id]) == [(True,)]
    assert job_row(second.id, "state", "output") == ("completed", {"n": 2})
