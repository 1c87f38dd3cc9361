"""Failing jobs: retries with delay and backoff, terminal failure, and the dead-letter copy."""

from __future__ import annotations

import datetime as dt

import pytest

from django_pgboss import boss
from tests.helpers import job_row, rows

pytestmark = pytest.mark.django_db


def fetch_one(queue: str):
    (job,) = boss.fetch(queue, ignore_start_after=True)
    return job


def seconds_from_now(moment: dt.datetime) -> float:
    return (moment - rows("SELECT now()")[0][0]).total_seconds()


def test_a_failed_job_is_retried_until_its_limit_then_fails():
    boss.create_queue("q", retry_limit=2)
    job_id = boss.send("q", {"n": 1})
    for attempt in range(3):
        job = fetch_one("q")
        assert (job.id, job.retry_count) == (job_id, attempt)
        assert boss.fail("q", job, {"attempt": attempt}) == 1
        expected = "retry" if attempt < 2 else "failed"
        state, output, completed_on = job_row(job_id, "state", "output", "completed_on")
        assert (state, output) == (expected, {"attempt": attempt})
        assert (completed_on is None) == (expected == "retry")
    assert boss.fetch("q", ignore_start_after=True) == []


def test_retry_limit_zero_fails_at_once():
    boss.create_queue("q", retry_limit=0)
    boss.send("q")
    job = fetch_one("q")
    boss.fail("q", job)
    assert job_row(job.id, "state") == ("failed",)


def test_fixed_retry_delay():
    boss.create_queue("q", retry_limit=3, retry_delay=30)
    boss.send("q")
    job = fetch_one("q")
    boss.fail("q", job)
    (start_after,) = job_row(job.id, "start_after")
    assert seconds_from_now(start_after) == pytest.approx(30, abs=0.01)
    assert boss.fetch("q") == []


def test_exponential_backoff_with_jitter_and_cap():
    boss.create_queue("q", retry_limit=5, retry_delay=10, retry_backoff=True, retry_delay_max=50)
    job_id = boss.send("q")
    ranges = [(10, 20), (20, 40), (40, 50), (50, 50)]
    for low, high in ranges:
        job = fetch_one("q")
        boss.fail("q", job)
        delay = seconds_from_now(job_row(job_id, "start_after")[0])
        assert low <= delay <= high


def test_backoff_without_cap_doubles():
    boss.create_queue("q", retry_limit=3, retry_delay=2, retry_backoff=True)
    job_id = boss.send("q")
    for low, high in [(2, 4), (4, 8), (8, 16)]:
        boss.fail("q", fetch_one("q"))
        assert low <= seconds_from_now(job_row(job_id, "start_after")[0]) < high


def test_exception_output_names_the_error():
    boss.create_queue("q")
    boss.send("q")
    job = fetch_one("q")
    try:
        raise KeyError("missing-customer")
    except KeyError as exc:
        boss.fail("q", job, exc)
    (output,) = job_row(job.id, "output")
    assert output["name"] == "KeyError"
    assert output["message"] == "'missing-customer'"
    assert "raise KeyError" in output["traceback"]


def test_exception_attributes_are_kept_when_they_are_json():
    boss.create_queue("q")
    boss.send("q")
    job = fetch_one("q")
    error = RuntimeError("card declined")
    error.details = {"deeply": {"nested": {"reason": "nuna"}}}
    error.connection = object()  # not JSON: left out, the rest still stored
    boss.fail("q", job, error)
    (output,) = job_row(job.id, "output")
    assert output["details"] == {"deeply": {"nested": {"reason": "nuna"}}}
    assert "connection" not in output
    assert output["message"] == "card declined"


def test_a_completed_job_in_a_failed_batch_is_left_alone():
    boss.create_queue("q")
    boss.insert("q", [{"data": 1}, {"data": 2}])
    done, active = boss.fetch("q", batch_size=2)
    boss.complete("q", done)
    assert boss.fail("q", [done.id, active.id]) == 1
    assert job_row(done.id, "state") == ("completed",)


def test_unfenced_fail_also_fails_waiting_jobs():
    boss.create_queue("q", retry_limit=0)
    waiting = boss.send("q")
    assert boss.fail("q", waiting, {"why": "bad input"}) == 1
    assert job_row(waiting, "state") == ("failed",)


def test_terminal_failure_copies_the_job_into_its_dead_letter_queue():
    boss.create_queue(
        "dlq", retry_limit=7, expire_in_seconds=60, retention_seconds=3600, heartbeat_seconds=30
    )
    boss.create_queue("q", retry_limit=1, dead_letter="dlq")
    job_id = boss.send("q", {"order": 5}, priority=3, singleton_key="k", group_id="g")
    boss.fail("q", fetch_one("q"), {"try": 1})
    assert boss.find_jobs("dlq") == []
    assert boss.fail("q", fetch_one("q"), {"try": 2}) == 1  # the copy is not counted

    (copy,) = boss.find_jobs("dlq")
    original = boss.get_job_by_id("q", job_id)
    assert original.state == "failed"
    assert copy.id != job_id
    assert (copy.state, copy.data, copy.priority, copy.singleton_key, copy.group_id) == (
        "created",
        {"order": 5},
        3,
        "k",
        "g",
    )
    # Settings come from the dead-letter queue, and the copy never chains further.
    assert (copy.retry_limit, copy.expire_in_seconds, copy.heartbeat_seconds) == (7, 60, 30)
    assert (copy.dead_letter, copy.policy, copy.output) == (None, None, None)
    assert seconds_from_now(copy.keep_until) == pytest.approx(3600, abs=1)
    # Provenance.
    assert (copy.source_name, copy.source_id, copy.source_retry_count) == ("q", job_id, 1)
    assert copy.source_created_on == original.created_on
    assert copy.source_output == {"try": 2}
    assert copy.source_root_id == job_id


