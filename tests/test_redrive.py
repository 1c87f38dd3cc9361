"""redrive() and preview_redrive(): pg-boss 12.35's dead-letter redrive, conflicts failed in place."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection, connections, transaction

from django_pgboss import (
    InvalidJobReference,
    InvalidOption,
    InvalidQueueName,
    InvalidTimestamp,
    JobDataNotSerializable,
    NotADeadLetterQueue,
    QueueNotFound,
    RedriveDestination,
    RedrivePreview,
    RedriveResult,
    boss,
)
from django_pgboss.conf import pgboss_settings
from tests.helpers import count_jobs, job_row, rows

pytestmark = [pytest.mark.django_db, pytest.mark.queue("dlq")]


def dead_letter(queue: str, data=None, **send_options) -> str:
    """Send a job to ``queue`` (retry_limit 0), fail it for good, and return its dead-letter copy's id."""
    job_id = boss.send(queue, data, **send_options)
    assert boss.fail(queue, job_id, {"error": "boom"}) == 1
    ((copy_id,),) = rows("SELECT id::text FROM {s}.job WHERE source_id = %s", [job_id])
    return copy_id


def stagger(*ids: str) -> None:
    """Give the jobs increasing created_on, in the order given: a test runs in one transaction,
    where job_now() does not move, and redrive takes the oldest first."""
    for offset, job_id in enumerate(ids):
        rows(
            "UPDATE {s}.job SET created_on = now() - interval '1 hour' + %s * interval '1 minute' WHERE id = %s",
            [offset, job_id],
        )


def queue_snapshot() -> list[tuple]:
    return rows("SELECT name, id, state, output::text FROM {s}.job ORDER BY name, id")


@pytest.fixture
def dlq(queue):
    """The dead-letter queue the tests redrive from: the shared queue fixture, named "dlq"."""
    return queue


# -- preview ----------------------------------------------------------------------------------


def test_preview_counts_jobs_per_destination_and_the_unroutable(dlq):
    for name in ("emails", "invoices", "legacy"):
        boss.create_queue(name, retry_limit=0, dead_letter=dlq)
    for _ in range(3):
        dead_letter("invoices")
    dead_letter("emails")
    dead_letter("legacy")
    boss.delete_queue("legacy")  # its copy has nowhere to go back to
    boss.send(dlq, {"sent": "directly"})  # no source queue at all
    before = queue_snapshot()

    preview = boss.preview_redrive(dlq)

    assert preview == RedrivePreview(
        total=6,
        destinations=(RedriveDestination("invoices", 3), RedriveDestination("emails", 1)),
        unroutable=2,
    )
    assert preview.as_dict() == {
        "total": 6,
        "destinations": [{"name": "invoices", "count": 3}, {"name": "emails", "count": 1}],
        "unroutable": 2,
    }
    assert queue_snapshot() == before


def test_preview_with_a_destination_routes_every_match_there(dlq):
    boss.create_queue("emails", retry_limit=0, dead_letter=dlq)
    boss.create_queue("repairs")
    dead_letter("emails")
    boss.send(dlq)
    assert boss.preview_redrive(dlq, destination="repairs").as_dict() == {
        "total": 2,
        "destinations": [{"name": "repairs", "count": 2}],
        "unroutable": 0,
    }


