"""Robustness of input (issue 13, items 3, 4, 7 and 8), against a real PostgreSQL.

Each value here once reached SQL and failed there: as a raw django.db error that left the
caller's transaction aborted, as a row no later fetch of its queue could get past, or as a time
whose arithmetic overflowed every monitor pass. Each test first shows what a user would have met,
then what they meet now: a package error naming the argument, raised before any SQL, with the
transaction still usable; or, for the values at the bounds, a job stored and read back intact.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid

import pytest
from django.db import connection, transaction

from django_pgboss import (
    InvalidJobReference,
    InvalidOption,
    InvalidStartAfter,
    JobDataNotSerializable,
    PgBossError,
    boss,
)
from django_pgboss.api.jobs import JobStore
from tests.helpers import job_row, rows

pytestmark = pytest.mark.django_db

INT4 = 2**31


def incompressible(size: int) -> str:
    """ASCII text that no compression shrinks, so an index holds all ``size`` bytes of it."""
    generator = random.Random(size)
    return "".join(
        generator.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        for _ in range(size)
    )


def assert_refused_before_sql(call, error=PgBossError, match=None):
    """``call`` raises ``error`` inside atomic(), and the transaction goes on to commit."""
    marker = f"bounds-{uuid.uuid4()}"
    with transaction.atomic():
        boss.create_queue(marker)
        with pytest.raises(error, match=match):
            call()
        # The transaction is still usable: a statement runs and the queue created above commits.
        assert rows("SELECT 1") == [(1,)]
    assert boss.get_queue(marker) is not None
    # And outside atomic() too.
    with pytest.raises(error, match=match):
        call()
    assert rows("SELECT 1") == [(1,)]


# -- item 3: values an index holds -------------------------------------------------------------


@pytest.mark.parametrize(
    "policy", ["standard", "short", "singleton", "stately", "exclusive", "key_strict_fifo"]
)
def test_a_key_too_long_for_its_index_is_refused_and_the_queue_keeps_fetching(policy):
    name = f"poison_{policy}"
    boss.create_queue(name, policy=policy)
    long_key = incompressible(4000)
    assert_refused_before_sql(
        lambda: boss.send(name, {"n": 0}, singleton_key=long_key), InvalidOption, "singleton_key"
    )
    assert_refused_before_sql(
        lambda: boss.send(name, {"n": 0}, singleton_key="k", group_id=long_key), InvalidOption, "group_id"
    )
    assert_refused_before_sql(
        lambda: boss.insert(name, [{"data": 1, "singleton_key": long_key}]), InvalidOption, "singleton_key"
    )
    # A job behind the refused ones is fetched as usual.
    job_id = boss.send(name, {"n": 1}, singleton_key="k")
    assert [job.id for job in boss.fetch(name)] == [job_id]


@pytest.mark.parametrize(
    "policy", ["standard", "short", "singleton", "stately", "exclusive", "key_strict_fifo"]
)
def test_keys_and_group_ids_at_the_bound_go_through_every_index(policy):
    """1,024 bytes of incompressible key, group id and tier through every state a policy index holds."""
    name = f"wide_{policy}"
    boss.create_queue(name, policy=policy, retry_limit=1)
    key, group, tier = incompressible(1024), "é" * 512, incompressible(1000) + "ü" * 12
    job_id = boss.send(name, {"n": 1}, singleton_key=key, group_id=group, group_tier=tier)
    (job,) = boss.fetch(name, group_concurrency={"default": 2, "tiers": {tier: 3}})
    assert (job.id, job.group_id, job.group_tier) == (job_id, group, tier)
    assert boss.fail(name, job) == 1  # a retry, then
    (job,) = boss.fetch(name, ignore_start_after=True)
    assert boss.fail(name, job) == 1  # failed for good: the key_strict_fifo index holds failed jobs
    assert boss.get_job_by_id(name, job_id).state == "failed"
    assert boss.get_job_by_id(name, job_id).singleton_key == key
    # The throttle index (job_i4) holds the key with its slot.
    assert boss.send_throttled(name, {"n": 2}, 60, key=incompressible(1024)) is not None


def test_event_names_and_schedule_keys_too_long_for_their_primary_keys_are_refused():
    boss.create_queue("events")
    assert_refused_before_sql(lambda: boss.subscribe(incompressible(4000), "events"), InvalidOption, "event")
    assert_refused_before_sql(lambda: boss.publish(incompressible(4000), {}), InvalidOption, "event")
    assert_refused_before_sql(
        lambda: boss.schedule("events", "* * * * *", key=incompressible(4000)), InvalidOption, "key"
    )
    boss.subscribe(incompressible(1024), "events")
    assert list(boss.publish(incompressible(1024), {"a": 1})) == ["events"]


# -- item 4: times computed in SQL saturate --------------------------------------------------------


def test_an_overflowing_retry_backoff_saturates_and_the_monitor_goes_on(clock):
    boss.create_queue("slow", retry_limit=100, retry_delay=INT4 - 1, retry_backoff=True)
    boss.create_queue("other", expire_in_seconds=60)
    poison = boss.send("slow", {"n": 1})
    # Up to the 17th attempt: the backoff's doubling (capped at 2^16) times 68 years overflowed an
    # interval from the 13th on, in fail() and in every monitor pass that expired the job.
    for _ in range(17):
        (job,) = boss.fetch("slow", ignore_start_after=True)
        assert boss.fail("slow", job) == 1
    (start_after, now) = rows("SELECT start_after, {s}.job_now() FROM {s}.job WHERE id = %s", [poison])[0]
    assert dt.timedelta(days=365 * 60) < start_after - now <= dt.timedelta(seconds=INT4 - 1)
    # The poison job and an unrelated queue's job both expire; one pass fails both.
    (job,) = boss.fetch("slow", ignore_start_after=True)
    other = boss.send("other", {"n": 2})
    assert [j.id for j in boss.fetch("other")] == [other]
    clock.advance(seconds=24 * 3600 + 1)
    report = boss.supervise()
    assert report.expired == 2
    assert job_row(other, "state") == ("retry",)
    assert job_row(poison, "state") == ("retry",)
    assert boss.get_job_by_id("slow", poison).start_after is not None


def test_retry_of_a_job_at_the_largest_retry_limit_does_not_overflow():
    boss.create_queue("limit", retry_limit=INT4 - 1)
    job_id = boss.send("limit", {})
    rows("UPDATE {s}.job SET state = 'failed' WHERE id = %s", [job_id])
    assert boss.retry("limit", job_id) == 1
    assert job_row(job_id, "state", "retry_limit") == ("retry", INT4 - 1)


def test_a_debounce_slot_of_the_largest_length_does_not_overflow(clock):
    # At a multiple of the slot length, the next slot is a whole slot away: 2^31 - 1 seconds, plus
    # pg-boss's extra second, which overflowed an int4.
    clock.set_time(dt.datetime.fromtimestamp(INT4 - 1, dt.UTC))
    boss.create_queue("debounce")
    assert boss.send_debounced("debounce", {"n": 1}, INT4 - 1) is not None
    assert boss.send_debounced("debounce", {"n": 2}, INT4 - 1) is not None
    assert boss.send_debounced("debounce", {"n": 3}, INT4 - 1) is None


@pytest.mark.parametrize(
    "option",
    [
        "retry_limit",
        "retry_delay",
        "retention_seconds",
        "delete_after_seconds",
        "heartbeat_seconds",
        "expire_in_seconds",
    ],
)
def test_int4_options_past_their_column_are_refused_by_send_create_and_update(option):
    boss.create_queue("ints")
    assert_refused_before_sql(lambda: boss.send("ints", {}, **{option: INT4}), InvalidOption, option)
    assert_refused_before_sql(lambda: boss.create_queue("ints2", **{option: INT4}), InvalidOption, option)
    assert_refused_before_sql(lambda: boss.update_queue("ints", **{option: INT4}), InvalidOption, option)


def test_other_int4_options_past_their_column_are_refused():
    boss.create_queue("ints")
    for call, option in [
        (lambda: boss.send("ints", {}, retry_backoff=True, retry_delay_max=INT4), "retry_delay_max"),
        (lambda: boss.create_queue("ints2", warning_queue_size=INT4), "warning_queue_size"),
        (lambda: boss.send("ints", {}, priority=INT4), "priority"),
        (lambda: boss.send_throttled("ints", {}, INT4), "singleton_seconds"),
        (lambda: boss.fetch("ints", group_concurrency=INT4), "group_concurrency"),
        (lambda: boss.fetch("ints", min_priority=INT4), "min_priority"),
        (lambda: boss.get_queue_stats("ints", bucket_seconds=INT4), "bucket_seconds"),
    ]:
        assert_refused_before_sql(call, InvalidOption, option)
    with_count = {"id": str(uuid.uuid4()), "retry_count": INT4}
    assert_refused_before_sql(lambda: boss.complete("ints", with_count), InvalidJobReference, "retry_count")


def test_limits_take_a_bigint_and_refuse_2_63():
    boss.create_queue("limits")
    boss.create_queue("limits_dlq")
    boss.update_queue("limits", dead_letter="limits_dlq")
    job_id = boss.send("limits", {})
    # find_jobs() is one of pg-boss 12.38's list reads, capped at 100,000 (tests/test_paging.py).
    assert [j.id for j in boss.find_jobs("limits", limit=100_000)] == [job_id]
    assert [j.id for j in boss.fetch("limits", batch_size=2**63 - 1)] == [job_id]
    assert int(boss.redrive("limits_dlq", limit=2**63 - 1)) == 0
    assert_refused_before_sql(lambda: boss.fetch("limits", batch_size=2**63), InvalidOption, "batch_size")
    assert_refused_before_sql(lambda: boss.find_jobs("limits", limit=100_001), InvalidOption, "limit")
    assert_refused_before_sql(lambda: boss.redrive("limits_dlq", limit=2**63), InvalidOption, "limit")


# -- item 7: what text and jsonb cannot hold ---------------------------------------------------------


NUL = "a\x00b"
SURROGATE = "a\udc80b"


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
def test_nul_and_lone_surrogates_are_refused_everywhere_before_sql(bad):
    boss.create_queue("text")
    boss.create_queue("text_dlq")
    boss.update_queue("text", dead_letter="text_dlq")
    job_id = boss.send("text", {})
    (job,) = boss.fetch("text")
    calls = [
        (lambda: boss.send("text", {"t": bad}), JobDataNotSerializable),
        (lambda: boss.send("text", {bad: 1}), JobDataNotSerializable),
        (lambda: boss.send("text", {}, singleton_key=bad), InvalidOption),
        (lambda: boss.send("text", {}, singleton_key="k", group_id=bad), InvalidOption),
        (lambda: boss.send("text", {}, singleton_key="k", group_id="g", group_tier=bad), InvalidOption),
        (lambda: boss.insert("text", [{"data": [bad]}]), JobDataNotSerializable),
        (lambda: boss.complete("text", job, {"t": bad}), JobDataNotSerializable),
        (lambda: boss.fail("text", job, {"t": bad}), JobDataNotSerializable),
        (lambda: JobStore(boss.context).complete_each("text", [(job, {"t": bad})]), JobDataNotSerializable),
        (lambda: boss.publish(bad, {}), InvalidOption),
        (lambda: boss.publish("event", {"t": bad}), JobDataNotSerializable),
        (lambda: boss.subscribe(bad, "text"), InvalidOption),
        (lambda: boss.schedule("text", "* * * * *", {"t": bad}), JobDataNotSerializable),
        (lambda: boss.schedule("text", "* * * * *", {}, singleton_key=bad), InvalidOption),
        (lambda: boss.find_jobs("text", key=bad), InvalidOption),
        (lambda: boss.find_jobs("text", data={"t": bad}), JobDataNotSerializable),
        (lambda: boss.redrive("text_dlq", data={"t": bad}), JobDataNotSerializable),
        (lambda: boss.preview_redrive("text_dlq", data={"t": bad}), JobDataNotSerializable),
        (lambda: boss.fetch("text", group_concurrency={"default": 1, "tiers": {bad: 2}}), InvalidOption),
    ]
    for call, error in calls:
        assert_refused_before_sql(call, error)
    assert boss.get_job_by_id("text", job_id).state == "active"


def test_an_exception_whose_message_holds_a_nul_is_stored_with_its_real_message():
    boss.create_queue("nul_errors", retry_limit=0)
    boss.send("nul_errors", {})
    (job,) = boss.fetch("nul_errors")

    class CustomError(Exception):
        pass

    try:
        raise CustomError("disk \x00 full \udc80")
    except CustomError as exc:
        error = exc
    with transaction.atomic():
        assert boss.fail("nul_errors", job, error) == 1
    output = boss.get_job_by_id("nul_errors", job.id).output
    assert output["name"] == "CustomError"
    assert output["message"] == "disk \\u0000 full \\udc80"
    assert "CustomError: disk \\u0000 full" in output["traceback"]


def test_nesting_deeper_than_the_bound_is_refused_and_the_bound_is_stored():
    boss.create_queue("deep")
    value: list = []
    for _ in range(500):
        value = [value]
    assert_refused_before_sql(lambda: boss.send("deep", value), JobDataNotSerializable, "nested deeper")
    very_deep: list = []
    for _ in range(100_000):
        very_deep = [very_deep]
    assert_refused_before_sql(lambda: boss.send("deep", very_deep), JobDataNotSerializable, "nested deeper")
    job_id = boss.send("deep", value[0])
    assert boss.get_job_by_id("deep", job_id).data == value[0]


def test_a_payload_over_the_size_bound_is_refused():
    boss.create_queue("big")
    assert_refused_before_sql(
        lambda: boss.send("big", "x" * (32 * 1024 * 1024)), JobDataNotSerializable, "bytes is more than"
    )


def test_the_densest_payload_at_a_fraction_of_the_bound_is_stored():
    """ "[0,0,...]" grows most in jsonb (6x, measured): 4 MiB of it stores and reads back."""
    boss.create_queue("dense")
    value = [0] * (2 * 1024 * 1024)
    job_id = boss.send("dense", value)
    (size,) = rows("SELECT pg_column_size(data::text::jsonb) FROM {s}.job WHERE id = %s", [job_id])[0]
    assert size >= 5 * len(value)  # the ratio the bound was derived from
    assert boss.get_job_by_id("dense", job_id).data == value


def test_floats_are_kept_exactly_or_refused():
    boss.create_queue("floats")
    assert_refused_before_sql(lambda: boss.send("floats", {"f": 1e308}), JobDataNotSerializable, "1e\\+308")
    assert_refused_before_sql(
        lambda: boss.send("floats", {"f": float("nan")}), JobDataNotSerializable, "JSON"
    )
    assert_refused_before_sql(lambda: boss.send("floats", [2.0**60]), JobDataNotSerializable, "float")
    kept = {"f": [0.1, 1e16, 1.5e20, 5e-324, 1e-7, -2.5, 1.2345e-300, 2.0**52]}
    job_id = boss.send("floats", kept)
    assert boss.get_job_by_id("floats", job_id).data == kept


# -- item 8: times that would overflow a derived column ----------------------------------------------


@pytest.mark.parametrize(
    "start_after",
    [
        dt.datetime.max,
        dt.datetime(9999, 1, 1, tzinfo=dt.UTC),
        "9999-06-01T00:00:00Z",
        dt.date(9950, 1, 1),
        dt.datetime.min,
        dt.timedelta.max,
        10.0**12,
    ],
)
def test_a_start_after_whose_keep_until_could_not_be_read_is_refused(start_after):
    boss.create_queue("late")
    assert_refused_before_sql(
        lambda: boss.send("late", {}, start_after=start_after), InvalidStartAfter, "start_after"
    )
    assert_refused_before_sql(
        lambda: boss.insert("late", [{"start_after": start_after}]), InvalidStartAfter, "start_after"
    )


def test_the_latest_start_after_leaves_every_job_readable():
    boss.create_queue("latest", retention_seconds=INT4 - 1)
    job_id = boss.send("latest", {}, start_after=dt.datetime(9899, 12, 31, 23, 59, tzinfo=dt.UTC))
    relative = boss.send("latest", {}, start_after=100 * 365 * 24 * 3600)
    job = boss.get_job_by_id("latest", job_id)
    assert 9967 <= job.keep_until.year <= 9968
    assert {j.id for j in boss.find_jobs("latest")} == {job_id, relative}
    # The admin's unfiltered list reads every column of every job through the ORM.
    from django_pgboss.models import Job

    assert Job.objects.filter(name="latest").count() == 2
    assert len(list(Job.objects.filter(name="latest").values())) == 2
    assert connection.is_usable()
