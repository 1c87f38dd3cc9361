"""What a handler result, a handler's way of ending, or a database refusal must not do to a worker:
stop its completions, kill its threads, or stall its queue (issue 13, items 1 and 2)."""

from __future__ import annotations

import logging
import re
import signal
import threading
import time

import pytest

from django_pgboss import boss
from django_pgboss.worker import Worker
from django_pgboss.worker.handlers import HandlerPool
from django_pgboss.worker.registry import Registration
from tests.helpers import job_row, rows
from tests.processes import run_worker, start_worker, wait_for
from tests.test_worker import states

pytestmark = pytest.mark.django_db(transaction=True)

#: What a job whose output could not be stored says, whichever layer found out.
UNSTORABLE = re.compile(r"cannot be stored|could not be stored")


def outputs_by_n(name: str) -> dict[int, tuple[str, dict | None]]:
    import json

    return {
        int(n): (state, json.loads(output) if output else None)
        for n, state, output in rows(
            "SELECT data->>'n', state::text, output FROM {s}.job WHERE name = %s", [name]
        )
    }


def test_an_output_with_a_nul_or_a_lone_surrogate_fails_only_its_own_job():
    """A worker process: the database refuses two outputs; every other job still completes."""
    boss.create_queue("refused", retry_limit=0)
    data = [{"n": n} for n in range(60)]
    data[7]["bad"] = "nul"
    data[23]["bad"] = "surrogate"
    boss.insert("refused", [{"data": d} for d in data])
    # Before the fix the settler retried the refused batch for ever: the burst never ended.
    result = run_worker("--queue", "refused", "--burst", timeout=90)
    assert result.returncode == 0, result.stderr
    assert "58 completed, 2 failed" in result.stdout, result.stdout
    outcomes = outputs_by_n("refused")
    for n, (state, output) in outcomes.items():
        if n in (7, 23):
            assert state == "failed"
            assert UNSTORABLE.search(output["message"]), output
        else:
            assert (state, output) == ("completed", {"n": n})


@pytest.fixture
def refusing_trigger():
    """A site rule in the database that refuses any completion whose output holds "refuse_me"."""
    rows(
        """CREATE FUNCTION {s}.test_refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.output ? 'refuse_me' THEN
            RAISE EXCEPTION 'refused by a site rule' USING ERRCODE = 'check_violation';
          END IF;
          RETURN NEW;
        END $$"""
    )
    rows(
        "CREATE TRIGGER test_refuse_marked BEFORE UPDATE ON {s}.job_common "
        "FOR EACH ROW EXECUTE FUNCTION {s}.test_refuse_marked()"
    )
    yield
    rows("DROP TRIGGER test_refuse_marked ON {s}.job_common")
    rows("DROP FUNCTION {s}.test_refuse_marked()")


def test_any_completion_the_database_refuses_is_isolated_to_its_own_job(refusing_trigger, caplog):
    boss.create_queue("sited", retry_limit=0)
    bad = {5, 41, 42, 97}
    boss.insert("sited", [{"data": {"n": n}} for n in range(120)])
    entered = threading.Barrier(4, timeout=30)

    def handler(job):
        if job.data["n"] < 4:
            # The first four meet, so that their results (one of them refused) share a flush.
            entered.wait()
        return {"refuse_me": True} if job.data["n"] in bad else {"n": job.data["n"]}

    registration = Registration("sited", handler, concurrency=4, batch_size=20, polling_interval_seconds=0.1)
    worker = Worker([registration], burst=True)
    with caplog.at_level(logging.WARNING, logger="django_pgboss.worker"):
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        thread.join(60)
    assert not thread.is_alive(), "the worker never drained the queue"
    assert (worker.stats.completed, worker.stats.failed) == (116, 4)
    for n, (state, output) in outputs_by_n("sited").items():
        if n in bad:
            assert state == "failed"
            assert "could not be stored" in output["message"]
            assert "refused by a site rule" in output["message"]
        else:
            assert (state, output) == ("completed", {"n": n})
    assert "refused by a site rule" in caplog.text


