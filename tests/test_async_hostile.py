"""Hostile async handlers in a real ``manage.py pgboss_work`` process: a value JSON cannot hold,
BaseExceptions raised by the handler itself (CancelledError, KeyboardInterrupt, SystemExit), a
coroutine that blocks the event loop, and one that never lets its cancellation through. Each job
ends settled, and the worker goes on to the next job and exits cleanly."""

from __future__ import annotations

import pytest

from django_pgboss import boss
from tests.helpers import job_row
from tests.processes import run_worker

pytestmark = pytest.mark.django_db(transaction=True)


def work_hostile(*hows: dict) -> tuple[list[str], str, str]:
    """Send one ahostile job per entry (tests/workapp/jobs.py), then a well-behaved one, and drain
    the queue with a pgboss_work process; returns the job ids, its stdout and its stderr."""
    boss.create_queue("ahostile", retry_limit=0)
    ids = []
    for how in hows:
        data = {key: value for key, value in how.items() if key != "options"}
        ids.append(boss.send("ahostile", data, **how.get("options", {})))
    ids.append(boss.send("ahostile", {"how": "fine"}))
    result = run_worker("--queue", "ahostile", "--burst", "--grace-seconds", "5")
    assert result.returncode == 0, result.stderr
    # The worker outlived them all: the last job, sent after the hostile ones, completed.
    assert job_row(ids[-1], "state") == ("completed",)
    return ids[:-1], result.stdout, result.stderr


def test_a_value_json_cannot_hold_fails_the_job():
    (job_id,), _out, _err = work_hostile({"how": "unstorable"})
    state, output = job_row(job_id, "state", "output")
    assert state == "failed"
    assert "returned a value that cannot be stored as JSON" in output["message"]


def test_base_exceptions_a_handler_raises_itself_fail_its_job():
    ids, _out, _err = work_hostile({"how": "cancelled"}, {"how": "keyboard"}, {"how": "exit"})
    outputs = {}
    for job_id in ids:
        state, output = job_row(job_id, "state", "output")
        assert state == "failed", (job_id, output)
        outputs[output["name"]] = output["message"]
    # A CancelledError nobody asked for is the handler's failure (not a cancellation, which
    # would settle nothing and leave the job active until it expired); KeyboardInterrupt and
    # SystemExit raised in a coroutine are its failure too, as in a handler thread, and neither
    # stops the worker.
    assert outputs == {
        "CancelledError": "raised by the handler itself",
        "KeyboardInterrupt": "raised by the handler",
        "SystemExit": "3",
    }


def test_a_coroutine_that_blocks_the_loop_is_warned_about_and_its_job_still_settles():
    (job_id,), _out, err = work_hostile({"how": "block", "seconds": 2.5})
    assert job_row(job_id, "state", "output") == ("completed", {"blocked": 2.5})
    # The watchdog named the job whose coroutine held the loop, then saw it run again.
    assert "event loop has been blocked for" in err and f"pgboss-job ahostile {job_id}" in err
    assert "event loop runs again, after" in err


def test_a_coroutine_that_never_lets_its_cancellation_through_is_abandoned_and_its_job_failed():
    (job_id,), _out, err = work_hostile({"how": "ignore", "seconds": 4, "options": {"expire_in_seconds": 1}})
    state, output = job_row(job_id, "state", "output")
    # Failed at its deadline; its late return went to the attempt fence and changed nothing.
    assert state == "failed" and output["name"] == "JobDeadlineExceeded"
    assert "ignored the cancellation" in err and "abandoned it" in err


def test_handlers_that_each_run_a_while_without_waiting_still_give_the_loop_its_turns():
    # Each job holds the loop for 0.2 s, well under the watchdog's second; 20 of them claimed at
    # once run one after another on the slot. Were they run back to back without a turn of the
    # loop between them (the slot runs each coroutine itself, and one that never waits gives the
    # loop nothing back), the loop would be held for 4 s and the watchdog would say so.
    boss.create_queue("aspin")
    ids = [boss.send("aspin", {"seconds": 0.2}) for _ in range(20)]
    result = run_worker("--queue", "aspin", "--burst")
    assert result.returncode == 0, result.stderr
    assert [job_row(job_id, "state")[0] for job_id in ids] == ["completed"] * 20
    assert "event loop has been blocked" not in result.stderr, result.stderr
