"""start_after in every form pg-boss takes, and get_queue_stats(force=...) without a stats history."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_pgboss import InvalidOption, InvalidStartAfter, QueueNotFound, boss
from tests.helpers import job_row, pgboss_settings_with, rows

pytestmark = pytest.mark.django_db

START = dt.datetime(2027, 1, 31, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def fixed_clock(request):
    from django_pgboss.testing import TestClock

    with TestClock(START) as clock:
        yield clock


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (90, START + dt.timedelta(seconds=90)),
        (1.5, START + dt.timedelta(seconds=1.5)),
        (dt.timedelta(hours=2), START + dt.timedelta(hours=2)),
        ("30", START + dt.timedelta(seconds=30)),
        ("1 hour", START + dt.timedelta(hours=1)),
        ("90 minutes", START + dt.timedelta(minutes=90)),
        ("2 days 3 hours", START + dt.timedelta(days=2, hours=3)),
        ("1 day 02:30", START + dt.timedelta(days=1, hours=2, minutes=30)),
        ("P1DT2H", START + dt.timedelta(days=1, hours=2)),
        # On the database's calendar: a month after January 31st is the last day of February.
        ("1 month", dt.datetime(2027, 2, 28, 12, 0, tzinfo=dt.UTC)),
        (dt.datetime(2027, 3, 1, 9, 30, tzinfo=dt.UTC), dt.datetime(2027, 3, 1, 9, 30, tzinfo=dt.UTC)),
        (dt.datetime(2027, 3, 1, 9, 30), dt.datetime(2027, 3, 1, 9, 30, tzinfo=dt.UTC)),
        (dt.date(2027, 3, 1), dt.datetime(2027, 3, 1, tzinfo=dt.UTC)),
        ("2027-03-01T09:30:00+05:30", dt.datetime(2027, 3, 1, 4, 0, tzinfo=dt.UTC)),
        ("2027-03-01T09:30:00Z", dt.datetime(2027, 3, 1, 9, 30, tzinfo=dt.UTC)),
        ("2027-03-01 09:30", dt.datetime(2027, 3, 1, 9, 30, tzinfo=dt.UTC)),
        ("2027-03-01", dt.datetime(2027, 3, 1, tzinfo=dt.UTC)),
        ("2027-07-01 08:00 America/New_York", dt.datetime(2027, 7, 1, 12, 0, tzinfo=dt.UTC)),
        ("2027-01-01 08:00:00 America/New_York", dt.datetime(2027, 1, 1, 13, 0, tzinfo=dt.UTC)),
        ("2027-03-01T09:30 Asia/Kolkata", dt.datetime(2027, 3, 1, 4, 0, tzinfo=dt.UTC)),
    ],
)
def test_start_after_forms(queue, fixed_clock, value, expected):
    job_id = boss.send(queue, start_after=value)
    assert job_row(job_id, "start_after") == (expected,)
    other = boss.send_after(queue, None, value)
    assert job_row(other, "start_after") == (expected,)
    # update() reads the same forms.
    moved = boss.send(queue)
    assert boss.update(queue, id=moved, start_after=value).updated == 1
    assert job_row(moved, "start_after") == (expected,)


def test_a_zone_name_is_resolved_as_the_zone_database_says(queue, fixed_clock):
    # The hour that does not exist on the spring-forward night, and zoneinfo's reading of it.
    local = dt.datetime(2027, 3, 14, 2, 30, tzinfo=zoneinfo.ZoneInfo("America/New_York"))
    job_id = boss.send(queue, start_after="2027-03-14 02:30 America/New_York")
    assert job_row(job_id, "start_after") == (local.astimezone(dt.UTC),)


@pytest.mark.parametrize(
    "value",
    [
        "soon",
        "",
        "1 hour ago",
        "-1 hour",
        "2 fortnights",
        "hour",
        "P",
        "1 hour x",
        "2027-13-01",
        "2027-01-01 08:00 Mars/Olympus",
        "200 years",
        -1,
        float("inf"),
        True,
        [60],
        object(),
    ],
    ids=repr,
)
def test_bad_start_after_is_refused_before_any_sql(queue, value):
    with CaptureQueriesContext(connection) as queries, pytest.raises(InvalidStartAfter) as caught:
        boss.send(queue, start_after=value)
    assert queries.captured_queries == []
    if isinstance(value, str) and value:
        assert repr(value) in str(caught.value)
    assert rows("SELECT count(*) FROM {s}.job")[0][0] == 0


# -- get_queue_stats without a stats history -----------------------------------------------------


def test_stats_of_a_queue_never_counted_are_counted_not_empty(queue, clock):
    boss.send(queue)
    boss.send(queue, start_after=3600)
    with pgboss_settings_with(PERSIST_QUEUE_STATS=False):
        (point,) = boss.get_queue_stats(queue)
    assert (point.queued_count, point.deferred_count, point.ready_count, point.total_count) == (2, 1, 1, 2)
    assert (point.created_delta, point.captured_on) == (None, clock.now())
    # Written back, as a monitor's count: the queue row holds it now.
    assert boss.get_queue(queue).monitor_on == clock.now()


def test_stats_serve_the_cache_until_it_is_an_hour_old_or_forced(queue, clock):
    boss.send(queue)
    with pgboss_settings_with(PERSIST_QUEUE_STATS=False):
        (first,) = boss.get_queue_stats(queue)
        boss.send(queue)
        clock.advance(seconds=59)
        # Within the budget: the cached count, even forced (a minute shares one count).
        assert boss.get_queue_stats(queue)[0] == first
        assert boss.get_queue_stats(queue, force=True)[0] == first
        clock.advance(seconds=2)
        forced = boss.get_queue_stats(queue, force=True)[0]
        assert (forced.queued_count, forced.captured_on) == (2, clock.now())
        boss.send(queue)
        clock.advance(seconds=3599)
        assert boss.get_queue_stats(queue)[0] == forced
        clock.advance(seconds=2)
        (stale,) = boss.get_queue_stats(queue)
        assert (stale.queued_count, stale.captured_on) == (3, clock.now())


def test_stats_during_the_vacuum_backoff_serve_the_cache_however_old(queue, clock):
    boss.send(queue)
    with pgboss_settings_with(PERSIST_QUEUE_STATS=False):
        (first,) = boss.get_queue_stats(queue)
        boss.send(queue)
        clock.advance(hours=3)
        rows("UPDATE {s}.version SET monitor_backoff_on = {s}.job_now() + interval '10 minutes'")
        assert boss.get_queue_stats(queue, force=True)[0] == first
        rows("UPDATE {s}.version SET monitor_backoff_on = NULL")
        assert boss.get_queue_stats(queue, force=True)[0].queued_count == 2


def test_stats_bad_input(queue):
    with pytest.raises(InvalidOption, match="force"):
        boss.get_queue_stats(queue, force="yes")
    for persist in (True, False):
        with pgboss_settings_with(PERSIST_QUEUE_STATS=persist), pytest.raises(QueueNotFound):
            boss.get_queue_stats("nope", force=True)
