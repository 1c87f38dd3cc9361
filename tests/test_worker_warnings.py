"""The worker's warnings, as pg-boss 12.38 raises and stores them: handler_overrun (a handler still
running past its job's deadline) and start_retry (a start the database did not answer)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection
from django.dispatch import receiver

from django_pgboss import boss, signals
from django_pgboss.worker import Worker
from django_pgboss.worker.overruns import HandlerOverruns
from django_pgboss.worker.registry import Registration
from tests.processes import REPO, worker_env

pytestmark = pytest.mark.django_db(transaction=True)

ISO = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


@pytest.fixture
def persisted(settings):
    settings.PGBOSS = {**(getattr(settings, "PGBOSS", None) or {}), "PERSIST_WARNINGS": True}


@pytest.fixture
def raised():
    seen: list[dict] = []

    @receiver(signals.warning_raised, weak=False)
    def collect(sender, type, message, data, **kwargs):
        seen.append({"sender": sender, "type": type, "message": message, "data": data})

    yield seen
    signals.warning_raised.disconnect(collect)


def stored_warnings(kind: str) -> list[tuple[str, dict]]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT message, data FROM {boss.context.quoted_schema}.warning WHERE type = %s ORDER BY created_on",
            [kind],
        )
        return [(message, json.loads(data) if isinstance(data, str) else data) for message, data in cursor]


def overrunning_handler(job):
    # Runs past the deadline, then returns once its signal says the attempt was failed.
    job.signal.wait(10)
    time.sleep(0.2)


def run_overrunning(queue: str, jobs: int) -> Worker:
    boss.create_queue(queue, expire_in_seconds=1, retry_limit=0)
    ids = [boss.send(queue, {"n": n}) for n in range(jobs)]
    worker = Worker(
        [Registration(queue, overrunning_handler, concurrency=jobs, polling_interval_seconds=0.1)], burst=True
    )
    worker.run()
    assert {job.state for job in boss.find_jobs(queue)} == {"failed"}
    assert len(ids) == jobs
    return worker


def test_each_overrun_is_raised_with_pg_boss_s_event_data(raised):
    worker = run_overrunning("slow", 1)
    (job,) = boss.find_jobs("slow")
    (warning,) = [w for w in raised if w["type"] == "handler_overrun"]
    assert warning["sender"] is Worker
    assert warning["data"] == {
        "type": "handler_overrun",
        "instance": worker._instance.id,
        "queue": "slow",
        "jobs": [job.id],
        "expireInSeconds": 1,
    }
    assert "a handler on queue slow is still running after exceeding 1s" in warning["message"]
    # PERSIST_WARNINGS is off: nothing is stored.
    assert stored_warnings("handler_overrun") == []


def test_overruns_are_stored_per_queue_window_the_first_at_once_the_rest_counted_at_the_stop(
    raised, persisted
):
    worker = run_overrunning("slow", 3)
    ids = {job.id for job in boss.find_jobs("slow")}
    # Three overruns raised, one event each.
    assert len([w for w in raised if w["type"] == "handler_overrun"]) == 3
    (first_message, first), (tally_message, tally) = stored_warnings("handler_overrun")
    assert first["count"] == 1 and first["since"] == first["until"]
    assert "a handler on queue slow is still running" in first_message
    assert tally["count"] == 2
    assert tally_message.startswith("2 handlers on queue slow kept running")
    for data in (first, tally):
        assert set(data) == {
            "type",
            "instance",
            "queue",
            "count",
            "since",
            "until",
            "expireInSeconds",
            "jobs",
        }
        assert (data["type"], data["instance"], data["queue"], data["expireInSeconds"]) == (
            "handler_overrun",
            worker._instance.id,
            "slow",
            1,
        )
        assert data["since"] <= data["until"]
        for moment in (data["since"], data["until"]):
            assert re.match(ISO, moment), moment
    assert set(first["jobs"]) | set(tally["jobs"]) == ids and len(tally["jobs"]) == 2


def test_a_window_s_end_writes_its_count_and_a_quiet_window_closes_the_tally(persisted):
    overruns = HandlerOverruns(
        boss.context, instance_id=lambda: "instance-1", sender=None, window_seconds=0.5
    )
    try:
        overruns.overrun("q", ["a"], 5)
        overruns.overrun("q", [f"j{n}" for n in range(12)], 7)
        time.sleep(0.4)
        assert [data["count"] for _message, data in stored_warnings("handler_overrun")] == [1]
        # The window ends: one row counting the second overrun, its ten newest sample jobs.
        deadline = time.monotonic() + 5
        while len(stored_warnings("handler_overrun")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        _, tally = stored_warnings("handler_overrun")[1]
        assert (tally["count"], tally["expireInSeconds"]) == (1, 7)
        assert tally["jobs"] == [f"j{n}" for n in range(2, 12)]
        # The next window counted nothing, so it closes; the next overrun is written at once.
        time.sleep(1.2)
        overruns.overrun("q", ["b"], 5)
        while len(stored_warnings("handler_overrun")) < 3 and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        assert [(data["count"], data["jobs"]) for _m, data in stored_warnings("handler_overrun")][2] == (
            1,
            ["b"],
        )
    finally:
        overruns.stop()
    assert len(stored_warnings("handler_overrun")) == 3


def _without_a_database(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + script],
        cwd=REPO,
        env=worker_env(DATABASE_URL="postgres://postgres@127.0.0.1:1/nowhere"),
        capture_output=True,
        text=True,
        timeout=60,
    )


_COLLECT = (
    "import json\n"
    "from django_pgboss import signals\n"
    "seen = []\n"
    "def collect(sender, type, data, **kwargs):\n"
    "    seen.append({'sender': sender.__name__, 'type': type, 'data': data})\n"
    "    target[0].stop()\n"
    "signals.warning_raised.connect(collect, weak=False)\n"
    "target = []\n"
)


def test_a_worker_whose_database_does_not_answer_raises_start_retry_once():
    result = _without_a_database(
        _COLLECT + "from django_pgboss.worker.registry import Registration\n"
        "from django_pgboss.worker import Worker\n"
        "worker = Worker([Registration('q', lambda job: None)])\n"
        "target.append(worker)\n"
        "worker.run()\n"
        "print(json.dumps(seen))\n"
    )
    assert result.returncode == 0, result.stderr
    (warning,) = json.loads(result.stdout.strip().splitlines()[-1])
    assert warning["sender"] == "Worker" and warning["type"] == "start_retry"
    assert set(warning["data"]) == {"type", "attempts", "error"}
    assert warning["data"]["type"] == "start_retry" and warning["data"]["attempts"] is None
    assert "127.0.0.1" in warning["data"]["error"] or "connect" in warning["data"]["error"]


def test_a_monitor_whose_first_pass_fails_raises_start_retry_once():
    result = _without_a_database(
        _COLLECT + "import threading\n"
        "from django_pgboss.monitor import Monitor\n"
        "monitor = Monitor(cron=False)\n"
        "target.append(monitor)\n"
        "monitor.run()\n"
        "print(json.dumps([w for w in seen if w['type'] == 'start_retry']))\n"
    )
    assert result.returncode == 0, result.stderr
    (warning,) = json.loads(result.stdout.strip().splitlines()[-1])
    assert warning["sender"] == "Monitor"
    assert warning["data"]["attempts"] is None and warning["data"]["error"]


def test_a_stopped_worker_raises_no_more_overruns(raised):
    overruns = HandlerOverruns(boss.context, instance_id=lambda: "i", sender=None)
    overruns.stop()
    overruns.overrun("q", ["a"], 1)
    time.sleep(0.2)
    assert not raised and not [t for t in threading.enumerate() if t.name == "pgboss-warnings"]
