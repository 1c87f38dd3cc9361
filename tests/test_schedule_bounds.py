"""Stored rules that never match, against the database: refused by schedule(), and costing a
timekeeper pass nothing (issue 16's remainder). The rules' own bounds, without a database, are
tests/unit/test_schedule_bounds.py's.
"""

from __future__ import annotations

import time

import pytest

from django_pgboss import InvalidSchedule, boss
from django_pgboss.monitor.timekeeper import run_timekeeper
from django_pgboss.recurrence import EVALUATION_BUDGET_SECONDS
from tests.helpers import rows
from tests.unit.test_schedule_bounds import UNTELLABLE


@pytest.mark.django_db
@pytest.mark.queue("reports")
def test_schedule_refuses_a_rule_that_never_matches_before_storing_it(queue):
    with pytest.raises(InvalidSchedule, match='"BYSETPOS=40" never matches') as refused:
        boss.schedule(queue, "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=40")
    assert refused.value.field == "cron"
    began = time.process_time()
    with pytest.raises(InvalidSchedule, match="gave up after 1s of searching"):
        boss.schedule(queue, UNTELLABLE[1])
    assert time.process_time() - began < EVALUATION_BUDGET_SECONDS + 2
    # The monthly one gives up at its budget on a slow machine and walks to 9999 on a fast one:
    # refused either way, with the reason it met.
    with pytest.raises(InvalidSchedule, match=r"gave up after 1s of searching|has no occurrence after"):
        boss.schedule(queue, UNTELLABLE[0])
    assert rows("SELECT count(*) FROM {s}.schedule") == [(0,)]


@pytest.mark.django_db
@pytest.mark.queue("reports")
def test_a_stored_rule_that_never_matches_costs_a_pass_nothing_and_the_others_still_send(queue):
    # Rows as another release (or a hand) could leave them, never through schedule().
    for key, expression in [
        ("a", UNTELLABLE[0]),
        ("b", UNTELLABLE[1]),
        ("c", "FREQ=DAILY;BYHOUR=9;BYSETPOS=2"),
    ]:
        rows(
            "INSERT INTO {s}.schedule (name, key, kind, cron, timezone, options) "
            "VALUES (%s, %s, 'rrule', %s, 'UTC', '{\"missed\": \"once\"}'::jsonb)",
            [queue, key, expression],
        )
    boss.schedule(queue, "* * * * *", {"ok": True})
    began = time.process_time()
    report = run_timekeeper(boss)
    assert time.process_time() - began < 5
    assert report.claimed
    assert [job.data for job in boss.find_jobs(queue)] == [{"ok": True}]
    # With a gap to catch up on (missed="once" and a pass long ago), each catch-up is bounded.
    rows("UPDATE {s}.schedule SET created_on = now() - interval '30 days'")
    rows("UPDATE {s}.version SET cron_on = now() - interval '20 days'")
    began = time.process_time()
    report = run_timekeeper(boss)
    assert time.process_time() - began < 3 * (2 * EVALUATION_BUDGET_SECONDS) + 5
    assert report.claimed


@pytest.mark.django_db
@pytest.mark.queue("reports")
def test_run_timekeeper_warns_about_a_broken_row_once_not_once_per_call(queue):
    rows(
        "INSERT INTO {s}.schedule (name, key, kind, cron, timezone) VALUES (%s, 'broken', 'rrule', %s, 'UTC')",
        [queue, "FREQ=DAILY;BYHOUR=99"],
    )
    first = run_timekeeper(boss)
    rows("UPDATE {s}.version SET cron_on = NULL")
    second = run_timekeeper(boss)
    assert (first.claimed, second.claimed) == (True, True)
    assert (first.warnings, second.warnings) == (["invalid_schedule"], [])
    # Fixed, it drops out of the memory; broken again, it warns again.
    rows("UPDATE {s}.schedule SET cron = 'FREQ=DAILY' WHERE key = 'broken'")
    rows("UPDATE {s}.version SET cron_on = NULL")
    assert run_timekeeper(boss).warnings == []
    rows("UPDATE {s}.schedule SET cron = 'FREQ=DAILY;BYHOUR=99' WHERE key = 'broken'")
    rows("UPDATE {s}.version SET cron_on = NULL")
    assert run_timekeeper(boss).warnings == ["invalid_schedule"]


@pytest.mark.django_db
def test_get_schedules_with_a_key_and_no_name_returns_every_schedule_as_pg_boss_does():
    boss.create_queue("a")
    boss.create_queue("b")
    boss.schedule("a", "0 9 * * *", key="k")
    boss.schedule("b", "0 9 * * *")
    assert [(s.name, s.key) for s in boss.get_schedules(key="k")] == [("a", "k"), ("b", "")]
    assert [(s.name, s.key) for s in boss.get_schedules("a", "k")] == [("a", "k")]
