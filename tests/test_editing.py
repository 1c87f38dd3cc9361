"""update() and upsert(): partial edits of waiting jobs, on every policy, and upserts racing for a key."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from django_pgboss import (
    UNSET,
    InvalidOption,
    InvalidStartAfter,
    JobDataNotSerializable,
    QueueNotFound,
    UpdateResult,
    UpsertResult,
    boss,
)
from tests.helpers import job_row, rows

pytestmark = pytest.mark.django_db

POLICIES = ["standard", "short", "singleton", "stately", "exclusive", "key_strict_fifo"]


def waiting(name: str, key: str) -> list[tuple]:
    return rows(
        "SELECT id::text, data, state FROM {s}.job WHERE name = %s AND singleton_key = %s "
        "AND state < 'active' ORDER BY created_on, id",
        [name, key],
    )


# -- update ----------------------------------------------------------------------------------------


def test_update_changes_only_the_fields_given(queue):
    job_id = boss.send(queue, {"n": 1}, priority=3, retry_limit=5, group_id="g", group_tier="gold")
    before = job_row(job_id, "expire_seconds", "retry_delay", "keep_until", "start_after", "created_on")
    result = boss.update(queue, id=job_id, priority=9, retry_delay=7)
    assert result == UpdateResult(jobs=[job_id], updated=1)
    job = boss.get_job_by_id(queue, job_id)
    assert (job.data, job.priority, job.retry_limit, job.retry_delay) == ({"n": 1}, 9, 5, 7)
    assert (job.group_id, job.group_tier) == ("g", "gold")
    assert job_row(job_id, "expire_seconds", "keep_until", "start_after", "created_on") == (
        before[0],
        *before[2:],
    )


def test_update_data_left_out_keeps_it_and_none_clears_it(queue):
    job_id = boss.send(queue, {"n": 1})
    boss.update(queue, id=job_id, priority=1)
    assert boss.get_job_by_id(queue, job_id).data == {"n": 1}
    boss.update(queue, {"n": 2}, id=job_id)
    assert boss.get_job_by_id(queue, job_id).data == {"n": 2}
    boss.update(queue, None, id=job_id)
    assert boss.get_job_by_id(queue, job_id).data is None
    assert boss.update(queue, UNSET, id=job_id).updated == 1


def test_update_clears_the_clearable_options(queue):
    boss.create_queue("dlq")
    job_id = boss.send(
        queue,
        retry_backoff=True,
        retry_delay_max=60,
        dead_letter="dlq",
        heartbeat_seconds=30,
        group_id="g",
        group_tier="t",
    )
    boss.update(
        queue, id=job_id, retry_delay_max=None, dead_letter=None, heartbeat_seconds=None, group_id=None
    )
    job = boss.get_job_by_id(queue, job_id)
    assert (job.retry_delay_max, job.dead_letter, job.heartbeat_seconds, job.group_id, job.group_tier) == (
        None,
        None,
        None,
        None,
        None,
    )


def test_update_start_after_keeps_the_retention_span_and_retention_counts_from_start(queue, clock):
    job_id = boss.send(queue, retention_seconds=3600)
    now = clock.now()
    boss.update(queue, id=job_id, start_after=600)
    start, keep = job_row(job_id, "start_after", "keep_until")
    assert start == now + dt.timedelta(seconds=600)
    assert keep - start == dt.timedelta(seconds=3600)
    boss.update(queue, id=job_id, retention_seconds=60)
    assert job_row(job_id, "start_after", "keep_until") == (start, start + dt.timedelta(seconds=60))
    # 0 pulls a deferred job forward to now (pg-boss's update() honours it too).
    boss.update(queue, id=job_id, start_after=0)
    assert job_row(job_id, "start_after")[0] == now
    assert [job.id for job in boss.fetch(queue)] == [job_id]


def test_update_keeps_the_throttle_slot(queue):
    job_id = boss.send_throttled(queue, {"n": 1}, 60, "k")
    (slot,) = job_row(job_id, "singleton_on")
    boss.update(queue, {"n": 2}, singleton_key="k", start_after=30)
    assert job_row(job_id, "singleton_on", "data") == (slot, {"n": 2})
    # The slot is still taken: a second throttled send in it is dropped.
    assert boss.send_throttled(queue, {"n": 3}, 60, "k") is None


def test_update_by_key_picks_the_newest_the_oldest_or_all(queue, clock):
    ids = []
    for n in range(3):
        ids.append(boss.send(queue, {"n": n}, singleton_key="k"))
        clock.advance(seconds=1)
    other = boss.send(queue, {"n": 9}, singleton_key="other")
    assert boss.update(queue, {"m": "newest"}, singleton_key="k").jobs == [ids[2]]
    assert boss.update(queue, {"m": "oldest"}, singleton_key="k", match="oldest").jobs == [ids[0]]
    assert boss.update(queue, priority=4, singleton_key="k", match="all") == UpdateResult(jobs=ids, updated=3)
    assert [job_row(i, "data", "priority") for i in ids] == [
        ({"m": "oldest"}, 4),
        ({"n": 1}, 4),
        ({"m": "newest"}, 4),
    ]
    assert job_row(other, "data", "priority") == ({"n": 9}, 0)


def test_update_leaves_active_and_finished_jobs_alone(queue):
    job_id = boss.send(queue, {"n": 1}, singleton_key="k")
    (job,) = boss.fetch(queue)
    assert boss.update(queue, {"n": 2}, id=job_id) == UpdateResult(jobs=[], updated=0)
    assert boss.update(queue, {"n": 2}, singleton_key="k", match="all").updated == 0
    boss.complete(queue, job)
    assert boss.update(queue, {"n": 2}, id=job_id).updated == 0
    assert job_row(job_id, "data") == ({"n": 1},)


def test_update_edits_a_job_waiting_to_retry(queue):
    job_id = boss.send(queue, {"n": 1}, retry_limit=2, retry_delay=3600)
    boss.fail(queue, boss.fetch(queue))
    assert job_row(job_id, "state") == ("retry",)
    assert boss.update(queue, id=job_id, start_after=0).updated == 1
    assert [job.id for job in boss.fetch(queue)] == [job_id]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("partition", [False, True], ids=["shared", "own-table"])
def test_update_by_key_edits_the_waiting_job_and_never_the_active_one(policy, partition):
    boss.create_queue("p", policy=policy, partition=partition, retry_limit=3, retry_delay=3600)
    running = boss.send("p", {"n": 1}, singleton_key="k")
    (active,) = boss.fetch("p")
    queued = boss.send("p", {"n": 2}, singleton_key="k")
    if policy == "exclusive":
        assert queued is None  # one created, retry or active job per key
        assert boss.update("p", {"n": 3}, singleton_key="k", match="all").updated == 0
        return
    result = boss.update("p", {"n": 3}, singleton_key="k", match="all", priority=5)
    assert result == UpdateResult(jobs=[queued], updated=1)
    assert job_row(running, "data", "state") == ({"n": 1}, "active")
    assert job_row(queued, "data", "priority", "state") == ({"n": 3}, 5, "created")
    if policy in ("stately", "standard", "short"):
        # A job waiting to retry is edited too: stately keeps one per state, so both wait now.
        boss.fail("p", active)
        assert job_row(running, "state") == ("retry",)
        edited = boss.update("p", {"n": 4}, singleton_key="k", match="all")
        assert sorted(edited.jobs) == sorted([running, queued])


def test_update_matching_nothing_is_not_an_error(queue):
    assert boss.update(queue, {"x": 1}, singleton_key="nobody") == UpdateResult(jobs=[], updated=0)
    assert boss.update(queue, {"x": 1}, id="00000000-0000-0000-0000-000000000001").updated == 0


def test_update_only_touches_its_own_queue(queue):
    boss.create_queue("edit_neighbour")
    job_id = boss.send("edit_neighbour", {"n": 1}, singleton_key="k")
    assert boss.update(queue, {"n": 2}, id=job_id).updated == 0
    assert boss.update(queue, {"n": 2}, singleton_key="k").updated == 0
    assert job_row(job_id, "data") == ({"n": 1},)


def test_update_wakes_workers_on_a_notify_queue():
    boss.create_queue("loud", notify=True)
    job_id = boss.send("loud", start_after=3600)
    assert boss.update("loud", id=job_id, start_after=0).updated == 1
    assert boss.fetch("loud")[0].id == job_id


# -- bad input -------------------------------------------------------------------------------------

BAD_UPDATES = [
    (
        {"id": "00000000-0000-0000-0000-000000000001", "singleton_key": "k"},
        InvalidOption,
        "exactly one of id or singleton_key",
    ),
    ({}, InvalidOption, "exactly one of id or singleton_key"),
    ({"id": "00000000-0000-0000-0000-000000000001", "match": "all"}, InvalidOption, "match is only for"),
    ({"singleton_key": "k", "match": "latest"}, InvalidOption, "match must be one of"),
    ({"id": "not-a-uuid"}, InvalidOption, "id must be a uuid"),
    ({"singleton_key": 7}, InvalidOption, "singleton_key must be a string"),
    ({"singleton_key": "k", "singleton_seconds": 60}, InvalidOption, "unknown option.*singleton_seconds"),
    ({"singleton_key": "k", "colour": "red"}, InvalidOption, "unknown option.*colour"),
    ({"singleton_key": "k", "priority": None}, InvalidOption, "priority cannot be None"),
    ({"singleton_key": "k", "priority": "high"}, InvalidOption, "priority must be an integer"),
    ({"singleton_key": "k", "retry_limit": -1}, InvalidOption, "retry_limit"),
    ({"singleton_key": "k", "expire_in_seconds": 10**6}, InvalidOption, "expire_in_seconds"),
    ({"singleton_key": "k", "group_tier": "gold"}, InvalidOption, "group_tier needs group_id"),
    ({"singleton_key": "k", "start_after": "soon"}, InvalidStartAfter, "soon"),
    ({"singleton_key": "k", "start_after": -5}, InvalidStartAfter, "start_after"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_UPDATES)
def test_bad_update_is_refused_before_any_sql(queue, kwargs, error, message):
    job_id = boss.send(queue, {"n": 1}, singleton_key="k")
    with CaptureQueriesContext(connection) as queries, pytest.raises(error, match=message):
        boss.update(queue, {"n": 2}, **kwargs)
    assert queries.captured_queries == []
    assert job_row(job_id, "data") == ({"n": 1},)


def test_bad_upsert_is_refused_before_any_sql(queue):
    for kwargs, error, message in [
        ({"singleton_key": None}, InvalidOption, "needs a singleton_key"),
        (
            {"singleton_key": "k", "id": "00000000-0000-0000-0000-000000000001"},
            InvalidOption,
            "update\\(id=...\\)",
        ),
        ({"singleton_key": "k", "colour": "red"}, InvalidOption, "unknown option.*colour"),
        ({"singleton_key": "k", "match": "any"}, InvalidOption, "match must be one of"),
    ]:
        with CaptureQueriesContext(connection) as queries, pytest.raises(error, match=message):
            boss.upsert(queue, {"n": 2}, **kwargs)
        assert queries.captured_queries == []
    with pytest.raises(JobDataNotSerializable):
        boss.upsert(queue, {"n": float("nan")}, singleton_key="k")
    assert rows("SELECT count(*) FROM {s}.job")[0][0] == 0


def test_update_and_upsert_on_a_queue_that_does_not_exist():
    with pytest.raises(QueueNotFound):
        boss.update("missing", {"n": 1}, singleton_key="k")
    with pytest.raises(QueueNotFound):
        boss.upsert("missing", {"n": 1}, singleton_key="k")
    with pytest.raises(QueueNotFound, match="dead_letter"):
        boss.create_queue("here")
        boss.update("here", singleton_key="k", dead_letter="nowhere")


def test_a_refused_update_leaves_the_callers_transaction_usable(queue):
    job_id = boss.send(queue, {"n": 1})
    with transaction.atomic():
        with pytest.raises(InvalidOption):
            boss.update(queue, {"n": 2}, id=job_id, match="all")
        assert boss.update(queue, {"n": 3}, id=job_id).updated == 1
    assert job_row(job_id, "data") == ({"n": 3},)


# -- upsert ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_upsert_inserts_when_nothing_waits_then_edits(policy):
    boss.create_queue("u", policy=policy)
    first = boss.upsert("u", {"n": 1}, singleton_key="k", priority=2)
    assert (first.updated, first.inserted, len(first.jobs)) == (0, 1, 1)
    (job_id,) = first.jobs
    assert job_row(job_id, "data", "priority", "singleton_key", "state") == ({"n": 1}, 2, "k", "created")
    second = boss.upsert("u", {"n": 2}, singleton_key="k")
    assert second == UpsertResult(jobs=[job_id], updated=1, inserted=0)
    assert waiting("u", "k") == [(job_id, '{"n": 2}', "created")]
    # Only the data changed: the priority given on insert stays.
    assert job_row(job_id, "priority") == (2,)


@pytest.mark.parametrize("policy", POLICIES)
def test_upsert_behind_an_active_job_of_the_key(policy):
    boss.create_queue("u", policy=policy)
    active_id = boss.send("u", {"n": 1}, singleton_key="k")
    (active,) = boss.fetch("u")
    result = boss.upsert("u", {"n": 2}, singleton_key="k")
    if policy == "exclusive":
        # One created, retry or active job per key: the active one refuses a second, so there is
        # nothing to edit and nothing inserted.
        assert result == UpsertResult(jobs=[], updated=0, inserted=0)
    else:
        assert (result.updated, result.inserted) == (0, 1)
        assert [row[0] for row in waiting("u", "k")] == result.jobs
    assert job_row(active.id, "data", "state") == ({"n": 1}, "active")
    assert active.id == active_id


def test_upsert_on_key_strict_fifo_edits_the_key_s_waiting_job_not_the_failed_head():
    boss.create_queue("fifo", policy="key_strict_fifo", retry_limit=0)
    head = boss.send("fifo", {"n": 1}, singleton_key="k")
    boss.fail("fifo", boss.fetch("fifo"))
    assert boss.get_blocked_keys("fifo") == ["k"]
    inserted = boss.upsert("fifo", {"n": 2}, singleton_key="k")
    assert inserted.inserted == 1
    assert boss.upsert("fifo", {"n": 3}, singleton_key="k").jobs == inserted.jobs
    assert job_row(head, "data", "state") == ({"n": 1}, "failed")
    assert boss.fetch("fifo") == []  # still blocked behind the failed head


def test_upsert_inside_the_callers_transaction_rolls_back_with_it(queue):
    with pytest.raises(RuntimeError), transaction.atomic():
        assert boss.upsert(queue, {"n": 1}, singleton_key="k").inserted == 1
        raise RuntimeError
    assert waiting(queue, "k") == []


def test_upsert_sends_with_the_options_given():
    boss.create_queue("u", retry_limit=1)
    (job_id,) = boss.upsert("u", {"n": 1}, singleton_key="k", retry_limit=4, start_after=3600).jobs
    assert job_row(job_id, "retry_limit") == (4,)
    assert boss.fetch("u") == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("policy", POLICIES)
def test_eight_racing_upserts_never_leave_two_waiting_jobs(policy):
    boss.create_queue("race", policy=policy)
    results: list[UpsertResult] = []
    errors: list[BaseException] = []
    rounds = 5
    start = threading.Barrier(8)

    def racer(slot: int) -> None:
        try:
            for round_ in range(rounds):
                start.wait(timeout=30)
                results.append(boss.upsert("race", {"slot": slot}, singleton_key=f"k{round_}"))
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)
            start.abort()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=racer, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(results) == 8 * rounds
    # One insert per key, seven edits of that same job.
    assert sum(result.inserted for result in results) == rounds
    assert sum(result.updated for result in results) == 7 * rounds
    counts = rows("SELECT singleton_key, count(*) FROM {s}.job WHERE name = 'race' GROUP BY 1 ORDER BY 1")
    assert counts == [(f"k{round_}", 1) for round_ in range(rounds)]
    connection.close()


# -- upsert by key: pg-boss 12.38's job_i13 ---------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_upsert_marks_the_job_it_inserts_and_send_does_not(policy):
    boss.create_queue("marks", policy=policy)
    upserted = boss.upsert("marks", {"n": 1}, singleton_key="u").jobs[0]
    sent = boss.send("marks", {"n": 2}, singleton_key="s")
    assert job_row(upserted, "upsert_by_key") == (True,)
    assert job_row(sent, "upsert_by_key") == (None,)


def test_a_resumed_upserted_job_waits_beside_a_newer_upsert_of_its_key(queue):
    (first,) = boss.upsert(queue, {"n": 1}, singleton_key="k").jobs
    boss.cancel(queue, first)
    (second,) = boss.upsert(queue, {"n": 2}, singleton_key="k").jobs
    assert second != first
    # Resumed, the first job is created again: without losing its mark it would collide with the
    # second in job_i13 and the resume would fail.
    boss.resume(queue, first)
    assert job_row(first, "state", "upsert_by_key") == ("created", None)
    assert job_row(second, "state", "upsert_by_key") == ("created", True)


def hold_upsert_lock(name: str, key: str, held: threading.Event, release: threading.Event) -> None:
    """Hold, on a connection of its own, the advisory lock upsert() takes for (name, key) while
    job_i13 is not built yet, until ``release`` is set."""
    from django_pgboss.db.context import DatabaseContext
    from django_pgboss.plans.editing import upsert_lock

    context = DatabaseContext()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(upsert_lock(), {"lock_key": context.lock_key(f"upsert:{name}:{key}")})
            held.set()
            release.wait(timeout=60)
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("index_built", [True, False], ids=["job_i13", "no-job_i13"])
def test_upsert_waits_on_the_python_only_lock_only_while_job_i13_is_missing(index_built):
    name = f"upsert-lock-{index_built}"
    boss.create_queue(name, partition=True)
    if not index_built:
        (table,) = rows("SELECT table_name FROM {s}.queue WHERE name = %s", [name])[0]
        rows(f"DROP INDEX {{s}}.{table}_i13")
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_upsert_lock, args=(name, "k", held, release))
    holder.start()
    try:
        assert held.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '1s'")
        if index_built:
            assert boss.upsert(name, {"n": 1}, singleton_key="k").inserted == 1
        else:
            with pytest.raises(OperationalError, match="lock timeout"):
                boss.upsert(name, {"n": 1}, singleton_key="k")
    finally:
        release.set()
        holder.join(timeout=60)
        connection.close()
    boss.delete_queue(name)


@pytest.mark.django_db(transaction=True)
def test_racing_upserts_leave_one_job_while_job_i13_is_still_being_built():
    # An upgraded schema builds job_i13 through bam after the migration; until then the table has
    # no such index. A partitioned queue's own table stands in for it here, its index dropped.
    name = "upsert-build-window"
    boss.create_queue(name, partition=True)
    (table,) = rows("SELECT table_name FROM {s}.queue WHERE name = %s", [name])[0]
    rows(f"DROP INDEX {{s}}.{table}_i13")
    results: list[UpsertResult] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def racer(slot: int) -> None:
        try:
            start.wait(timeout=30)
            results.append(boss.upsert(name, {"slot": slot}, singleton_key="k"))
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)
            start.abort()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=racer, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sorted(result.inserted for result in results) == [0] * 7 + [1]
    ((job_id, _, _),) = waiting(name, "k")
    # Marked as pg-boss marks it, so the index bam builds holds it from the start.
    assert job_row(job_id, "upsert_by_key") == (True,)
    boss.delete_queue(name)
    connection.close()
