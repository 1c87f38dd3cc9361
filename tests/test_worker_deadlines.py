"""Deadlines, job.signal, abandoned threads and per-job batch results (issue 22 items 1, 2, 6),
with real worker processes (manage.py pgboss_work), and in-process where a moment is observed."""

from __future__ import annotations

import dataclasses
import json
import signal
import threading
import time

import pytest

from django_pgboss import JobCancelled, JobResult, boss, signals
from django_pgboss.cancellation import JobSignal
from django_pgboss.conf import pgboss_settings
from django_pgboss.exceptions import InvalidOption
from django_pgboss.worker import Worker
from django_pgboss.worker.deadlines import EXIT_ABANDONED_THREADS
from django_pgboss.worker.registry import Registration, validated
from tests.helpers import job_row, rows
from tests.processes import run_worker, start_worker, wait_for
from tests.test_worker import _peek_stderr, _stderr_seen, marker_lines

pytestmark = pytest.mark.django_db(transaction=True)


def _stop(worker, timeout: float = 60) -> tuple[str, str]:
    """SIGTERM the worker; its stdout and its whole stderr (what _stderr() read of it included)."""
    worker.send_signal(signal.SIGTERM)
    stdout, stderr = worker.communicate(timeout=timeout)
    return stdout, _stderr_seen.pop(worker.pid, "") + (stderr or "")


# -- the signal itself ---------------------------------------------------------------------------


def test_a_signal_is_set_once_wakes_its_waiters_and_runs_its_callbacks():
    job_signal = JobSignal()
    assert not job_signal.is_set() and job_signal.reason is None
    job_signal.raise_if_set()  # nothing to raise yet
    assert job_signal.wait(0.01) is False
    woke = threading.Event()
    seen = []
    threading.Thread(target=lambda: job_signal.wait(30) and woke.set(), daemon=True).start()
    remove = job_signal.add_callback(seen.append)
    job_signal.add_callback(lambda reason: 1 / 0)  # a failing callback does not stop the rest
    removed = job_signal.add_callback(lambda reason: seen.append("removed"))
    removed()
    assert job_signal.set("deadline") is True
    assert job_signal.set("later") is False  # the first reason stays
    assert woke.wait(5)
    assert seen == ["deadline"] and job_signal.reason == "deadline" and job_signal.is_set()
    with pytest.raises(JobCancelled) as raised:
        job_signal.raise_if_set()
    assert raised.value.reason == "deadline" and str(raised.value) == "deadline"
    late = []
    job_signal.add_callback(late.append)  # already set: runs at once
    assert late == ["deadline"]
    remove()


def test_every_fetched_job_carries_its_own_unset_signal():
    boss.create_queue("signals")
    boss.insert("signals", [{"data": {}}, {"data": {}}])
    first, second = boss.fetch("signals", batch_size=2)
    assert first.signal is not second.signal
    assert not first.signal.is_set()
    twin = dataclasses.replace(first, signal=JobSignal())
    twin.signal.set("only the twin's")
    assert twin == first and not first.signal.is_set()  # the signal takes no part in ==
    assert "JobSignal" not in repr(first)


# -- deadlines, with real worker processes -------------------------------------------------------


def test_a_handler_looping_forever_is_failed_at_its_deadline_retried_and_the_queue_keeps_its_concurrency(
    tmp_path,
):
    marker = tmp_path / "marker"
    boss.create_queue("deadline", retry_limit=2, retry_delay=0)
    stuck = boss.send("deadline", {"mode": "forever", "marker": str(marker)}, expire_in_seconds=1)
    worker = start_worker("--queue", "deadline")
    try:
        # The worker fails the attempt at its deadline; the retry runs on the thread that took the
        # stuck one's place, and completes.
        wait_for(lambda: job_row(stuck, "state")[0] == "completed", timeout=30)
        state, retry_count, output = job_row(stuck, "state", "retry_count", "output")
        assert (state, retry_count, output["attempt"]) == ("completed", 1, 1)
        # Two threads still serve the queue (concurrency 2) although one is stuck for ever: two
        # jobs that sleep both start before either ends.
        pair = boss.insert(
            "deadline",
            [{"data": {"mode": "sleep", "sleep": 1.5, "marker": str(marker)}} for _ in range(2)],
            return_ids=True,
        )
        wait_for(lambda: all(job_row(i, "state") == ("completed",) for i in pair), timeout=30)
        started = {line[1]: float(line[4]) for line in marker_lines(marker, "start") if line[1] in pair}
        ended = {line[1]: float(line[4]) for line in marker_lines(marker, "end") if line[1] in pair}
        assert max(started.values()) < min(ended.values()), (started, ended)
        # The stuck thread is counted and logged as abandoned, once its grace is over.
        wait_for(lambda: "abandoned it" in _stderr(worker), timeout=15)
    finally:
        stdout, stderr = _stop(worker)
    assert worker.returncode == 0, stderr
    assert "passed their deadline" in stderr
    assert "ignored the cancellation signal" in stderr
    (first_attempt,) = [line for line in marker_lines(marker, "start") if line[1] == stuck and line[3] == "0"]
    assert first_attempt
    assert "worked" in stdout


