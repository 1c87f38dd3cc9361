"""Schedules between django_pgboss and pg-boss 12.35.0 itself (Node): an RFC 5545 rule written by
one is fired by the other's timekeeper, and both preview a rule's next occurrences alike.

pg-boss commits on its own connections, hence transaction=True; scripts/test.sh installs it.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db import connection

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.monitor.timekeeper import run_timekeeper
from django_pgboss.testing import TestClock
from tests.helpers import rows

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True), pytest.mark.queue("reports")]


@pytest.fixture
def schema() -> str:
    """The schema pg-boss is pointed at (run_pgboss spells it as a pg-boss user would)."""
    return pgboss_settings.SCHEMA


#: Rules and cron expressions each previewed by both, from one instant, 20 occurrences ahead.
PREVIEWS = [
    ("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17", "Europe/Paris", "2027-01-01T00:00:00Z"),
    ("FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9;BYMINUTE=30", "America/New_York", "2027-02-25T00:00:00Z"),
    ("FREQ=HOURLY", "Europe/Paris", "2027-03-27T18:00:00Z"),
    ("FREQ=HOURLY", "America/New_York", "2027-11-06T20:00:00Z"),
    ("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "Europe/Paris", "2027-03-20T00:00:00Z"),
    ("FREQ=DAILY;BYHOUR=1;BYMINUTE=30", "America/New_York", "2027-10-30T00:00:00Z"),
    (
        "DTSTART:20270101T090000\nRRULE:FREQ=HOURLY;INTERVAL=5;COUNT=30",
        "Europe/Paris",
        "2027-01-02T00:00:00Z",
    ),
    ("FREQ=MINUTELY;INTERVAL=7;UNTIL=20270301T120000Z", "UTC", "2027-03-01T09:00:00Z"),
    (
        "DTSTART;TZID=Asia/Tokyo:20270105T083000\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH",
        "UTC",
        "2027-01-01T00:00:00Z",
    ),
    (
        "DTSTART:20270101T090000\nRRULE:FREQ=DAILY\nEXDATE:20270103T090000\nRDATE:20270104T120000",
        "Europe/Paris",
        "2027-01-01T00:00:00Z",
    ),
    ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "UTC", "2027-01-01T00:00:00Z"),
    ("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18", "Europe/Paris", "2027-01-01T00:00:00Z"),
    # A fifth Monday in February (leap years that start on a Monday) and an RDATE period (its start
    # is the occurrence): issue 16's remainder. A rule with RSCALE is not compared: pg-boss's engine
    # takes about a second per occurrence of one (20 are past its one-second budget).
    ("FREQ=YEARLY;BYDAY=5MO;BYMONTH=2;BYHOUR=9", "UTC", "2027-01-01T00:00:00Z"),
    (
        "DTSTART:20270101T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=FR\n"
        "RDATE;VALUE=PERIOD:20270105T120000Z/20270105T130000Z,20270112T120000Z/20270112T121500Z",
        "UTC",
        "2027-01-01T00:00:00Z",
    ),
    ("0 9 * * 1-5", "Europe/Paris", "2027-03-25T00:00:00Z"),
    ("*/20 1-3 * * *", "America/New_York", "2027-11-06T00:00:00Z"),
]


def test_both_previews_agree_on_the_next_20_occurrences(run_pgboss, schema):
    requests = [{"expression": e, "tz": tz, "from": start, "count": 20} for e, tz, start in PREVIEWS]
    theirs = run_pgboss("preview-schedules", schema, json.dumps(requests))["previews"]
    for (expression, tz, start), their in zip(PREVIEWS, theirs, strict=True):
        ours = boss.preview_schedule(
            expression, tz=tz, start=dt.datetime.fromisoformat(start.replace("Z", "+00:00")), count=20
        )
        ours = [o.strftime("%Y-%m-%dT%H:%M:%S.000Z") for o in ours]
        assert ours == their, expression
        assert len(ours) == 20 or "COUNT" in expression


def test_a_rule_pg_boss_wrote_fires_from_our_timekeeper(run_pgboss, schema, queue):
    written = run_pgboss(
        "schedule",
        schema,
        queue,
        "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17",
        json.dumps({"from": "node"}),
        json.dumps({"tz": "Europe/Paris", "key": "month-end", "priority": 2}),
    )["schedule"]
    assert (written["kind"], written["timezone"]) == ("rrule", "Europe/Paris")
    ours = boss.get_schedule(queue, "month-end")
    assert (ours.kind, ours.cron, ours.data) == (
        "rrule",
        "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17",
        {"from": "node"},
    )
    with TestClock(dt.datetime(2027, 1, 29, 15, 59, 40, tzinfo=dt.UTC)) as clock:
        rows("UPDATE {s}.version SET cron_on = NULL")
        run_timekeeper(boss)
        assert boss.find_jobs(queue) == []
        clock.advance(seconds=40)  # 16:00:20 UTC, 17:00:20 in Paris
        run_timekeeper(boss)
        (job,) = boss.find_jobs(queue)
        assert (job.data, job.priority) == ({"from": "node"}, 2)
        assert boss.get_schedule(queue, "month-end").last_job_id == job.id


def test_a_rule_we_wrote_fires_from_pg_boss_timekeeper(run_pgboss, schema, queue):
    # Every minute on the minute, with a DTSTART naming its own zone: whenever pg-boss's first
    # pass runs, the minute before it holds one occurrence.
    rule = "DTSTART;TZID=Europe/Paris:20260101T000000\nRRULE:FREQ=MINUTELY;BYSECOND=0"
    boss.schedule(queue, rule, {"from": "django"}, key="minutely", priority=3)
    assert rows("SELECT kind FROM {s}.schedule") == [("rrule",)]
    rows("UPDATE {s}.version SET cron_on = NULL")
    jobs = run_pgboss("timekeep", schema, queue, "30")["jobs"]
    assert len(jobs) == 1
    assert (jobs[0]["data"], jobs[0]["priority"]) == ({"from": "django"}, 3)
    connection.close()  # read what pg-boss committed on a fresh snapshot
    assert boss.get_schedule(queue, "minutely").last_job_id == jobs[0]["id"]