def test_a_job_option_dead_letter_overrides_the_queue():
    boss.create_queue("queue-dlq")
    boss.create_queue("job-dlq", partition=True)
    boss.create_queue("q", retry_limit=0, dead_letter="queue-dlq")
    boss.send("q", dead_letter="job-dlq")
    boss.fail("q", fetch_one("q"))
    assert (len(boss.find_jobs("queue-dlq")), len(boss.find_jobs("job-dlq"))) == (0, 1)


def test_failing_a_dead_letter_copy_keeps_its_provenance_and_makes_no_copy():
    boss.create_queue("dlq", retry_limit=0)
    boss.create_queue("q", retry_limit=0, dead_letter="dlq")
    job_id = boss.send("q")
    boss.fail("q", fetch_one("q"))
    copy = fetch_one("dlq")
    boss.fail("dlq", copy, {"still": "broken"})
    failed_copy = boss.get_job_by_id("dlq", copy.id)
    assert (failed_copy.state, failed_copy.source_id, failed_copy.source_root_id) == (
        "failed",
        job_id,
        job_id,
    )
    assert rows("SELECT count(*) FROM {s}.job") == [(2,)]


def test_source_root_id_survives_a_second_round_trip():
    """A job that came back from a dead-letter queue keeps its chain's root when it fails again.

    The redriven job is written here the way redrive writes it (redrive itself arrives with the
    dead-letter admin); what is under test is the fail path's COALESCE(source_root_id, id).
    """
    boss.create_queue("dlq", retry_limit=0)
    boss.create_queue("q", retry_limit=0, dead_letter="dlq")
    root = boss.send("q")
    boss.fail("q", fetch_one("q"))
    (first_copy,) = boss.find_jobs("dlq")
    redriven = boss.send("q", {"again": True})
    rows(
        "UPDATE {s}.job SET source_name = 'dlq', source_id = %s, source_root_id = %s WHERE id = %s",
        [first_copy.id, first_copy.source_root_id, redriven],
    )
    boss.fail("q", fetch_one("q"))
    copies = boss.find_jobs("dlq")
    assert len(copies) == 2
    second_copy = next(c for c in copies if c.id != first_copy.id)
    assert (second_copy.source_id, second_copy.source_root_id) == (redriven, root)
    assert rows("SELECT count(*) FROM {s}.job WHERE source_root_id = %s", [root]) == [(3,)]


def test_a_retry_refused_by_the_policy_fails_for_good_and_is_dead_lettered():
    boss.create_queue("dlq")
    boss.create_queue("st", policy="stately", retry_limit=5, dead_letter="dlq")
    first = boss.send("st", {"n": 1}, singleton_key="k")
    (active,) = boss.fetch("st")
    assert active.id == first
    # Another job of the key already waits to retry: stately allows one per state and key.
    other = boss.send("st", {"n": 2}, singleton_key="k")
    rows("UPDATE {s}.job SET state = 'retry' WHERE id = %s", [other])
    assert boss.fail("st", active) == 1
    assert job_row(first, "state") == ("failed",)
    assert [c.source_id for c in boss.find_jobs("dlq")] == [first]


def test_retry_gives_a_failed_job_one_more_attempt():
    boss.create_queue("dlq")
    boss.create_queue("q", retry_limit=0, dead_letter="dlq")
    job_id = boss.send("q")
    boss.fail("q", fetch_one("q"))
    assert boss.retry("q", job_id) == 1
    assert job_row(job_id, "state", "retry_limit", "completed_on") == ("retry", 1, None)
    assert boss.retry("q", job_id) == 0
    again = fetch_one("q")
    assert again.retry_count == 1
    boss.fail("q", again)
    assert job_row(job_id, "state") == ("failed",)
    assert len(boss.find_jobs("dlq")) == 2  # each terminal failure is dead-lettered


def test_fail_into_a_partitioned_dead_letter_queue_from_a_partitioned_queue():
    boss.create_queue("dlq", partition=True)
    boss.create_queue("q", partition=True, retry_limit=0, dead_letter="dlq")
    boss.send("q")
    boss.fail("q", fetch_one("q"))
    (copy,) = boss.find_jobs("dlq")
    table = boss.get_queue("dlq").table_name
    # Read from the queue's own table rather than by the row's tableoid: on Citus a row's tableoid
    # is its shard's, whose name is not the table's.
    assert rows(f"SELECT count(*) FROM {{s}}.{table} WHERE name = 'dlq' AND id = %s", [copy.id]) == [(1,)]