def test_a_late_result_of_an_abandoned_handler_is_refused_by_the_attempt_fence(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("deadline", retry_limit=1, retry_delay=0)
    late = boss.send("deadline", {"mode": "late", "sleep": 3, "marker": str(marker)}, expire_in_seconds=1)
    worker = start_worker("--queue", "deadline")
    try:
        wait_for(lambda: marker_lines(marker, "late"), timeout=30)
        # The late result reaches the settler after the retry completed (or while it waits):
        # either way the fence refuses it, and the worker says so.
        wait_for(lambda: "refuses it" in _stderr(worker), timeout=10)
        wait_for(lambda: "not completed" in _stderr(worker), timeout=10)
        wait_for(lambda: job_row(late, "state") == ("completed",), timeout=10)
    finally:
        stdout, stderr = _stop(worker)
    assert worker.returncode == 0, stderr
    state, retry_count, output = job_row(late, "state", "retry_count", "output")
    assert (state, retry_count) == ("completed", 1)
    assert output["attempt"] == 1 and "late" not in output  # never stored
    assert "1 lost to another attempt" in stdout


def test_a_cooperative_handler_sees_its_signal_at_the_deadline_and_is_not_abandoned(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("deadline", retry_limit=1, retry_delay=60)
    job = boss.send("deadline", {"mode": "cooperative", "marker": str(marker)}, expire_in_seconds=1)
    worker = start_worker("--queue", "deadline")
    try:
        wait_for(lambda: marker_lines(marker, "stopped"), timeout=30)
        wait_for(lambda: "passed their deadline" in _stderr(worker), timeout=10)
        time.sleep(1.5)  # past the abandon grace: nothing may be counted
    finally:
        _, stderr = _stop(worker)
    assert worker.returncode == 0, stderr
    assert "ignored the cancellation signal" not in stderr
    state, output = job_row(job, "state", "output")
    assert state == "retry"
    assert output["name"] == "JobDeadlineExceeded"
    assert "exceeded 1s" in output["message"]


def test_past_max_abandoned_threads_the_worker_exits_with_its_own_status_and_pg_boss_retries_the_job(
    tmp_path, run_pgboss
):
    """The job is sent by pg-boss (Node), failed at its deadline by us, and retried by pg-boss."""
    marker = tmp_path / "marker"
    boss.create_queue("deadline")
    (job_id,) = run_pgboss(
        "send",
        pgboss_settings.SCHEMA,
        "deadline",
        json.dumps(
            [
                {
                    "data": {"mode": "forever", "marker": str(marker)},
                    "options": {"expireInSeconds": 1, "retryLimit": 1, "retryDelay": 6},
                }
            ]
        ),
    )["ids"]
    result = run_worker("--queue", "deadline", "--max-abandoned-threads", "0", timeout=60)
    assert result.returncode == EXIT_ABANDONED_THREADS == 75, result.stderr
    assert "more than max_abandoned_threads" in result.stderr
    assert "exiting with status 75" in result.stderr
    state, output = job_row(job_id, "state", "output")
    assert state == "retry" and output["name"] == "JobDeadlineExceeded"
    wait_for(
        lambda: rows("SELECT 1 FROM {s}.job WHERE id = %s AND start_after <= now()", [job_id]), timeout=15
    )
    (seen,) = run_pgboss("work", pgboss_settings.SCHEMA, "deadline", json.dumps({"by": "node"}))["jobs"]
    assert (seen["id"], seen["retryCount"]) == (job_id, 1)
    assert job_row(job_id, "state", "output") == ("completed", {"by": "node"})


@pytest.mark.node
def test_pg_boss_sees_a_job_our_worker_failed_at_its_deadline_as_failed_with_the_reason(run_pgboss):
    boss.create_queue("deadline", retry_limit=0)
    job_id = boss.send("deadline", {"mode": "cooperative"}, expire_in_seconds=1)
    worker = start_worker("--queue", "deadline")
    try:
        wait_for(lambda: job_row(job_id, "state") == ("failed",), timeout=30)
    finally:
        _stop(worker)
    (seen,) = run_pgboss("get", pgboss_settings.SCHEMA, "deadline", job_id)["jobs"]
    assert seen["state"] == "failed"
    assert seen["output"]["name"] == "JobDeadlineExceeded"


# -- the signal's moment, observed in-process -----------------------------------------------------


def test_a_cooperative_handler_is_woken_by_its_signal_not_by_its_own_timeout():
    """A handler waiting on job.signal.wait() returns the moment the deadline sets the signal:
    its wait returns True on its first call, long before that call's own timeout. (The moment
    itself, about a millisecond, is a figure for bench/, not a timed assertion a loaded machine
    could break: it used to be asserted as "within 100 ms" and failed under load.)"""
    boss.create_queue("coop", retry_limit=0)
    signalled = threading.Event()
    stopped = threading.Event()
    waits: list[bool] = []

    def handler(job):
        job.signal.add_callback(lambda reason: signalled.set())
        # Far longer than the test waits: a wake-up by timeout would show as False below.
        waits.append(job.signal.wait(600))
        stopped.set()
        job.signal.raise_if_set()

    received = []

    def on_cancelled(sender, worker, queue, job, reason, **kwargs):
        received.append((sender, worker, queue, job.id, reason))

    job_id = boss.send("coop", {}, expire_in_seconds=1)
    worker = Worker([Registration("coop", handler, polling_interval_seconds=0.1)], grace_seconds=1)
    signals.job_cancelled.connect(on_cancelled)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert signalled.wait(60), "the deadline never came"
        assert stopped.wait(60), "the handler's wait did not return when its signal was set"
        assert waits == [True]
    finally:
        worker.stop()
        thread.join(30)
        signals.job_cancelled.disconnect(on_cancelled)
    assert worker.stats.deadlines == 1 and worker.stats.abandoned == 0
    assert received == [(Worker, worker, "coop", job_id, "deadline")]


def test_a_stop_whose_grace_period_ends_sets_the_running_jobs_signals():
    boss.create_queue("coop")
    started = threading.Event()
    reasons = []

    def handler(job):
        started.set()
        job.signal.wait(30)
        reasons.append(job.signal.reason)

    job_id = boss.send("coop", {})
    worker = Worker([Registration("coop", handler, polling_interval_seconds=0.1)], grace_seconds=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert started.wait(30)
    worker.stop()
    thread.join(30)
    wait_for(lambda: reasons, timeout=5)
    assert reasons == ["shutdown"]
    assert job_row(job_id, "state")[0] in ("created", "retry")


# -- per-job results -------------------------------------------------------------------------------


def test_per_job_results_complete_fail_and_dead_letter_each_job_of_a_batch(caplog):
    boss.create_queue("perjob-dlq")
    boss.create_queue("perjob", retry_limit=2, retry_delay=60, dead_letter="perjob-dlq")
    outcomes = ["completed", "failed", "deadletter", "missing", "completed"]
    ids = boss.insert(
        "perjob", [{"data": {"n": n, "outcome": o}} for n, o in enumerate(outcomes)], return_ids=True
    )
    result = run_worker("--queue", "perjob", "--burst", "-v", "2")
    assert result.returncode == 0, result.stderr
    completed, failed, dead, missing, completed_too = (
        job_row(i, "state", "retry_count", "output") for i in ids
    )
    assert completed == ("completed", 0, {"n": 0})
    assert completed_too == ("completed", 0, {"n": 4})
    assert failed == ("retry", 0, {"why": "failed 1"})
    # Dead-lettered at once, its retries left unused.
    assert dead == ("failed", 0, {"why": "poison"})
    (copy_id,) = rows("SELECT id::text FROM {s}.job WHERE name = 'perjob-dlq' AND source_id = %s", [ids[2]])[
        0
    ]
    assert f"went to its dead letter queue perjob-dlq as job {copy_id}" in result.stderr
    state, retry_count, output = missing
    assert (state, retry_count, output["name"]) == ("retry", 0, "MissingJobResult")
    assert "returned no result for this job" in output["message"]
    # The entry for a job the handler was not given is ignored, and said to be.
    assert "00000000-0000-4000-8000-000000000000, which it was not given; ignored" in result.stderr
    assert not rows("SELECT 1 FROM {s}.job WHERE id = '00000000-0000-4000-8000-000000000000'")
    # The burst ends with retries still due later, and says how many.
    assert "stopping with 2 retry(ies) still due later" in result.stderr


def test_per_job_results_that_are_no_list_fail_the_whole_batch():
    boss.create_queue("nolist", retry_limit=0)
    ids = boss.insert("nolist", [{"data": {}}, {"data": {}}], return_ids=True)
    worker = Worker(
        [Registration("nolist", lambda jobs: {"oops": True}, batch=True, batch_size=5, per_job_results=True)],
        burst=True,
    )
    worker.run()
    for job_id in ids:
        state, output = job_row(job_id, "state", "output")
        assert state == "failed" and output["name"] == "InvalidJobResults"
        assert "must return a list of JobResult" in output["message"]


def test_job_result_builders_name_the_job_and_its_status():
    assert JobResult.completed("a", 1) == JobResult("a", "completed", 1)
    assert JobResult.failed("a").status == "failed"
    assert JobResult.dead_letter("a", {"x": 1}) == JobResult("a", "deadletter", {"x": 1})


# -- bad options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"per_job_results": True}, "per_job_results"),
        ({"per_job_results": "yes", "batch": True}, "per_job_results"),
        ({"heartbeat_refresh_seconds": 0}, "heartbeat_refresh_seconds"),
        ({"heartbeat_refresh_seconds": -1.0}, "heartbeat_refresh_seconds"),
        (
            {"notify_polling_interval_seconds": 0.5, "polling_interval_seconds": 2.0},
            "notify_polling_interval_seconds",
        ),
        ({"local_group_concurrency": 0}, "local_group_concurrency"),
        ({"local_group_concurrency": 3, "concurrency": 2}, "local_group_concurrency"),
        ({"local_group_concurrency": {"default": 1, "tiers": {"gold": 5}}, "concurrency": 2}, "gold"),
        ({"local_group_concurrency": 1, "group_concurrency": 1}, "local_group_concurrency"),
        ({"group_concurrency": {"max": 1}}, "group_concurrency"),
    ],
)
def test_bad_work_options_are_refused_naming_the_option(options, named):
    with pytest.raises(InvalidOption, match=named):
        validated(Registration("q", lambda job: None, **options))


def test_a_bad_max_abandoned_threads_is_refused_before_any_fetch():
    result = run_worker("--queue", "deadline", "--max-abandoned-threads", "-1")
    assert result.returncode != 0
    assert "--max-abandoned-threads must be >= 0" in result.stderr
    with pytest.raises(InvalidOption, match="max_abandoned_threads"):
        Worker([], max_abandoned_threads=-1)


# -- helpers ---------------------------------------------------------------------------------------


def _stderr(worker) -> str:
    """What the worker logged so far (kept, so that _stop() can give the whole of it)."""
    return _peek_stderr(worker)


@pytest.mark.node
def test_pg_boss_reads_the_dead_letter_copy_a_per_job_result_made(run_pgboss):
    boss.create_queue("perjob-dlq")
    boss.create_queue("perjob", retry_limit=3, dead_letter="perjob-dlq")
    (job_id,) = run_pgboss(
        "send",
        pgboss_settings.SCHEMA,
        "perjob",
        json.dumps([{"data": {"n": 7, "outcome": "deadletter"}}]),
    )["ids"]
    result = run_worker("--queue", "perjob", "--burst")
    assert result.returncode == 0, result.stderr
    (copy_id,) = rows("SELECT id::text FROM {s}.job WHERE name = 'perjob-dlq' AND source_id = %s", [job_id])[
        0
    ]
    (seen,) = run_pgboss("get", pgboss_settings.SCHEMA, "perjob", job_id)["jobs"]
    assert (seen["state"], seen["retryCount"], seen["output"]) == ("failed", 0, {"why": "poison"})
    (copy,) = run_pgboss("get", pgboss_settings.SCHEMA, "perjob-dlq", copy_id)["jobs"]
    assert (copy["sourceId"], copy["data"]) == (job_id, {"n": 7, "outcome": "deadletter"})