def test_preview_filters_by_source_data_age_and_ids(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    boss.create_queue("b", retry_limit=0, dead_letter=dlq)
    old = dead_letter("a", {"customer": 7, "kind": "x"})
    new = dead_letter("a", {"customer": 8})
    other = dead_letter("b", {"customer": 7})
    stagger(old, other, new)
    cutoff = job_row(new, "created_on")[0]

    def total(**filters) -> int:
        return boss.preview_redrive(dlq, **filters).total

    assert total() == 3
    assert total(source_name="a") == 2
    assert total(data={"customer": 7}) == 2
    assert total(source_name="a", data={"customer": 7}) == 1
    assert total(created_before=cutoff) == 2
    assert total(created_before=cutoff.isoformat()) == 2
    assert total(ids=[old, new]) == 2
    assert total(ids=uuid.UUID(other)) == 1
    assert total(source_name="nowhere") == 0


def test_preview_leaves_out_jobs_already_started_or_finished(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    for _ in range(3):
        dead_letter("a")
    (active,) = boss.fetch(dlq)
    (finished,) = boss.fetch(dlq)
    boss.complete(dlq, finished)
    assert boss.preview_redrive(dlq).total == 1
    assert active.id not in {old for old, _ in boss.redrive(dlq).moved_ids}


# -- redrive ----------------------------------------------------------------------------------


def test_redrive_moves_the_oldest_jobs_first_within_the_limit(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    copies = [dead_letter("a", {"n": n}) for n in range(5)]
    stagger(*copies)

    first = boss.redrive(dlq, limit=2)
    assert (first.moved, first.conflicted, first.waiting) == (2, 0, 0)
    assert [old for old, _ in first.moved_ids] == copies[:2]
    assert int(first) == 2
    assert [job.id for job in boss.find_jobs(dlq)] == copies[2:]

    second = boss.redrive(dlq, limit=2)
    assert [old for old, _ in second.moved_ids] == copies[2:4]
    assert boss.redrive(dlq).moved_ids[0][0] == copies[4]
    assert boss.redrive(dlq) == RedriveResult(0, 0, 0, (), (), ())
    redriven = boss.find_jobs("a", queued=True)
    assert sorted(job.data["n"] for job in redriven) == [0, 1, 2, 3, 4]


def test_redriven_jobs_take_the_destination_config_and_carry_the_chain_root(dlq):
    boss.create_queue("later-dlq")
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    root = boss.send("a", {"order": 9}, priority=4, singleton_key="k", group_id="g", group_tier="gold")
    boss.fail("a", root, {"error": "boom"})
    ((copy,),) = rows("SELECT id::text FROM {s}.job WHERE source_id = %s", [root])
    # The queue changes after the job was dead-lettered: the redriven job takes what it is now.
    boss.update_queue(
        "a",
        retry_limit=6,
        retry_delay=11,
        retry_backoff=True,
        retry_delay_max=99,
        expire_in_seconds=77,
        retention_seconds=3600,
        delete_after_seconds=120,
        heartbeat_seconds=30,
        dead_letter="later-dlq",
    )

    result = boss.redrive(dlq)

    ((old, new),) = result.moved_ids
    assert old == copy
    assert new not in (copy, root)
    assert boss.get_job_by_id(dlq, copy) is None
    job = boss.get_job_by_id("a", new)
    assert (job.state, job.retry_count, job.output, job.data) == ("created", 0, None, {"order": 9})
    assert (job.priority, job.singleton_key, job.group_id, job.group_tier) == (4, "k", "g", "gold")
    assert (job.retry_limit, job.retry_delay, job.retry_backoff, job.retry_delay_max) == (6, 11, True, 99)
    assert (job.expire_in_seconds, job.delete_after_seconds, job.heartbeat_seconds) == (77, 120, 30)
    assert (job.policy, job.dead_letter) == ("standard", "later-dlq")
    assert (job.source_root_id, job.source_name, job.source_id, job.source_output) == (root, None, None, None)
    ((retention_left,),) = rows(
        "SELECT extract(epoch FROM keep_until - now()) FROM {s}.job WHERE id = %s", [new]
    )
    assert float(retention_left) == pytest.approx(3600, abs=1)
    ((runnable,),) = rows("SELECT start_after <= now() FROM {s}.job WHERE id = %s", [new])
    assert runnable
    (fetched,) = boss.fetch("a")
    assert fetched.id == new


def test_each_job_goes_back_to_its_own_source_queue(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    boss.create_queue("b", retry_limit=0, dead_letter=dlq, partition=True)
    dead_letter("a", {"to": "a"})
    dead_letter("b", {"to": "b"})
    assert boss.redrive(dlq).moved == 2
    assert [job.data for job in boss.find_jobs("a", queued=True)] == [{"to": "a"}]
    assert [job.data for job in boss.find_jobs("b", queued=True)] == [{"to": "b"}]
    assert count_jobs(dlq) == 0


def test_a_destination_override_and_the_filters_pick_what_moves(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    boss.create_queue("b", retry_limit=0, dead_letter=dlq)
    boss.create_queue("repairs", policy="exclusive", partition=True)
    keep = dead_letter("b", {"customer": 7})
    move = dead_letter("a", {"customer": 7})
    dead_letter("a", {"customer": 8})

    result = boss.redrive(dlq, destination="repairs", source_name="a", data={"customer": 7})

    assert [old for old, _ in result.moved_ids] == [move]
    (job,) = boss.find_jobs("repairs")
    assert (job.data, job.policy) == ({"customer": 7}, "exclusive")
    assert {j.id for j in boss.find_jobs(dlq)} >= {keep}
    assert count_jobs(dlq) == 2


def test_unroutable_jobs_stay_in_the_dead_letter_queue(dlq):
    boss.create_queue("gone", retry_limit=0, dead_letter=dlq)
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    orphan = dead_letter("gone")
    boss.delete_queue("gone")
    direct = boss.send(dlq, {"sent": "directly"})
    routable = dead_letter("a")

    result = boss.redrive(dlq)

    assert [old for old, _ in result.moved_ids] == [routable]
    assert (result.conflicted, result.waiting) == (0, 0)
    assert {job.id: job.state for job in boss.find_jobs(dlq)} == {orphan: "created", direct: "created"}
    assert boss.redrive(dlq).moved == 0
    assert boss.preview_redrive(dlq).unroutable == 2


# -- conflicts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "partition"),
    [
        ("short", False),
        ("stately", False),
        ("stately", True),
        ("exclusive", False),
        ("exclusive", True),
    ],
)
def test_a_job_the_destination_policy_refuses_is_failed_in_place(dlq, policy, partition):
    boss.create_queue("dest", policy=policy, partition=partition, retry_limit=0, dead_letter=dlq)
    copy = dead_letter("dest", {"n": 1}, singleton_key="k")
    holder = boss.send("dest", {"n": 2}, singleton_key="k")  # the key is taken again
    assert holder is not None
    before = rows("SELECT id, state FROM {s}.job WHERE name = 'dest' ORDER BY id")

    result = boss.redrive(dlq)

    assert (result.moved, result.conflicted, result.waiting) == (0, 1, 0)
    assert result.conflicted_ids == (copy,)
    state, output, source_output, completed_on = job_row(
        copy, "state", "output", "source_output", "completed_on"
    )
    assert state == "failed" and completed_on is not None
    assert output == {
        "message": f"Not redriven: queue dest already has a job with singleton key k that its {policy} "
        "policy allows only once",
        "reason": "redrive_conflict",
        "destination": "dest",
        "policy": policy,
        "singletonKey": "k",
    }
    assert source_output == {"error": "boom"}  # why it was dead-lettered is kept
    assert rows("SELECT id, state FROM {s}.job WHERE name = 'dest' ORDER BY id") == before
    # Failed, it is no longer a candidate, so later redrives do not stall on it.
    assert boss.preview_redrive(dlq).total == 0
    assert boss.redrive(dlq).conflicted == 0


def test_a_conflicted_job_is_retried_into_a_redrive_once_the_key_is_free(dlq):
    boss.create_queue("dest", policy="exclusive", retry_limit=0, dead_letter=dlq)
    copy = dead_letter("dest", singleton_key="k")
    holder = boss.send("dest", singleton_key="k")
    assert boss.redrive(dlq).conflicted_ids == (copy,)
    boss.complete("dest", holder, include_queued=True)
    assert boss.retry(dlq, copy) == 1
    ((old, _),) = boss.redrive(dlq).moved_ids
    assert old == copy


def test_of_two_jobs_with_one_key_in_a_batch_the_older_is_moved(dlq):
    boss.create_queue("src", retry_limit=0, dead_letter=dlq)
    boss.create_queue("dest", policy="short")
    older = dead_letter("src", {"n": 1}, singleton_key="k")
    newer = dead_letter("src", {"n": 2}, singleton_key="k")
    keyless = dead_letter("src", {"n": 3})
    keyless_too = dead_letter("src", {"n": 4})
    stagger(older, newer, keyless, keyless_too)

    result = boss.redrive(dlq, destination="dest")

    assert [old for old, _ in result.moved_ids] == [older, keyless]
    assert result.conflicted_ids == (newer, keyless_too)
    assert sorted(job.data["n"] for job in boss.find_jobs("dest")) == [1, 3]
    assert job_row(keyless_too, "output")[0]["message"] == (
        "Not redriven: queue dest already has a job without a singleton key that its short policy "
        "allows only once"
    )


@pytest.mark.parametrize("policy", ["singleton", "key_strict_fifo"])
def test_a_key_held_by_an_active_job_does_not_refuse_a_redriven_job(dlq, policy):
    """singleton and key_strict_fifo limit active (and, for key_strict_fifo, retrying and failed)
    jobs per key, not waiting ones: the redriven job is moved and waits for the key."""
    boss.create_queue("src", retry_limit=0, dead_letter=dlq)
    boss.create_queue("dest", policy=policy)
    copy = dead_letter("src", {"n": 1}, singleton_key="k")
    holder = boss.send("dest", {"n": 2}, singleton_key="k")
    (active,) = boss.fetch("dest")
    assert active.id == holder

    result = boss.redrive(dlq, destination="dest")

    ((old, new),) = result.moved_ids
    assert (old, result.conflicted) == (copy, 0)
    assert boss.fetch("dest") == []  # it waits behind the active holder
    boss.complete("dest", active)
    (fetched,) = boss.fetch("dest")
    assert fetched.id == new


def test_a_keyless_job_bound_for_a_key_strict_fifo_queue_is_refused(dlq):
    boss.create_queue("src", retry_limit=0, dead_letter=dlq)
    boss.create_queue("fifo", policy="key_strict_fifo")
    keyless = dead_letter("src")
    keyed = dead_letter("src", singleton_key="k")
    stagger(keyless, keyed)

    result = boss.redrive(dlq, destination="fifo")

    assert ([old for old, _ in result.moved_ids], result.conflicted_ids) == ([keyed], (keyless,))
    assert job_row(keyless, "output")[0] == {
        "message": "Not redriven: queue fifo is key_strict_fifo and this job has no singleton key",
        "reason": "redrive_conflict",
        "destination": "fifo",
        "policy": "key_strict_fifo",
        "singletonKey": None,
    }


def test_key_strict_fifo_dead_letter_jobs_wait_behind_their_key_holder(dlq):
    """In a key_strict_fifo dead-letter queue a key's jobs run one at a time there too: while its
    queue's worker holds a key, its other jobs are not redriven."""
    boss.create_queue("fifo-dlq", policy="key_strict_fifo")
    boss.create_queue("src", retry_limit=0, dead_letter="fifo-dlq")
    boss.create_queue("dest")
    first = boss.send("fifo-dlq", {"n": 1}, singleton_key="k")
    second = boss.send("fifo-dlq", {"n": 2}, singleton_key="k")
    other = boss.send("fifo-dlq", {"n": 3}, singleton_key="other-key")
    stagger(first, second, other)
    (holder,) = boss.fetch("fifo-dlq")
    assert holder.id == first

    assert boss.preview_redrive("fifo-dlq", destination="dest").total == 1
    result = boss.redrive("fifo-dlq", destination="dest")
    assert [old for old, _ in result.moved_ids] == [other]
    assert job_row(second, "state") == ("created",)

    boss.complete("fifo-dlq", holder)
    assert [old for old, _ in boss.redrive("fifo-dlq", destination="dest").moved_ids] == [second]


def test_refused_key_strict_fifo_dead_letter_jobs_fail_one_per_key(dlq):
    """job_i8 allows one failed key_strict_fifo job per key: the oldest refused one is failed, the
    others of its key wait behind it, and later redrives leave them until it is dealt with."""
    boss.create_queue("fifo-dlq", policy="key_strict_fifo")
    boss.create_queue("src", retry_limit=0, dead_letter="fifo-dlq")
    boss.create_queue("dest", policy="exclusive")
    older = boss.send("fifo-dlq", {"n": 1}, singleton_key="k")
    newer = boss.send("fifo-dlq", {"n": 2}, singleton_key="k")
    stagger(older, newer)
    blocker = boss.send("dest", singleton_key="k")

    result = boss.redrive("fifo-dlq", destination="dest")

    assert (result.moved, result.conflicted, result.waiting) == (0, 1, 1)
    assert (result.conflicted_ids, result.waiting_ids) == ((older,), (newer,))
    assert job_row(older, "state", "output")[0] == "failed"
    assert job_row(older, "output")[0]["reason"] == "redrive_conflict"
    assert job_row(newer, "state", "output") == ("created", None)
    assert boss.redrive("fifo-dlq", destination="dest") == RedriveResult(0, 0, 0, (), (), ())

    # Retried, the head still holds its key, now for the dead-letter queue's own workers; once
    # they finish it, the next job of the key is redriven.
    boss.delete_job("dest", blocker)
    assert boss.retry("fifo-dlq", older) == 1
    assert boss.redrive("fifo-dlq", destination="dest").moved == 0
    (head,) = boss.fetch("fifo-dlq", ignore_start_after=True)
    assert head.id == older
    boss.complete("fifo-dlq", head)
    assert [old for old, _ in boss.redrive("fifo-dlq", destination="dest").moved_ids] == [newer]


# -- bad input --------------------------------------------------------------------------------


def test_a_queue_that_is_no_dead_letter_queue_is_refused_by_name(dlq):
    boss.create_queue("plain")
    boss.send("plain")
    before = queue_snapshot()
    for call in (boss.redrive, boss.preview_redrive):
        with pytest.raises(NotADeadLetterQueue, match="'plain' is not a dead-letter queue"):
            call("plain")
    assert queue_snapshot() == before


def test_a_queue_holding_dead_letter_copies_stays_one_after_its_source_moves_on(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    dead_letter("a")
    boss.update_queue("a", dead_letter=None)
    assert boss.redrive(dlq).moved == 1


def test_a_missing_queue_or_destination_raises_queue_not_found(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    dead_letter("a")
    before = queue_snapshot()
    with pytest.raises(QueueNotFound, match="dead-letter queue 'nope' does not exist"):
        boss.redrive("nope")
    with pytest.raises(QueueNotFound, match="destination queue 'nowhere' does not exist"):
        boss.redrive(dlq, destination="nowhere")
    with pytest.raises(QueueNotFound, match="destination queue 'nowhere' does not exist"):
        boss.preview_redrive(dlq, destination="nowhere")
    assert queue_snapshot() == before


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"ids": ["not-a-uuid"]}, InvalidJobReference, "'not-a-uuid' is not a job id"),
        ({"ids": []}, InvalidJobReference, "ids must not be empty"),
        ({"ids": [str(uuid.uuid4()), None]}, InvalidJobReference, "needs a Job, an id"),
        ({"limit": 0}, InvalidOption, "limit must be an integer >= 1, not 0"),
        ({"limit": -5}, InvalidOption, "limit must be an integer >= 1"),
        ({"limit": 2.5}, InvalidOption, "limit must be an integer >= 1"),
        ({"limit": True}, InvalidOption, "limit must be an integer >= 1"),
        ({"limit": "10"}, InvalidOption, "limit must be an integer >= 1"),
        ({"created_before": "yesterday"}, InvalidTimestamp, "created_before 'yesterday' is not an ISO 8601"),
        ({"created_before": 1700000000}, InvalidTimestamp, "created_before must be a datetime"),
        ({"data": [1, 2]}, InvalidOption, "data must be a dict"),
        ({"data": {"x": object()}}, JobDataNotSerializable, "cannot be stored as JSON"),
        ({"destination": "bad name!"}, InvalidQueueName, "destination 'bad name!'"),
        (
            {"destination": "dlq"},
            InvalidOption,
            "destination must be another queue than the dead-letter queue 'dlq'",
        ),
        ({"source_name": ""}, InvalidQueueName, "source_name must be a non-empty string"),
    ],
)
def test_bad_arguments_raise_before_anything_changes(dlq, options, error, message):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    dead_letter("a")
    before = queue_snapshot()
    with pytest.raises(error, match=message):
        boss.redrive(dlq, **options)
    if "limit" not in options:
        with pytest.raises(error, match=message):
            boss.preview_redrive(dlq, **options)
    assert queue_snapshot() == before


def test_created_before_takes_dates_and_naive_datetimes_as_utc(dlq):
    boss.create_queue("a", retry_limit=0, dead_letter=dlq)
    copy = dead_letter("a")
    rows("UPDATE {s}.job SET created_on = '2026-01-01T12:00:00Z' WHERE id = %s", [copy])
    assert boss.preview_redrive(dlq, created_before=dt.date(2026, 1, 1)).total == 0
    assert boss.preview_redrive(dlq, created_before=dt.date(2026, 1, 2)).total == 1
    assert boss.preview_redrive(dlq, created_before=dt.datetime(2026, 1, 1, 12, 0, 1)).total == 1
    assert boss.preview_redrive(dlq, created_before="2026-01-01T12:00:00Z").total == 0
    assert boss.preview_redrive(dlq, created_before="2026-01-01T13:00:00+01:00").total == 0
    assert boss.preview_redrive(dlq, created_before="2026-01-01T12:00:01").total == 1


# -- concurrency ------------------------------------------------------------------------------


def run_threads(*targets) -> list[BaseException]:
    """Run each target on its own thread (so its own database connection) and return what they raised."""
    errors: list[BaseException] = []

    def guarded(target) -> None:
        try:
            target()
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=guarded, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a redrive hung"
    return errors


def dead_letters_committed(count: int) -> list[str]:
    """``count`` dead-letter copies in "dlq" from queue "a", each committed on its own (so each has
    its own created_on), oldest first."""
    boss.create_queue("dlq")
    boss.create_queue("a", retry_limit=0, dead_letter="dlq")
    return [dead_letter("a", {"n": n}) for n in range(count)]


@pytest.mark.django_db(transaction=True)
def test_a_redrive_skips_the_jobs_another_redrive_holds():
    copies = dead_letters_committed(10)
    holding = threading.Event()
    second_done = threading.Event()
    results: dict[str, RedriveResult] = {}

    def first() -> None:
        with transaction.atomic():
            results["first"] = boss.redrive("dlq", limit=4)
            holding.set()
            # Its four jobs stay locked, uncommitted, until the second redrive has finished.
            assert second_done.wait(timeout=20)

    def second() -> None:
        assert holding.wait(timeout=20)
        with transaction.atomic():
            # Waiting on the first redrive's locks would fail here instead of hanging the test.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '5s'")
            results["second"] = boss.redrive("dlq")
        second_done.set()

    assert run_threads(first, second) == []
    assert [old for old, _ in results["first"].moved_ids] == copies[:4]
    assert [old for old, _ in results["second"].moved_ids] == copies[4:]
    assert count_jobs("dlq") == 0
    assert sorted(job.data["n"] for job in boss.find_jobs("a", queued=True)) == list(range(10))
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_concurrent_redrives_racing_to_drain_a_queue_move_each_job_once():
    copies = dead_letters_committed(60)
    start = threading.Barrier(3)
    taken: list[list[tuple[str, str]]] = [[], [], []]

    def drainer(slot: int):
        def drain() -> None:
            start.wait(timeout=20)
            while moved := boss.redrive("dlq", limit=3).moved_ids:
                taken[slot].extend(moved)

        return drain

    assert run_threads(*(drainer(slot) for slot in range(3))) == []
    every = [old for moved in taken for old, _ in moved]
    assert sorted(every) == sorted(copies)  # each dead-letter job moved exactly once
    new_ids = [new for moved in taken for _, new in moved]
    assert len(set(new_ids)) == 60
    redriven = rows(
        "SELECT data->>'n', count(*) FROM {s}.job WHERE name = 'a' AND state = 'created' GROUP BY 1"
    )
    assert len(redriven) == 60 and all(n == 1 for _, n in redriven)
    assert count_jobs("dlq") == 0
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_concurrent_redrives_of_one_key_into_an_exclusive_queue_move_one_and_fail_the_other():
    boss.create_queue("dlq")
    boss.create_queue("a", retry_limit=0, dead_letter="dlq")
    boss.create_queue("dest", policy="exclusive")
    first_copy = dead_letter("a", {"n": 1}, singleton_key="k")
    second_copy = dead_letter("a", {"n": 2}, singleton_key="k")
    inserted = threading.Event()
    results: dict[str, RedriveResult] = {}

    def first() -> None:
        with transaction.atomic():
            results["first"] = boss.redrive("dlq", destination="dest", ids=[first_copy])
            inserted.set()
            time.sleep(0.5)  # the second redrive now waits on this key in the unique index

    def second() -> None:
        assert inserted.wait(timeout=20)
        results["second"] = boss.redrive("dlq", destination="dest", ids=[second_copy])

    assert run_threads(first, second) == []
    assert results["first"].moved == 1
    assert (results["second"].moved, results["second"].conflicted_ids) == (0, (second_copy,))
    assert job_row(second_copy, "state") == ("failed",)
    assert [job.data for job in boss.find_jobs("dest")] == [{"n": 1}]
    connection.close()


# -- the documentation ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_examples_in_docs_dead_letters_work_as_written():
    """Each block of docs/dead-letters.md marked "tested" runs, in order, in one namespace. Every
    call commits on its own, as in an application, so the jobs get distinct created_on."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "dead-letters.md").read_text()
    blocks = re.findall(r"<!-- tested[^>]*-->\n```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/dead-letters.md", "exec"), namespace)
    assert count_jobs("emails_dlq") == 0
    assert len(boss.find_jobs("emails")) == 2


# -- pg-boss 12.35.0 (Node) on the same schema ------------------------------------------------


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_a_chain_redriven_by_pg_boss_and_by_us_reads_the_same_on_both_sides(run_pgboss):
    schema = pgboss_settings.SCHEMA
    boss.create_queue("dlq")
    boss.create_queue("orders", retry_limit=0, retry_delay=3, dead_letter="dlq")
    root = boss.send("orders", {"order": 1})
    boss.fail("orders", root, {"error": "first"})

    assert run_pgboss("preview", schema, "dlq")["preview"] == boss.preview_redrive("dlq").as_dict()
    assert run_pgboss("redrive", schema, "dlq") == {"moved": 1}
    root_job, first = boss.get_lineage(root)
    assert root_job.id == root
    assert (first.name, first.state, first.data, first.retry_delay) == ("orders", "created", {"order": 1}, 3)
    assert (first.source_root_id, first.dead_letter) == (root, "dlq")

    boss.fail("orders", first.id, {"error": "second"})
    ((_, second),) = boss.redrive("dlq").moved_ids
    (theirs,) = run_pgboss("get", schema, "orders", second)["jobs"]
    assert (theirs["sourceRootId"], theirs["state"], theirs["retryDelay"]) == (root, "created", 3)
    assert [job.id for job in boss.get_lineage(second)] == [root, first.id, second]


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_a_conflict_reads_the_same_whichever_side_redrove(run_pgboss):
    boss.create_queue("dlq")
    boss.create_queue("src", retry_limit=0, dead_letter="dlq")
    boss.create_queue("dest", policy="exclusive")
    theirs = dead_letter("src", {"side": "pg-boss"}, singleton_key="k")
    ours = dead_letter("src", {"side": "django"}, singleton_key="k")
    boss.send("dest", singleton_key="k")

    options = json.dumps({"destination": "dest", "ids": [theirs]})
    assert run_pgboss("redrive", pgboss_settings.SCHEMA, "dlq", options) == {"moved": 0}
    assert boss.redrive("dlq", destination="dest", ids=[ours]).conflicted_ids == (ours,)

    (their_state, their_output), (our_state, our_output) = (
        job_row(i, "state", "output") for i in (theirs, ours)
    )
    assert their_state == our_state == "failed"
    assert their_output.keys() == our_output.keys()
    assert (
        {k: v for k, v in their_output.items() if k != "message"}
        == {k: v for k, v in our_output.items() if k != "message"}
        == {"reason": "redrive_conflict", "destination": "dest", "policy": "exclusive", "singletonKey": "k"}
    )
