"""The worker's remaining work/fetch options (issue 22 item 4): local_group_concurrency and
ignore_groups, heartbeat_refresh_seconds, and a heartbeat that finds its claim gone."""

from __future__ import annotations

import threading
import time

import pytest

from django_pgboss import boss
from django_pgboss.exceptions import InvalidOption
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.helpers import job_row, rows
from tests.processes import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _running(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


def test_fetch_passes_over_the_groups_it_is_told_to_ignore():
    boss.create_queue("grouped")
    boss.insert(
        "grouped",
        [
            {"data": {"n": 0}, "group_id": "a"},
            {"data": {"n": 1}, "group_id": "b"},
            {"data": {"n": 2}},
        ],
    )
    jobs = boss.fetch("grouped", batch_size=10, ignore_groups=["a"])
    assert sorted(job.data["n"] for job in jobs) == [1, 2]
    assert [job.data["n"] for job in boss.fetch("grouped", batch_size=10, ignore_groups=[])] == [0]
    with pytest.raises(InvalidOption, match="ignore_groups"):
        boss.fetch("grouped", ignore_groups="a")
    with pytest.raises(InvalidOption, match="ignore_groups"):
        boss.fetch("grouped", ignore_groups=["a\x00"])


def test_local_group_concurrency_runs_one_job_of_a_group_at_a_time_while_other_groups_run():
    boss.create_queue("grouped")
    lock = threading.Lock()
    running: dict[str, int] = {}
    most: dict[str, int] = {}

    def handler(job):
        group = job.group_id or "-"
        with lock:
            running[group] = running.get(group, 0) + 1
            most[group] = max(most.get(group, 0), running[group])
        time.sleep(0.3)
        with lock:
            running[group] -= 1

    ids = boss.insert(
        "grouped",
        [{"data": {"n": n}, "group_id": "a"} for n in range(4)]
        + [{"data": {"n": n}, "group_id": "b"} for n in range(4)],
        return_ids=True,
    )
    registration = Registration(
        "grouped",
        handler,
        concurrency=4,
        batch_size=8,
        local_group_concurrency=1,
        polling_interval_seconds=0.1,
    )
    worker = Worker([registration], burst=True)
    thread = _running(worker)
    thread.join(60)
    assert not thread.is_alive()
    assert all(job_row(i, "state") == ("completed",) for i in ids)
    # One of each group at a time, both groups at once.
    assert most == {"a": 1, "b": 1}
    # Jobs claimed past their group's limit went back unclaimed: no attempt was charged.
    assert rows("SELECT max(retry_count) FROM {s}.job") == [(0,)]


def test_heartbeat_refresh_seconds_sets_how_often_running_jobs_are_touched():
    boss.create_queue("beating", heartbeat_seconds=30)
    beats = []
    stop = threading.Event()

    def handler(job):
        while not stop.wait(0.05):
            (beat,) = rows("SELECT heartbeat_on FROM {s}.job WHERE id = %s", [job.id])[0]
            if beat is not None and beat not in beats:
                beats.append(beat)

    boss.send("beating", {})
    registration = Registration(
        "beating", handler, heartbeat_refresh_seconds=0.2, polling_interval_seconds=0.1
    )
    worker = Worker([registration])
    thread = _running(worker)
    try:
        # Every half of heartbeat_seconds would be one touch in 15 s; three come within seconds.
        wait_for(lambda: len(beats) >= 3, timeout=15)
    finally:
        stop.set()
        worker.stop()
        thread.join(30)


def test_a_heartbeat_that_finds_the_claim_gone_sets_the_jobs_signal():
    boss.create_queue("beating", heartbeat_seconds=10, retry_limit=3, retry_delay=60)
    started = threading.Event()
    reasons = []

    def handler(job):
        started.set()
        job.signal.wait(30)
        reasons.append((job.signal.reason, job.signal.message))

    job_id = boss.send("beating", {})
    registration = Registration("beating", handler, heartbeat_refresh_seconds=0.2, polling_interval_seconds=5)
    worker = Worker([registration])
    thread = _running(worker)
    try:
        assert started.wait(30)
        # Another party settles the attempt (an operator, the monitor): the claim is gone.
        assert boss.fail("beating", job_id, {"by": "someone else"}) == 1
        wait_for(lambda: reasons, timeout=10)
    finally:
        worker.stop()
        thread.join(30)
    ((reason, message),) = reasons
    assert reason == "claim_lost" and "claim was lost" in message
    assert job_row(job_id, "output")[0] == {"by": "someone else"}


@pytest.mark.parametrize("notify_interval", [None, 30.0])
def test_notify_polling_interval_seconds_is_how_often_a_notify_queue_polls_while_notifications_arrive(
    notify_interval,
):
    # A job deferred at its send sends no notification (only runnable jobs do), so polling alone
    # finds it once it is due: within polling_interval_seconds by default, not for 30 s with the
    # option set while the LISTEN connection is up.
    boss.create_queue("quiet", notify=True)
    registration = Registration(
        "quiet",
        lambda job: None,
        polling_interval_seconds=0.2,
        notify_polling_interval_seconds=notify_interval,
    )
    worker = Worker([registration])
    thread = _running(worker)
    try:
        wait_for(lambda: worker._listener is not None and worker._listener.connected.is_set(), timeout=15)
        time.sleep(0.5)  # the first fetch (at start) has come back empty and the loop waits
        job_id = boss.send("quiet", {}, start_after=1)
        time.sleep(3)
        state = job_row(job_id, "state")[0]
    finally:
        worker.stop()
        thread.join(30)
    assert state == ("completed" if notify_interval is None else "created")
