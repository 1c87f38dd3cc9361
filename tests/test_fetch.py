"""Fetching: claim order, batch size, options, policies, and exactly-once claims under concurrency."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from django.db import connection, connections

from django_pgboss import InvalidOption, QueueNotFound, boss
from django_pgboss.api.jobs import job_plans
from django_pgboss.plans.jobs import fetch_jobs
from tests.helpers import job_row, rows

pytestmark = [pytest.mark.django_db, pytest.mark.queue("work")]


# Creation order only exists between transactions: job_now() is the transaction's clock, so jobs
# sent in one transaction share their created_on. Tests of "oldest first" therefore commit.
ordered = pytest.mark.django_db(transaction=True)


def test_fetch_from_an_empty_queue_returns_nothing(queue):
    assert boss.fetch(queue) == []


def test_fetch_claims_a_job_and_marks_it_active(queue):
    job_id = boss.send(queue, {"n": 1})
    (job,) = boss.fetch(queue)
    assert (job.id, job.name, job.data, job.retry_count, job.expire_in_seconds) == (
        job_id,
        queue,
        {"n": 1},
        0,
        900,
    )
    state, started_on, heartbeat_on = job_row(job_id, "state", "started_on", "heartbeat_on")
    assert state == "active"
    assert started_on is not None and heartbeat_on == started_on
    assert boss.fetch(queue) == []


def test_fetch_unknown_queue():
    with pytest.raises(QueueNotFound):
        boss.fetch("nope")


def test_batch_size_limits_the_claim(queue):
    boss.insert(queue, [{"data": i} for i in range(10)])
    assert len(boss.fetch(queue, batch_size=4)) == 4
    assert len(boss.fetch(queue, batch_size=100)) == 6
    assert boss.fetch(queue, batch_size=100) == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_invalid_batch_size(queue, bad):
    with pytest.raises(InvalidOption, match="batch_size"):
        boss.fetch(queue, batch_size=bad)


@ordered
def test_higher_priority_first_then_oldest(queue):
    low = boss.send(queue, {"n": "low"}, priority=1)
    high = boss.send(queue, {"n": "high"}, priority=5)
    default_old = boss.send(queue, {"n": "old"})
    default_new = boss.send(queue, {"n": "new"})
    assert [j.id for j in boss.fetch(queue, batch_size=4)] == [high, low, default_old, default_new]


@ordered
def test_one_at_a_time_follows_priority(queue):
    ids = [boss.send(queue, priority=p) for p in (1, 3, 2)]
    fetched = [boss.fetch(queue)[0].id for _ in range(3)]
    assert fetched == [ids[1], ids[2], ids[0]]


def test_min_and_max_priority(queue):
    by_priority = {p: boss.send(queue, priority=p) for p in (-5, 0, 5, 10)}
    assert [j.id for j in boss.fetch(queue, batch_size=10, min_priority=5)] == [
        by_priority[10],
        by_priority[5],
    ]
    assert [j.id for j in boss.fetch(queue, batch_size=10, max_priority=-1)] == [by_priority[-5]]
    assert [j.id for j in boss.fetch(queue, batch_size=10, min_priority=0, max_priority=0)] == [
        by_priority[0]
    ]
    with pytest.raises(InvalidOption, match="min_priority 3 is above max_priority 2"):
        boss.fetch(queue, min_priority=3, max_priority=2)


def test_deferred_jobs_wait_unless_start_after_is_ignored(queue):
    later = boss.send(queue, {"n": 1}, start_after=3600)
    assert boss.fetch(queue) == []
    assert [j.id for j in boss.fetch(queue, ignore_start_after=True)] == [later]


def test_include_metadata_returns_every_column(queue):
    job_id = boss.send(queue, {"n": 1}, priority=3, singleton_key="k", retry_limit=4)
    (job,) = boss.fetch(queue, include_metadata=True)
    assert (job.id, job.state, job.priority, job.singleton_key, job.retry_limit, job.policy) == (
        job_id,
        "active",
        3,
        "k",
        4,
        "standard",
    )
    assert job.created_on is not None and job.started_on is not None and job.keep_until is not None
    plain_id = boss.send(queue)
    (plain,) = boss.fetch(queue)
    assert plain.id == plain_id and plain.state is None and plain.created_on is None
    # Every fetch says when the job became ready (the worker's send-to-start delay is measured from it).
    assert plain.start_after is not None


def test_refetching_a_started_job_counts_an_attempt(queue):
    job_id = boss.send(queue)
    assert boss.fetch(queue)[0].retry_count == 0
    # Put the job back as the monitor does after an expiry: waiting, but started before.
    rows("UPDATE {s}.job SET state = 'retry' WHERE id = %s", [job_id])
    again = boss.fetch(queue)[0]
    assert (again.id, again.retry_count) == (job_id, 1)


def test_blocked_jobs_are_not_fetched(queue):
    job_id = boss.send(queue)
    rows("UPDATE {s}.job SET blocked = true WHERE id = %s", [job_id])
    assert boss.fetch(queue) == []


@pytest.mark.parametrize("partition", [False, True], ids=["job_common", "partitioned"])
@pytest.mark.parametrize("policy", ["singleton", "stately"])
def test_singleton_and_stately_claim_one_job_per_key(policy, partition):
    boss.create_queue("keyed", policy=policy, partition=partition)
    for key in ("a", "a", "b"):
        boss.insert("keyed", [{"data": {"key": key}, "singleton_key": key}])
    boss.insert("keyed", [{"data": {"key": None}}, {"data": {"key": None}}])
    first = boss.fetch("keyed", batch_size=10)
    assert sorted(str(j.data["key"]) for j in first) == ["None", "a", "b"]
    # Every key now has an active job: nothing more can be claimed, and no error is raised.
    assert boss.fetch("keyed", batch_size=10) == []


@pytest.mark.parametrize("partition", [False, True], ids=["job_common", "partitioned"])
@ordered
def test_key_strict_fifo_claims_each_keys_head_only(partition):
    boss.create_queue("fifo", policy="key_strict_fifo", partition=partition)
    ids = {
        (key, i): boss.send("fifo", {"key": key, "i": i}, singleton_key=key) for i in range(3) for key in "xy"
    }
    heads = boss.fetch("fifo", batch_size=10)
    assert sorted(j.id for j in heads) == sorted([ids[("x", 0)], ids[("y", 0)]])
    assert boss.fetch("fifo", batch_size=10) == []


@ordered
def test_key_strict_fifo_priority_orders_keys_not_jobs_within_a_key():
    boss.create_queue("fifo", policy="key_strict_fifo")
    first_x = boss.send("fifo", singleton_key="x", priority=0)
    boss.send("fifo", singleton_key="x", priority=9)
    y = boss.send("fifo", singleton_key="y", priority=5)
    assert [j.id for j in boss.fetch("fifo", batch_size=10)] == [y, first_x]


@ordered
def test_key_strict_fifo_failed_job_blocks_its_key():
    boss.create_queue("fifo", policy="key_strict_fifo")
    blocked_head = boss.send("fifo", singleton_key="x")
    boss.send("fifo", singleton_key="x")
    rows("UPDATE {s}.job SET state = 'failed' WHERE id = %s", [blocked_head])
    free = boss.send("fifo", singleton_key="y")
    assert [j.id for j in boss.fetch("fifo", batch_size=10)] == [free]


def test_group_concurrency_caps_active_jobs_per_group(queue):
    boss.insert(queue, [{"data": i, "group_id": "g1"} for i in range(5)])
    boss.insert(queue, [{"data": i, "group_id": "g2"} for i in range(5)])
    boss.insert(queue, [{"data": "loose"}])
    first = boss.fetch(queue, batch_size=20, group_concurrency=2)
    assert Counter(j.group_id for j in first) == {"g1": 2, "g2": 2, None: 1}
    assert boss.fetch(queue, batch_size=20, group_concurrency=2) == []
    # Raising the limit makes room beside the jobs still active.
    assert Counter(j.group_id for j in boss.fetch(queue, batch_size=20, group_concurrency=3)) == {
        "g1": 1,
        "g2": 1,
    }


@pytest.mark.parametrize("group_concurrency", [1, {"default": 1}])
def test_group_concurrency_of_one_claims_one_job_a_group_and_skips_groups_with_one_active(
    queue, group_concurrency, monkeypatch
):
    # A limit of 1 without tiers probes each candidate's group for an active job (job_i7) rather
    # than counting the queue's active jobs by group; what it claims is the same.
    boss.insert(queue, [{"data": i, "group_id": "busy"} for i in range(3)])
    (busy,) = boss.fetch(queue, group_concurrency=1)
    boss.insert(queue, [{"data": i, "group_id": group} for group in ("g1", "g2") for i in range(3)])
    boss.insert(queue, [{"data": "loose"}, {"data": "loose"}])
    claimed = boss.fetch(queue, batch_size=20, group_concurrency=group_concurrency)
    assert Counter(j.group_id for j in claimed) == {"g1": 1, "g2": 1, None: 2}
    assert boss.fetch(queue, batch_size=20, group_concurrency=group_concurrency) == []
    # Settling a group's active job opens the group again, for one job.
    boss.complete(queue, busy)
    assert [j.group_id for j in boss.fetch(queue, batch_size=20, group_concurrency=1)] == ["busy"]
    # The claim a limit of 1 runs probes the group; a limit of 2 still counts the active jobs.
    built: list[str] = []

    def recording(*args, **kwargs):
        built.append(fetch_jobs(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(job_plans, "fetch_jobs", recording)
    for limit, counts in ((group_concurrency, False), (2, True)):
        boss.fetch(queue, group_concurrency=limit)
        assert ("active_groups AS MATERIALIZED" in built[-1]) is counts
        assert ("g.group_id = j.group_id" in built[-1]) is not counts


def test_group_concurrency_tiers(queue):
    boss.insert(queue, [{"data": i, "group_id": "gold-co", "group_tier": "gold"} for i in range(6)])
    boss.insert(queue, [{"data": i, "group_id": "free-co", "group_tier": "free"} for i in range(6)])
    boss.insert(queue, [{"data": i, "group_id": "other-co"} for i in range(6)])
    claimed = boss.fetch(
        queue, batch_size=50, group_concurrency={"default": 1, "tiers": {"gold": 4, "free": 2}}
    )
    assert Counter(j.group_id for j in claimed) == {"gold-co": 4, "free-co": 2, "other-co": 1}


@pytest.mark.parametrize(
    "bad",
    [0, "2", {"tiers": {"a": 1}}, {"default": 1, "tiers": {"a": 0}}, {"default": 2, "extra": 1}],
)
def test_invalid_group_concurrency(queue, bad):
    with pytest.raises(InvalidOption, match="group_concurrency"):
        boss.fetch(queue, group_concurrency=bad)


def test_fetch_joins_the_callers_transaction(queue):
    from django.db import transaction

    job_id = boss.send(queue)
    with pytest.raises(RuntimeError), transaction.atomic():
        assert boss.fetch(queue)[0].id == job_id
        raise RuntimeError
    # Rolled back with the caller: the job is waiting again.
    assert job_row(job_id, "state") == ("created",)


@pytest.mark.django_db(transaction=True)
def test_eight_connections_claim_ten_thousand_jobs_exactly_once():
    boss.create_queue("race")
    boss.insert("race", [{"data": i} for i in range(10_000)])
    claimed: list[list[str]] = [[] for _ in range(8)]
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(slot: int) -> None:
        try:
            start.wait()
            while jobs := boss.fetch("race", batch_size=25):
                claimed[slot].extend(job.id for job in jobs)
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    every = [job_id for ids in claimed for job_id in ids]
    assert len(every) == 10_000
    assert len(set(every)) == 10_000
    # Each connection did real work: SKIP LOCKED let them claim side by side.
    assert sum(1 for ids in claimed if ids) >= 2
    assert rows("SELECT state, count(*) FROM {s}.job GROUP BY state") == [("active", 10_000)]
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_claims_racing_edits_of_the_waiting_jobs_claim_each_job_once_and_lose_none():
    # The claim's UPDATE reaches its rows by the tuple ids its candidates' scan locked
    # (plans.jobs.fetch_jobs). Editors updating waiting jobs meanwhile move those rows to new
    # versions: a claim may then find a candidate's newer version, or skip it for a later fetch,
    # but must never claim a job twice, lose one, or hand out a row it did not update.
    boss.create_queue("race")
    ids = boss.insert("race", [{"data": {"n": n}} for n in range(4_000)], return_ids=True)
    claimed: list[list[tuple[str, object]]] = [[] for _ in range(4)]
    edits = [0, 0]
    errors: list[BaseException] = []
    claiming = threading.Event()
    start = threading.Barrier(6)

    def claimer(slot: int) -> None:
        try:
            start.wait()
            while jobs := boss.fetch("race", batch_size=25):
                claimed[slot].extend((job.id, job.data) for job in jobs)
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)
        finally:
            connections.close_all()

    def editor(slot: int) -> None:
        try:
            start.wait()
            # From the newest job back: the claims take the oldest first, so these are still
            # waiting, and the two fronts meet while both run.
            position = len(ids) - 1 - slot
            while claiming.is_set() and position >= 0:
                result = boss.update("race", {"n": -1, "edited": True}, id=ids[position])
                edits[slot] += result.updated
                position -= 2
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)
        finally:
            connections.close_all()

    claiming.set()
    claimers = [threading.Thread(target=claimer, args=(slot,)) for slot in range(4)]
    editors = [threading.Thread(target=editor, args=(slot,)) for slot in range(2)]
    for thread in claimers + editors:
        thread.start()
    for thread in claimers:
        thread.join(timeout=120)
    claiming.clear()
    for thread in editors:
        thread.join(timeout=30)
    assert errors == []
    assert sum(edits) > 0, "no edit landed while the claims ran"
    every = [job_id for pairs in claimed for job_id, _data in pairs]
    assert sorted(every) == sorted(ids)
    # What each claim returned is the row it made active: the job's data as it stands now.
    stored = {job_id: json.loads(data) for job_id, data in rows("SELECT id::text, data::text FROM {s}.job")}
    for pairs in claimed:
        for job_id, data in pairs:
            assert data == stored[job_id]
    assert rows("SELECT state, count(*) FROM {s}.job GROUP BY state") == [("active", 4_000)]
    connection.close()


@pytest.mark.parametrize("include_metadata", [False, True])
def test_fetched_jobs_are_the_jobs_the_dataclass_builds_from_the_same_rows(queue, include_metadata):
    # A fetch sets Job's slots directly (records.jobs_from_table); the Jobs must be those that
    # Job(**fields) gives for the same rows, each with its own unset signal.
    from django_pgboss.db.context import Table
    from django_pgboss.records import _job, job_fields, jobs_from_table
    from tests.helpers import schema_sql

    boss.insert(queue, [{"data": {"n": 1}, "singleton_key": "k"}, {"data": [2]}])
    fetched = boss.fetch(queue, batch_size=2, include_metadata=include_metadata)
    assert len(fetched) == 2 and fetched[0].signal is not fetched[1].signal
    assert not any(job.signal.is_set() for job in fetched)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {schema_sql()}.job WHERE name = %s ORDER BY created_on, id", [queue])
        columns = [column[0] for column in cursor.description]
        records = cursor.fetchall()
    built = jobs_from_table(Table(tuple(columns), records))
    expected = [_job(row, job_fields(columns)) for row in records]
    assert built == expected
    assert {job.id for job in fetched} == {job.id for job in built}
    assert all(isinstance(job.id, str) and job.data in ({"n": 1}, [2]) for job in built)
    if include_metadata:
        assert fetched == built
