"""django_pgboss.testing.TestClock: job_now() driven by the test, for opted-in connections only."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from django.db import connections

from django_pgboss import boss, clocks
from django_pgboss.exceptions import InvalidOption
from django_pgboss.testing import TestClock
from tests.conftest import database_url
from tests.helpers import job_row, rows

MOMENT = dt.datetime(2030, 6, 1, 12, 0, tzinfo=dt.UTC)


def job_now() -> dt.datetime:
    return rows("SELECT {s}.job_now()")[0][0]


def clock_function_definition() -> str:
    return rows("SELECT pg_get_functiondef(%s::regprocedure)", [f"{boss.context.quoted_schema}.job_now()"])[
        0
    ][0]


@pytest.mark.django_db
def test_job_now_and_every_stamp_follow_the_clock():
    with TestClock(MOMENT) as clock:
        assert job_now() == MOMENT
        boss.create_queue("q")
        job_id = boss.send("q", start_after=30)
        assert job_row(job_id, "created_on", "start_after") == (MOMENT, MOMENT + dt.timedelta(seconds=30))
        assert boss.fetch("q") == []
        assert clock.advance(seconds=30) == MOMENT + dt.timedelta(seconds=30)
        (job,) = boss.fetch("q")
        assert job_row(job.id, "started_on") == (MOMENT + dt.timedelta(seconds=30),)
        clock.set_time(MOMENT - dt.timedelta(days=1))
        assert job_now() == MOMENT - dt.timedelta(days=1)


@pytest.mark.django_db(transaction=True)
def test_connections_that_did_not_opt_in_keep_the_real_clock_and_detach_restores_everything():
    before = clock_function_definition()
    with TestClock(MOMENT):
        assert job_now() == MOMENT
        # Another client on the same schema (a pg-boss instance, another test run): real time.
        with psycopg.connect(database_url(), autocommit=True) as other:
            (other_now,) = other.execute(f"SELECT {boss.context.quoted_schema}.job_now()").fetchone()
        assert abs(other_now - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5)
        # A connection opened while the clock is attached (a worker thread's) opts in on opening.
        connections["default"].close()
        assert job_now() == MOMENT
    assert clock_function_definition() == before
    assert rows("SELECT to_regclass(%s)", [f"{boss.context.quoted_schema}.__pgboss_test_clock"]) == [(None,)]
    assert abs(job_now() - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5)


@pytest.mark.django_db(transaction=True)
def test_an_override_left_behind_is_refused_until_restored():
    clock = TestClock(MOMENT)
    clock.attach()
    # As if the run was killed here: the override stays, the next clock refuses to stack on it.
    with pytest.raises(RuntimeError, match="already carries a test clock override"):
        TestClock().attach()
    with pytest.raises(RuntimeError, match="already attached"):
        clock.attach()
    TestClock.restore()
    assert "pg_catalog.now()" in clock_function_definition()
    assert "test_clock" not in clock_function_definition()
    # In this process the clock is still attached: its timers and its hook on new connections go.
    clock.detach()
    assert clocks.current() is clocks.SYSTEM_CLOCK


@pytest.mark.django_db
def test_bad_times_are_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        TestClock(dt.datetime(2030, 1, 1))
    with TestClock(MOMENT) as clock:
        with pytest.raises(ValueError, match="forward only"):
            clock.advance(seconds=-1)
        with pytest.raises(ValueError, match="timezone-aware"):
            clock.set_time("2030-01-01")
        with pytest.raises(InvalidOption, match="fortnights"):
            clock.advance(fortnights=1)
    with pytest.raises(RuntimeError, match="not attached"):
        clock.now()
