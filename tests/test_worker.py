"""The worker, run as real processes (manage.py pgboss_work) and in-process for fine control."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from django_pgboss import boss
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration, registrations
from tests.helpers import job_row, move_back, rows
from tests.processes import REPO, in_process, run_monitor, run_worker, start_monitor, start_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def marker_lines(path: Path, event: str) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.startswith(event + " ")]


def states() -> dict[str, int]:
    return dict(rows("SELECT state::text, count(*) FROM {s}.job GROUP BY state"))


# -- real processes ----------------------------------------------------------------------------


def test_a_worker_process_completes_a_thousand_jobs_with_outputs():
    boss.create_queue("echo")
    boss.insert("echo", [{"data": {"i": i}} for i in range(1000)])
    result = run_worker("--queue", "echo", "--burst")
    assert result.returncode == 0, result.stderr
    assert "1000 completed, 0 failed, 0 lost" in result.stdout
    assert states() == {"completed": 1000}
    for data, output in rows("SELECT data, output FROM {s}.job"):
        assert json.loads(output)["echo"] == json.loads(data)


def test_four_worker_processes_complete_each_of_five_thousand_jobs_exactly_once():
    boss.create_queue("echo")
    boss.insert("echo", [{"data": {"i": i}} for i in range(5000)])
    workers = [start_worker("--queue", "echo", "--burst", "--batch-size", "10") for _ in range(4)]
    outputs = [worker.communicate(timeout=180) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0, 0], [err for _, err in outputs]
    # Every handler call ends in one settle, and each worker reports its settles: their sum is
    # the number of handler calls, so 5,000 means no job ran twice.
    handled = 0
    for stdout, _ in outputs:
        line = next(line for line in stdout.splitlines() if line.startswith("worked"))
        handled += int(line.split()[1])
        assert "0 failed, 0 lost" in line
    assert handled == 5000
    assert states() == {"completed": 5000}
    pids = {json.loads(o)["pid"] for (o,) in rows("SELECT output FROM {s}.job")}
    assert len(pids) >= 2  # the work was shared


def test_sigterm_lets_running_jobs_finish_and_loses_nothing(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("slow")
    ids = boss.insert(
        "slow", [{"data": {"sleep": 1.5, "marker": str(marker)}} for _ in range(5)], return_ids=True
    )
    worker = start_worker("--queue", "slow")
    wait_for(lambda: len(marker_lines(marker, "start")) == 2)
    worker.send_signal(signal.SIGTERM)
    _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr
    started = {line[1] for line in marker_lines(marker, "start")}
    finished = {line[1] for line in marker_lines(marker, "end")}
    assert started == finished and len(started) == 2
    for job_id in ids:
        expected = "completed" if job_id in started else "created"
        assert job_row(job_id, "state") == (expected,)


def test_sigterm_past_the_grace_period_fails_running_jobs_so_they_retry(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("slow", retry_limit=2)
    job_id = boss.send("slow", {"sleep": 30, "marker": str(marker)})
    worker = start_worker("--queue", "slow", "--grace-seconds", "0.5")
    wait_for(lambda: marker_lines(marker, "start"))
    worker.send_signal(signal.SIGTERM)
    worker.communicate(timeout=60)
    assert worker.returncode == 0
    state, output = job_row(job_id, "state", "output")
    assert state == "retry"
    assert output["name"] == "WorkerShutdown"


def test_a_second_signal_stops_at_once(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("slow")
    boss.send("slow", {"sleep": 30, "marker": str(marker)})
    worker = start_worker("--queue", "slow")
    wait_for(lambda: marker_lines(marker, "start"))
    started = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    worker.send_signal(signal.SIGTERM)
    worker.communicate(timeout=60)
    assert time.monotonic() - started < 10


def test_kill_9_mid_job_is_recovered_by_expiry_and_retried_to_completion(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("slow", expire_in_seconds=1, retry_limit=2)
    job_id = boss.send("slow", {"sleep": 3, "marker": str(marker)})
    worker = start_worker("--queue", "slow")
    wait_for(lambda: marker_lines(marker, "start"))
    worker.kill()
    worker.communicate(timeout=30)
    assert job_row(job_id, "state") == ("active",)
    # The monitor sweeps each queue once per interval; a pass every 1 s here.
    wait_for(lambda: boss.supervise(interval_seconds=1).expired == 1, timeout=10, interval=1.1)
    assert job_row(job_id, "state", "output") == ("retry", {"value": {"message": "job timed out"}})
    # The retry: a fresh worker, and a job short enough to beat its expiry this time.
    rows("UPDATE {s}.job SET data = jsonb_set(data, '{sleep}', '0') WHERE id = %s", [job_id])
    result = run_worker("--queue", "slow", "--burst")
    assert result.returncode == 0, result.stderr
    assert job_row(job_id, "state", "retry_count") == ("completed", 1)
    assert [line[3] for line in marker_lines(marker, "start")] == ["0", "1"]


def test_notify_wakes_an_idle_worker_at_once(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("live", notify=True)
    worker = start_worker("--queue", "live")
    try:
        # The handler polls every 30 s: a prompt start can only come from the notification.
        wait_for(lambda: "worker started" in _peek_stderr(worker), timeout=30)
        time.sleep(0.5)  # let the listener settle into LISTEN
        latencies = []
        for _ in range(3):
            sent_at = time.time()
            boss.send("live", {"marker": str(marker)})
            seen = len(latencies)
            wait_for(lambda seen=seen: len(marker_lines(marker, "start")) > seen, timeout=10, interval=0.005)
            latencies.append(float(marker_lines(marker, "start")[-1][4]) - sent_at)
        print(f"notify send->start latencies: {[round(x * 1000, 1) for x in latencies]} ms")
        # The target is 100 ms; asserted loosely so a loaded CI machine does not flake.
        assert min(latencies) < 0.5
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)


_stderr_seen: dict[int, str] = {}


def _peek_stderr(worker: subprocess.Popen) -> str:
    """Read what the worker logged so far without blocking (its stderr is a pipe)."""
    import fcntl

    fd = worker.stderr.fileno()
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        chunk = worker.stderr.read() or ""
    except (BlockingIOError, TypeError):
        chunk = ""
    _stderr_seen[worker.pid] = _stderr_seen.get(worker.pid, "") + chunk
    return _stderr_seen[worker.pid]


def test_batch_handler_gets_lists_and_its_output_is_stored_only_for_a_batch_of_one(tmp_path):
    # As pg-boss: complete(name, jobs, jobs.length === 1 ? result : undefined). One value cannot
    # be told apart per job; per_job_results is for that (tests/test_worker_deadlines.py).
    marker = tmp_path / "batches"
    boss.create_queue("batched")
    boss.insert("batched", [{"data": {"n": n, "marker": str(marker)}} for n in range(7)])
    result = run_worker("--queue", "batched", "--burst")
    assert result.returncode == 0, result.stderr
    batches = [tuple(map(int, line.split())) for line in marker.read_text().splitlines()]
    assert all(1 <= len(batch) <= 5 for batch in batches)
    assert sorted(n for batch in batches for n in batch) == list(range(7))
    assert states() == {"completed": 7}
    for data, output in rows("SELECT data, output FROM {s}.job"):
        n = json.loads(data)["n"]
        (batch,) = [batch for batch in batches if n in batch]
        assert output is None if len(batch) > 1 else json.loads(output) == {"batch": [n]}


def test_failures_retry_then_dead_letter_with_the_error():
    boss.create_queue("flaky-dead")
    boss.create_queue("flaky", retry_limit=1, dead_letter="flaky-dead")
    good = boss.send("flaky", {"result": [1, 2]})
    bad = boss.send("flaky", {"fail": "x"})
    result = run_worker("--queue", "flaky", "--burst")
    assert result.returncode == 0, result.stderr
    assert job_row(good, "state", "output") == ("completed", {"value": [1, 2]})
    state, output, retry_count = job_row(bad, "state", "output", "retry_count")
    assert (state, retry_count, output["name"], output["message"]) == (
        "failed",
        1,
        "ValueError",
        "bad input x",
    )
    assert "Traceback" in output["traceback"]
    (copy,) = boss.find_jobs("flaky-dead")
    assert copy.source_id == bad


def test_a_handler_returning_something_unstorable_fails_that_job_only():
    boss.create_queue("unstorable", retry_limit=0)
    boss.create_queue("echo")
    unstorable = boss.send("unstorable", {})
    fine = boss.send("echo", {"n": 1})
    result = run_worker("--queue", "unstorable", "--queue", "echo", "--burst")
    assert result.returncode == 0, result.stderr
    state, output = job_row(unstorable, "state", "output")
    assert state == "failed"
    assert "returned a value that cannot be stored as JSON" in output["message"]
    assert job_row(fine, "state") == ("completed",)


def test_max_jobs_stops_after_that_many():
    boss.create_queue("echo")
    boss.insert("echo", [{"data": {"i": i}} for i in range(30)])
    result = run_worker("--queue", "echo", "--max-jobs", "12", "--batch-size", "5")
    assert result.returncode == 0, result.stderr
    assert states() == {"completed": 12, "created": 18}


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--queue", "nope", "--burst"], {}, "no @work handler for queue(s) 'nope'"),
        (["--queue", "echo", "--burst"], {}, "queue(s) 'echo' do not exist"),
        (["--concurrency", "0"], {}, "--concurrency must be at least 1"),
        (["--burst"], {"PGBOSS_TEST_EXTRA_APPS": "tests.brokenapp"}, "could not import a jobs module"),
    ],
    ids=["unknown-handler", "missing-queue", "bad-option", "unimportable-jobs"],
)
def test_bad_input_is_a_command_error_before_any_fetch(args, env, message):
    boss.create_queue("slow")
    job_id = boss.send("slow", {})
    result = run_worker(*args, **env)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert job_row(job_id, "state") == ("created",)


def test_the_worker_survives_a_database_restart(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("live", notify=True)
    boss.create_queue("echo")
    worker = start_worker("--queue", "live", "--queue", "echo")
    try:
        wait_for(lambda: "worker started" in _peek_stderr(worker), timeout=30)
        connection.close()
        subprocess.run(["bash", str(REPO / "scripts" / "testdb.sh"), "stop"], check=True, capture_output=True)
        time.sleep(1.0)
        subprocess.run(
            ["bash", str(REPO / "scripts" / "testdb.sh"), "start"], check=True, capture_output=True
        )
        job_id = boss.send("echo", {"after": "restart"})
        wait_for(lambda: job_row(job_id, "state") == ("completed",), timeout=30, interval=0.2)
        # The LISTEN connection is back too: a notify job starts long before the 30 s poll.
        wait_for(lambda: "listening again" in _peek_stderr(worker), timeout=30)
        sent_at = time.time()
        boss.send("live", {"marker": str(marker)})
        wait_for(lambda: marker_lines(marker, "start"), timeout=10, interval=0.01)
        assert float(marker_lines(marker, "start")[0][4]) - sent_at < 5
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
    assert worker.returncode == 0


# -- in process ----------------------------------------------------------------------------------


def test_heartbeats_keep_a_long_job_alive():
    boss.create_queue("slow", heartbeat_seconds=10)
    job_id = boss.send("slow", {})
    release = threading.Event()

    def handler(job):
        release.wait(30)
        return {"done": True}

    worker, thread = in_process(Registration("slow", handler, polling_interval_seconds=0.1))
    try:
        wait_for(lambda: job_row(job_id, "state") == ("active",))
        (first_beat,) = job_row(job_id, "heartbeat_on")
        wait_for(lambda: job_row(job_id, "heartbeat_on")[0] > first_beat, timeout=10, interval=0.2)
    finally:
        release.set()
        worker.stop()
        thread.join(30)
    assert job_row(job_id, "state") == ("completed",)


def test_a_batch_size_above_concurrency_claims_ahead_and_heartbeats_the_waiting_jobs():
    boss.create_queue("ahead", heartbeat_seconds=10)
    boss.insert("ahead", [{"data": {"n": n}} for n in range(25)])
    release = threading.Event()
    calls = []

    def handler(job):
        calls.append(job.data["n"])
        release.wait(30)
        return {"n": job.data["n"]}

    registration = Registration("ahead", handler, concurrency=2, batch_size=10, polling_interval_seconds=0.1)
    _, thread = in_process(registration, burst=True)
    try:
        # One fetch claims ten: two run, eight wait for a thread, and nothing beyond ten is taken.
        wait_for(lambda: states().get("active") == 10)
        time.sleep(0.3)
        assert states() == {"active": 10, "created": 15}
        assert len(calls) == 2
        # The waiting jobs are held by this worker, so they are kept alive like the running ones.
        claimed = dict(rows("SELECT id, heartbeat_on FROM {s}.job WHERE state = 'active'"))
        wait_for(
            lambda: all(
                beat > claimed[job_id]
                for job_id, beat in rows("SELECT id, heartbeat_on FROM {s}.job WHERE state = 'active'")
                if job_id in claimed
            ),
            timeout=10,
            interval=0.2,
        )
    finally:
        release.set()
        thread.join(60)
    assert states() == {"completed": 25}
    assert sorted(calls) == list(range(25))


def test_one_fetch_fills_every_idle_thread_at_batch_size_one_and_claims_no_more():
    boss.create_queue("fill")
    boss.insert("fill", [{"data": {"n": n}} for n in range(6)])
    release = threading.Event()

    def handler(job):
        release.wait(30)

    registration = Registration("fill", handler, concurrency=4, batch_size=1, polling_interval_seconds=0.1)
    _, thread = in_process(registration, burst=True)
    try:
        wait_for(lambda: states().get("active") == 4)
        time.sleep(0.3)
        assert states() == {"active": 4, "created": 2}
        # Claimed by one statement: they share its transaction's start as their started_on.
        assert rows("SELECT count(DISTINCT started_on) FROM {s}.job WHERE state = 'active'") == [(1,)]
    finally:
        release.set()
        thread.join(60)
    assert states() == {"completed": 6}


@pytest.mark.parametrize(("max_age", "connections_seen"), [(0, 3), (60, 1)])
def test_a_handler_threads_connection_is_closed_after_each_job_as_conn_max_age_says(
    monkeypatch, max_age, connections_seen
):
    # Django's request rule: after each unit of work close the connection if it is past
    # CONN_MAX_AGE (0: at once) or unusable; the worker's handler threads keep it (their own
    # lookup of the thread's connections, worker/state.py), so one thread's three jobs use three
    # backends under CONN_MAX_AGE = 0 and one under a longer age.
    from django.db import connections

    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", max_age)
    boss.create_queue("pids")
    boss.insert("pids", [{"data": {"n": n}} for n in range(3)])
    backends: list[int] = []

    def handler(job):
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backends.append(cursor.fetchone()[0])

    Worker([Registration("pids", handler, concurrency=1, batch_size=1)], burst=True).run()
    assert states() == {"completed": 3}
    assert len(backends) == 3
    assert len(set(backends)) == connections_seen


def test_a_queue_claiming_ahead_keeps_to_its_concurrency_and_never_delays_another_queue():
    boss.create_queue("ahead")
    boss.create_queue("other")
    boss.insert("ahead", [{"data": {"n": n}} for n in range(10)])
    release = threading.Event()
    running, most_running = [0], [0]
    lock = threading.Lock()

    def slow(job):
        with lock:
            running[0] += 1
            most_running[0] = max(most_running[0], running[0])
        release.wait(30)
        with lock:
            running[0] -= 1

    worker = Worker(
        [
            Registration("ahead", slow, concurrency=2, batch_size=10, polling_interval_seconds=0.1),
            Registration(
                "other", lambda job: {"done": job.data}, concurrency=2, polling_interval_seconds=0.1
            ),
        ]
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: states().get("active") == 10)
        # Eight "ahead" jobs wait for its two threads; "other" runs on its own threads meanwhile.
        other = boss.send("other", {"n": 1})
        wait_for(lambda: job_row(other, "state") == ("completed",), timeout=10)
        assert most_running[0] == 2
    finally:
        release.set()
        wait_for(lambda: states().get("completed") == 11, timeout=30)
        worker.stop()
        thread.join(30)
    assert most_running[0] == 2


def test_claimed_jobs_go_back_at_shutdown_without_an_attempt_charged_even_on_their_last_attempt():
    # retry_limit=0: a shutdown charged as a failure would fail every one of them for good.
    boss.create_queue("ahead", retry_limit=0)
    ids = boss.insert("ahead", [{"data": {"n": n}} for n in range(5)], return_ids=True)
    entered, release = threading.Event(), threading.Event()
    ran = []

    def handler(job):
        ran.append(job.id)
        entered.set()
        release.wait(30)

    registration = Registration("ahead", handler, concurrency=1, batch_size=5, polling_interval_seconds=0.1)
    worker, thread = in_process(registration, grace_seconds=0.2)
    try:
        assert entered.wait(10)
        wait_for(lambda: states() == {"active": 5})
        worker.stop()
        thread.join(30)
    finally:
        release.set()
    assert not thread.is_alive()
    (running,) = ran
    assert worker.stats.requeued == 5 and worker.stats.failed == 0
    # The one cut short: back with the shutdown recorded and one more attempt granted.
    assert job_row(running, "state", "retry_limit", "retry_count") == ("retry", 1, 0)
    assert job_row(running, "output")[0]["name"] == "WorkerShutdown"
    # The four that never started: back as they were claimed, their next claim uncounted.
    waiting = [job_id for job_id in ids if job_id != running]
    for job_id in waiting:
        assert job_row(job_id, "state", "retry_limit", "started_on", "output") == ("retry", 0, None, None)
    fetched = {job.id: job.retry_count for job in boss.fetch("ahead", batch_size=5)}
    assert fetched == {**{job_id: 0 for job_id in waiting}, running: 1}
    # ... and their next attempt still counts: a failure now is for good.
    attempts = [{"id": job_id, "retry_count": fetched[job_id]} for job_id in waiting]
    assert boss.fail("ahead", attempts) == 4
    assert {job_row(job_id, "state")[0] for job_id in waiting} == {"failed"}


def test_a_handler_that_overruns_its_expiry_does_not_settle_the_newer_attempt():
    boss.create_queue("slow", retry_limit=3)
    job_id = boss.send("slow", {})
    entered, release = threading.Event(), threading.Event()

    def handler(job):
        entered.set()
        release.wait(30)
        return {"from": "stale"}

    worker, thread = in_process(Registration("slow", handler, polling_interval_seconds=0.1))
    try:
        assert entered.wait(10)
        worker.stop()  # no more fetching; the stale handler is still running
        move_back(job_id, "started_on", 3600)
        assert boss.supervise().expired == 1
        (newer,) = boss.fetch("slow")
        assert newer.retry_count == 1
    finally:
        release.set()
        thread.join(30)
    assert job_row(job_id, "state", "retry_count", "output") == (
        "active",
        1,
        {"value": {"message": "job timed out"}},
    )
    assert worker.stats.lost == 1
    assert boss.complete("slow", newer, {"from": "newer"}) == 1


def test_registered_handlers_come_from_each_apps_jobs_module():
    from django_pgboss.worker.registry import autodiscover

    autodiscover()
    assert {"echo", "slow", "flaky", "unstorable", "batched", "live"} <= set(registrations())
    assert registrations()["echo"].label == "tests.workapp.jobs.echo"


# -- the monitor command -----------------------------------------------------------------------


def test_monitor_once_fails_expired_jobs_for_retry():
    boss.create_queue("slow", expire_in_seconds=1, retry_limit=1)
    boss.send("slow", {})
    (job,) = boss.fetch("slow")
    move_back(job.id, "started_on", 60)
    result = run_monitor("--once")
    assert result.returncode == 0, result.stderr
    assert "1 expired and 0 stalled" in result.stdout
    assert job_row(job.id, "state") == ("retry",)


def test_monitor_runs_until_sigterm():
    boss.create_queue("slow", expire_in_seconds=1, retry_limit=1)
    # The job is active and expired before the monitor starts: a pass claims a queue once per
    # MONITOR_INTERVAL_SECONDS, so a first pass that counted the queue before the fetch would
    # leave the job to the next claim, a minute later.
    boss.send("slow", {})
    (job,) = boss.fetch("slow")
    move_back(job.id, "started_on", 60)
    monitor = start_monitor("--interval", "1")
    try:
        wait_for(lambda: job_row(job.id, "state") == ("retry",), timeout=20, interval=0.2)
    finally:
        monitor.send_signal(signal.SIGTERM)
        monitor.communicate(timeout=30)
    assert monitor.returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0.5"], "--interval must be at least 1 second"),
        (["--queue", "ghost", "--once"], "'ghost'"),
    ],
)
def test_monitor_bad_input(args, message):
    result = run_monitor(*args)
    assert result.returncode == 1
    assert message in result.stderr


def test_monitor_once_sends_due_cron_jobs():
    boss.create_queue("echo")
    boss.schedule("echo", "* * * * *", {"from": "cron"})
    result = run_monitor("--once")
    assert result.returncode == 0, result.stderr
    assert "1 job(s) sent" in result.stdout
    assert [j.data for j in boss.find_jobs("echo")] == [{"from": "cron"}]


def test_the_monitor_survives_a_database_restart():
    boss.create_queue("slow", expire_in_seconds=1, retry_limit=1)
    monitor = start_monitor("--interval", "1")
    try:
        wait_for(lambda: "monitor started" in _peek_stderr(monitor), timeout=30)
        connection.close()
        subprocess.run(["bash", str(REPO / "scripts" / "testdb.sh"), "stop"], check=True, capture_output=True)
        wait_for(lambda: "monitor pass failed" in _peek_stderr(monitor), timeout=30, interval=0.2)
        subprocess.run(
            ["bash", str(REPO / "scripts" / "testdb.sh"), "start"], check=True, capture_output=True
        )
        boss.send("slow", {})
        (job,) = boss.fetch("slow")
        move_back(job.id, "started_on", 60)
        wait_for(lambda: job_row(job.id, "state") == ("retry",), timeout=60, interval=0.5)
    finally:
        monitor.send_signal(signal.SIGTERM)
        monitor.communicate(timeout=30)
    assert monitor.returncode == 0