def test_a_handler_that_exits_interrupts_or_returns_a_deep_structure_fails_its_job_and_keeps_its_thread():
    """One handler thread: SystemExit, KeyboardInterrupt or a RecursionError must not take it away."""
    boss.create_queue("rude", retry_limit=0)
    kinds = ["exit", "interrupt", "deep", "nul-error"]
    bad = {kind: boss.send("rude", {"kind": kind}) for kind in kinds}
    good = boss.insert("rude", [{"data": {"n": n}} for n in range(5)], return_ids=True)
    started = time.monotonic()
    result = run_worker("--queue", "rude", "--burst", timeout=90)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60
    assert "5 completed, 4 failed" in result.stdout, result.stdout + result.stderr
    for job_id in good:
        assert job_row(job_id, "state") == ("completed",)
    for kind, name in (("exit", "SystemExit"), ("interrupt", "KeyboardInterrupt")):
        state, output = job_row(bad[kind], "state", "output")
        assert (state, output["name"]) == ("failed", name)
        assert f"{name}" in output["traceback"] and "Traceback" in output["traceback"]
    state, output = job_row(bad["deep"], "state", "output")
    assert state == "failed"
    assert UNSTORABLE.search(output["message"]), output
    # The message of an exception holding a NUL survives, with the NUL spelled out.
    state, output = job_row(bad["nul-error"], "state", "output")
    assert (state, output["name"], output["message"]) == ("failed", "ValueError", "bad\\u0000thing")
    assert "Traceback" in output["traceback"]


def test_a_handler_thread_that_dies_anyway_is_replaced_and_a_stop_does_not_wait_for_it(monkeypatch, caplog):
    boss.create_queue("mortal", retry_limit=1)
    first = boss.send("mortal", {"n": 0})
    original = HandlerPool._run_unit
    died = []

    def dying(self, state, unit):
        if not died:
            died.append(unit.jobs[0].id)
            # Raised outside the handler's own guard, as a bug in the loop itself would be.
            raise SystemExit("the loop itself broke")
        return original(self, state, unit)

    monkeypatch.setattr(HandlerPool, "_run_unit", dying)
    registration = Registration("mortal", lambda job: {"n": job.data["n"]}, polling_interval_seconds=0.1)
    worker = Worker([registration], grace_seconds=30)
    with caplog.at_level(logging.WARNING, logger="django_pgboss.worker"):
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            wait_for(lambda: died, timeout=10)
            # The job the dead thread held is failed, so it is retried; the replacement runs it.
            wait_for(lambda: job_row(first, "state") == ("completed",), timeout=15)
            later = boss.send("mortal", {"n": 1})
            wait_for(lambda: job_row(later, "state") == ("completed",), timeout=10)
        finally:
            stopped_at = time.monotonic()
            worker.stop()
            thread.join(40)
    assert not thread.is_alive()
    assert time.monotonic() - stopped_at < 5, "the stop waited for a dead thread's job"
    assert job_row(first, "retry_count") == (1,)
    assert "handler thread" in caplog.text and "replaced" in caplog.text
    assert states() == {"completed": 2}


# -- rolling restarts (issue 13 item 6) ------------------------------------------------------------


def test_a_rolling_deploy_with_a_short_grace_completes_every_job_and_charges_only_attempts_that_ran(tmp_path):
    """Jobs held until the test lets them end, a one-second grace, four restarts, each new worker
    started before the old one stops: every restart cuts the old worker's running jobs short,
    every job ends completed once released, and a job's retry_count counts only its runs.

    Nothing here waits on a guess of how long a step takes under load: a restart happens once the
    old worker is seen running a job, which the hold keeps running until after the stop.
    """
    from tests.test_worker import _peek_stderr, marker_lines

    marker, gate = tmp_path / "marker", tmp_path / "hold"
    gate.touch()
    boss.create_queue("slow-dead")
    # Four restarts can cut one job four times: a fifth attempt must still be allowed, so that only
    # a wrong charge (an attempt counted that never ran) can send a job to the dead letter.
    boss.create_queue("slow", retry_limit=4, dead_letter="slow-dead")
    ids = boss.insert(
        "slow", [{"data": {"hold": str(gate), "marker": str(marker)}} for _ in range(12)], return_ids=True
    )
    args = ("--queue", "slow", "--batch-size", "4", "--grace-seconds", "1")

    def running_in(worker) -> bool:
        """A job started in ``worker`` that has not ended there."""
        pid = str(worker.pid)
        started = {line[1] for line in marker_lines(marker, "start") if line[2] == pid}
        ended = {line[1] for line in marker_lines(marker, "end") if line[2] == pid}
        return bool(started - ended)

    current = start_worker(*args)
    cut = 0
    try:
        for _ in range(4):
            wait_for(lambda w=current: running_in(w), timeout=120, interval=0.1)
            replacement = start_worker(*args)
            wait_for(lambda w=replacement: "worker started" in _peek_stderr(w), timeout=120)
            current.send_signal(signal.SIGTERM)
            _, stderr = current.communicate(timeout=60)
            assert current.returncode == 0, stderr
            cut += 1
            current = replacement
        gate.unlink()  # every held job may end now
        wait_for(lambda: states() == {"completed": 12}, timeout=120, interval=0.2)
    finally:
        gate.unlink(missing_ok=True)
        current.send_signal(signal.SIGTERM)
        current.communicate(timeout=60)
    assert cut == 4
    assert boss.find_jobs("slow-dead") == []
    starts: dict[str, int] = {}
    for line in marker_lines(marker, "start"):
        starts[line[1]] = starts.get(line[1], 0) + 1
    # Each restart stopped a worker while it ran a held job: at least four runs were cut short.
    assert sum(starts.values()) >= 12 + 4, starts
    for job_id in ids:
        (retry_count,) = job_row(job_id, "retry_count")
        assert retry_count == starts[job_id] - 1, (job_id, retry_count, starts[job_id])


# -- the database away (issue 13 item 11) ----------------------------------------------------------


def _testdb(action: str) -> None:
    import subprocess

    from django.db import connection

    from tests.processes import REPO

    connection.close()
    subprocess.run(["bash", str(REPO / "scripts" / "testdb.sh"), action], check=True, capture_output=True)


def test_a_worker_started_without_a_database_says_so_once_and_stops_cleanly_on_sigterm():
    from tests.processes import start_worker
    from tests.test_worker import _peek_stderr, _stderr_seen

    worker = start_worker("--queue", "echo", DATABASE_URL="postgres://postgres@127.0.0.1:1/nowhere")
    try:
        wait_for(lambda: "the database is not answering" in _peek_stderr(worker), timeout=30)
        time.sleep(3)  # several retries, which must not log a line each
    finally:
        worker.send_signal(signal.SIGTERM)
        stdout, stderr = worker.communicate(timeout=30)
    stderr = _stderr_seen.get(worker.pid, "") + stderr
    assert worker.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert stderr.count("the database is not answering") == 1, stderr
    assert "stopped before the database answered" in stdout


def test_a_worker_waits_for_its_database_and_resumes_promptly_after_a_long_outage():
    from tests.processes import start_worker
    from tests.test_worker import _peek_stderr, _stderr_seen

    boss.create_queue("echo")
    _testdb("stop")
    worker = start_worker("--queue", "echo")
    try:
        wait_for(lambda: "the database is not answering" in _peek_stderr(worker), timeout=30)
        _testdb("start")
        first = boss.send("echo", {"n": 1})
        wait_for(lambda: job_row(first, "state") == ("completed",), timeout=15, interval=0.1)
        # Twelve seconds down: a back-off that kept growing would be asleep for up to 10 s more.
        _testdb("stop")
        time.sleep(12)
        _testdb("start")
        back = time.monotonic()
        second = boss.send("echo", {"n": 2})
        wait_for(lambda: job_row(second, "state") == ("completed",), timeout=30, interval=0.1)
        resumed = time.monotonic() - back
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    stderr = _stderr_seen.get(worker.pid, "") + stderr
    assert worker.returncode == 0, stderr
    assert "Traceback" not in stderr
    print(f"job completed {resumed:.2f}s after the database came back")
    assert resumed < 3.5, f"jobs resumed {resumed:.1f}s after the database came back"
