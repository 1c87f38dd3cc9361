"""The monitor pass: gauges, the 12.35 throughput window, snapshots, true-up, retention, backoff.

Deterministic without sleeping: the tests that depend on time passing run on a TestClock
(django_pgboss.testing), which drives job_now(), the only clock pg-boss's SQL reads, so a job's
stamps, the claim intervals and the throughput window all move with clock.advance(). A monitor
pass claims a queue once MONITOR_INTERVAL_SECONDS (60) have passed since its last claim.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import queue_claims_skip_locked
from django_pgboss.monitor.supervisor import PassReport, _apply_backoff
from tests.conftest import CLUSTER_LOCK_WAITS
from tests.helpers import job_row, pgboss_settings_with, rows, stats_partitions

pytestmark = [pytest.mark.django_db, pytest.mark.queue(retry_limit=0)]


def now() -> dt.datetime:
    return rows("SELECT now()")[0][0]


def queue_row(name: str, *columns: str) -> tuple:
    (row,) = rows(f"SELECT {', '.join(columns)} FROM {{s}}.queue WHERE name = %s", [name])
    return row


def snapshots(name: str) -> list[tuple]:
    return rows(
        "SELECT created_delta, completed_delta, failed_delta, delta_seconds, delta_on, queued_count "
        "FROM {s}.queue_stats WHERE name = %s ORDER BY delta_on, captured_on",
        [name],
    )


def test_first_pass_writes_gauges_and_starts_the_window(queue):
    boss.send(queue, {"n": 1})
    boss.send(queue, {"n": 2})
    boss.send(queue, {"n": 3}, start_after=3600)
    boss.fetch(queue)
    report = boss.supervise()
    assert report.counted == [queue]
    deferred, queued, ready, active_count, total, history = queue_row(
        queue, "deferred_count", "queued_count", "ready_count", "active_count", "total_count", "ready_history"
    )
    assert (deferred, queued, ready, active_count, total, history) == (1, 2, 1, 1, 3, [1])
    created, completed, failed, seconds, delta_on = queue_row(
        queue, "created_delta", "completed_delta", "failed_delta", "delta_seconds", "delta_on"
    )
    # A first count has no window behind it: nothing counted, seconds null, the window starts.
    assert (created, completed, failed, seconds) == (0, 0, 0, None)
    assert delta_on == now() - dt.timedelta(seconds=10)
    assert snapshots(queue) == [(0, 0, 0, None, delta_on, 2)]
    info = boss.get_queue(queue)
    assert (info.queued_count, info.active_count, info.delta_on) == (2, 1, delta_on)


def test_deltas_count_what_happened_in_the_window_and_nothing_twice(queue, clock):
    start = clock.now()
    boss.supervise()  # the first pass starts the window at start - 10 s (the lag)
    clock.advance(seconds=20)
    for n in range(5):
        boss.send(queue, {"n": n})
    clock.advance(seconds=10)
    done, broken = boss.fetch(queue, batch_size=2)
    boss.complete(queue, done)
    boss.fail(queue, broken)
    clock.advance(seconds=25)
    boss.send(queue, {"n": "late"})  # at start + 55: inside the lag of the next pass
    clock.advance(seconds=5)
    assert boss.supervise().counted == [queue]  # counts [start - 10, start + 50)
    assert queue_row(
        queue, "created_delta", "completed_delta", "failed_delta", "delta_seconds", "delta_on"
    ) == (
        5,
        1,
        1,
        60,
        start + dt.timedelta(seconds=50),
    )
    # The next pass starts where this one ended: the late job is counted there, once.
    clock.advance(seconds=60)
    boss.supervise()
    assert queue_row(queue, "created_delta", "completed_delta", "failed_delta", "delta_seconds") == (
        1,
        0,
        0,
        60,
    )
    clock.advance(seconds=60)
    boss.supervise()
    assert queue_row(queue, "created_delta", "completed_delta", "failed_delta", "delta_seconds") == (
        0,
        0,
        0,
        60,
    )
    assert [s[:4] for s in snapshots(queue)] == [(0, 0, 0, None), (5, 1, 1, 60), (1, 0, 0, 60), (0, 0, 0, 60)]


def test_a_window_older_than_the_reset_maximum_starts_afresh(queue, clock):
    boss.supervise()
    clock.advance(hours=1)
    boss.send(queue)
    clock.advance(hours=2)  # the window would now span 3 hours: over the 2-hour maximum
    boss.supervise()
    assert queue_row(queue, "created_delta", "delta_seconds", "delta_on") == (
        0,
        None,
        clock.now() - dt.timedelta(seconds=10),
    )


def test_a_pass_that_does_not_count_leaves_the_window_open(queue, clock):
    start = clock.now()
    boss.supervise()
    clock.advance(seconds=30)
    boss.send(queue)
    clock.advance(seconds=30)
    with pgboss_settings_with(PERSIST_QUEUE_STATS=False):
        boss.supervise()
    # The gauges were refreshed, the window was not moved.
    assert queue_row(queue, "queued_count", "delta_on") == (1, start - dt.timedelta(seconds=10))
    clock.advance(seconds=60)
    boss.supervise()
    assert queue_row(queue, "created_delta", "delta_seconds") == (1, 120)


def test_queues_not_due_are_not_counted(queue):
    boss.supervise()
    boss.send(queue)
    assert boss.supervise().counted == []
    assert queue_row(queue, "queued_count") == (0,)


def test_backoff_defers_the_aggregate_but_not_expiry(queue, clock):
    boss.update_queue(queue, expire_in_seconds=30)
    boss.send(queue)
    (job,) = boss.fetch(queue)
    rows("UPDATE {s}.version SET monitor_backoff_on = {s}.job_now() + interval '10 minutes'")
    clock.advance(seconds=29)
    assert boss.supervise().expired == 0
    clock.advance(seconds=60)  # the next pass: a queue is claimed once a monitor interval
    report = boss.supervise()
    assert report.counted == []
    assert report.expired == 1
    assert job_row(job.id, "state") == ("failed",)


def test_a_backed_off_pass_leaves_the_window_for_the_next_counting_pass(queue, clock):
    start = clock.now()
    boss.supervise()
    clock.advance(seconds=30)
    boss.send(queue)
    rows("UPDATE {s}.version SET monitor_backoff_on = {s}.job_now() + interval '80 seconds'")
    clock.advance(seconds=30)
    assert boss.supervise().counted == []
    assert queue_row(queue, "delta_on") == (start - dt.timedelta(seconds=10),)
    clock.advance(seconds=60)  # the backoff is over
    assert boss.supervise().counted == [queue]
    assert queue_row(queue, "created_delta", "delta_seconds") == (1, 120)


def test_an_expired_job_with_attempts_left_is_retried(clock):
    boss.create_queue("expiring", expire_in_seconds=30, retry_limit=1)
    boss.send("expiring")
    (job,) = boss.fetch("expiring")
    clock.advance(seconds=31)
    assert boss.supervise().expired == 1
    assert job_row(job.id, "state", "output") == ("retry", {"value": {"message": "job timed out"}})
    (again,) = boss.fetch("expiring")
    assert (again.id, again.retry_count) == (job.id, 1)


def test_a_stopped_heartbeat_fails_the_job_before_its_expiry(clock):
    boss.create_queue("beating", heartbeat_seconds=10, retry_limit=0)
    boss.send("beating")
    (job,) = boss.fetch("beating")
    clock.advance(seconds=8)
    assert boss.touch("beating", job) == 1
    clock.advance(seconds=8)  # 16 s after the claim, 8 s after the last beat: alive
    assert boss.supervise().stalled == 0
    clock.advance(seconds=60)  # the next pass, long before the 15-minute expiry
    report = boss.supervise()
    assert (report.stalled, report.expired) == (1, 0)
    assert job_row(job.id, "state") == ("failed",)


def test_a_long_aggregate_engages_the_vacuum_backoff_which_only_moves_later():
    report = PassReport(stats_seconds=7.5)
    _apply_backoff(boss.context, report)
    # autovacuum_naptime is 60 s: 7.5 s of pinning is over the 6 s budget, so 2 naptimes.
    assert report.backoff_seconds == pytest.approx(120)
    assert report.warnings == ["monitor_backoff"]
    (until,) = rows("SELECT monitor_backoff_on FROM {s}.version")[0]
    _apply_backoff(boss.context, PassReport(stats_seconds=6.5))
    assert rows("SELECT monitor_backoff_on FROM {s}.version")[0][0] == until
    quiet = PassReport(stats_seconds=5)
    _apply_backoff(boss.context, quiet)
    assert quiet.backoff_seconds is None


@pytest.mark.django_db(transaction=True)
def test_true_up_raises_a_snapshot_for_a_late_commit(clock):
    import threading

    from django.db import connections, transaction

    boss.create_queue("q", retry_limit=0)
    boss.supervise()  # snapshot 1 starts the window and anchors the true-up
    clock.advance(seconds=20)
    counted = [boss.send("q", {"n": n}) for n in range(2)]
    # Another connection sends a job at the same moment and holds its transaction open.
    sent, release = threading.Event(), threading.Event()

    def late_sender() -> None:
        try:
            with transaction.atomic():
                boss.send("q", {"n": "late"})
                sent.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=late_sender)
    thread.start()
    try:
        assert sent.wait(10)
        clock.advance(seconds=40)
        boss.supervise()  # snapshot 2 counts its window: the late job is not visible yet
        assert [s[0] for s in snapshots("q")] == [0, 2]
    finally:
        release.set()
        thread.join(30)
    # It commits now, stamped inside snapshot 2's window, long past the lag.
    clock.advance(seconds=60)
    report = boss.supervise()
    assert report.trued_up == 1
    assert [s[0] for s in snapshots("q")] == [0, 3, 0]
    # Never down: a deleted job does not lower the snapshot, and nothing is raised twice.
    boss.delete_job("q", counted)
    clock.advance(seconds=60)
    assert boss.supervise().trued_up == 0
    assert [s[0] for s in snapshots("q")] == [0, 3, 0, 0]


def test_retention_deletes_old_finished_and_expired_waiting_jobs(queue, clock):
    boss.update_queue(queue, delete_after_seconds=60)
    old_done = boss.send(queue)
    boss.complete(queue, boss.fetch(queue))
    stale_waiting = boss.send(queue, retention_seconds=60)  # never fetched, kept 60 s
    clock.advance(seconds=30)
    keep_done = boss.send(queue, priority=1)  # fetched ahead of stale_waiting
    boss.complete(queue, boss.fetch(queue))
    clock.advance(seconds=31)  # old_done finished 61 s ago, keep_done 31 s ago
    waiting = boss.send(queue, retention_seconds=7 * 86400)
    report = boss.supervise()
    assert report.maintained == [queue]
    assert report.deleted == 2
    assert {j.id for j in boss.find_jobs(queue)} == {keep_done, waiting}
    assert old_done not in {j.id for j in boss.find_jobs(queue)}
    # Retention runs once per maintenance interval (a day by default).
    clock.advance(hours=1)
    assert boss.supervise().maintained == []
    clock.advance(hours=23)
    report = boss.supervise()
    assert (report.maintained, report.deleted) == ([queue], 1)
    assert {j.id for j in boss.find_jobs(queue)} == {waiting}
    assert stale_waiting not in {j.id for j in boss.find_jobs(queue)}


def test_stats_partitions_are_kept_ahead_and_dropped_after_retention():
    old = (now() - dt.timedelta(days=9)).strftime("%Y%m%d")
    start = (now() - dt.timedelta(days=9)).strftime("%Y-%m-%d")
    end = (now() - dt.timedelta(days=8)).strftime("%Y-%m-%d")
    rows(
        f"CREATE TABLE {{s}}.queue_stats_{old} PARTITION OF {{s}}.queue_stats FOR VALUES FROM ('{start}') TO ('{end}')"
    )
    boss.supervise()
    partitions = stats_partitions()
    today = now().astimezone(dt.UTC).date()
    assert partitions == {f"queue_stats_{today:%Y%m%d}", f"queue_stats_{today + dt.timedelta(days=1):%Y%m%d}"}


def test_backlog_warning_is_logged_and_persisted_when_enabled(queue, caplog):
    boss.update_queue(queue, warning_queue_size=2)
    boss.insert(queue, [{"data": n} for n in range(3)])
    with pgboss_settings_with(PERSIST_WARNINGS=True):
        report = boss.supervise()
    assert report.warnings == ["queue_backlog"]
    assert 'queue "q" has 3 jobs' in caplog.text
    ((kind, message),) = rows("SELECT type, message FROM {s}.warning")
    assert kind == "queue_backlog"
    assert "over its warning threshold of 2" in message


# -- the bucketed history -----------------------------------------------------------------------


@pytest.fixture
def base():
    """A minute boundary early in today's (UTC) queue_stats partition, for crafted snapshots."""
    today = now().astimezone(dt.UTC).replace(hour=1, minute=0, second=0, microsecond=0)
    return today


def snapshot(
    name: str, base: dt.datetime, captured: int, delta_on: int, created: int, queued: int = 0
) -> None:
    rows(
        "INSERT INTO {s}.queue_stats (name, queued_count, created_delta, completed_delta, failed_delta, "
        "delta_seconds, delta_on, captured_on) VALUES (%s, %s, %s, 0, 0, 60, %s, %s)",
        [name, queued, created, base + dt.timedelta(seconds=delta_on), base + dt.timedelta(seconds=captured)],
    )


def points(name: str, **options) -> list[tuple]:
    return [
        (p.captured_on, p.queued_count, p.created_delta, p.delta_seconds)
        for p in boss.get_queue_stats(name, **options)
    ]


def test_buckets_gauges_by_capture_and_counters_by_window_end(queue, base):
    snapshot(queue, base, captured=5, delta_on=-5, created=1, queued=1)
    snapshot(queue, base, captured=65, delta_on=55, created=10, queued=2)
    snapshot(queue, base, captured=125, delta_on=115, created=100, queued=3)
    minute = dt.timedelta(minutes=1)
    assert points(queue, bucket_seconds=60) == [
        (base + 2 * minute, 3, None, None),  # the newest bucket: its interval is not counted yet
        (base + minute, 2, 100, 60),
        (base, 1, 11, 120),  # the counter before any capture is folded into the first bucket
    ]
    # start bounds both sides: the counter ending before it is left out.
    assert points(queue, bucket_seconds=60, start=base)[-1] == (base, 1, 10, 60)


def test_counter_buckets_without_a_capture_fold_into_the_nearest_earlier_bucket(queue, base):
    snapshot(queue, base, captured=5, delta_on=-55, created=0, queued=1)
    snapshot(queue, base, captured=185, delta_on=175, created=100, queued=4)
    rows(
        "INSERT INTO {s}.queue_stats (name, created_delta, completed_delta, failed_delta, delta_seconds, delta_on, "
        "captured_on) VALUES (%s, 1, 0, 0, 60, %s, %s), (%s, 10, 0, 0, 60, %s, %s)",
        [
            queue,
            base + dt.timedelta(seconds=55),
            base + dt.timedelta(seconds=-3600),
            queue,
            base + dt.timedelta(seconds=115),
            base + dt.timedelta(seconds=-3600),
        ],
    )
    history = points(queue, bucket_seconds=60, start=base)
    assert history == [(base + dt.timedelta(minutes=3), 4, None, None), (base, 1, 111, 180)]


def test_auto_buckets_and_gauge_aggregates(queue, base):
    for captured, queued in ((5, 10), (30, 20), (65, 5), (125, 7)):
        snapshot(queue, base, captured=captured, delta_on=captured - 10, created=1, queued=queued)
    # Two points over a 120 s extent: 60 s buckets, the newest two.
    assert [p[1] for p in points(queue, max_data_points=2)] == [7, 5]
    assert points(queue, bucket_seconds=60, aggregate="min")[-1][1] == 10
    assert points(queue, bucket_seconds=60, aggregate="avg")[-1][1] == 15
    assert points(queue, bucket_seconds=60, aggregate="max")[-1][1] == 20
    # Raw snapshots, newest first, bounded by limit.
    assert [p[1] for p in points(queue, limit=3)] == [7, 5, 20]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bucket_seconds": 0}, "bucket_seconds"),
        ({"max_data_points": -1}, "max_data_points"),
        ({"bucket_seconds": 60, "aggregate": "sum"}, "aggregate"),
        ({"limit": 0}, "limit"),
        ({"limit": 100_001}, "limit"),
        ({"start": "yesterday"}, "start"),
    ],
)
def test_bad_history_options(queue, options, message):
    from django_pgboss import InvalidOption

    with pytest.raises(InvalidOption, match=message):
        boss.get_queue_stats(queue, **options)


def test_history_of_an_unknown_queue():
    from django_pgboss import QueueNotFound

    with pytest.raises(QueueNotFound):
        boss.get_queue_stats("nope")


def test_without_persisted_stats_the_history_is_the_last_count(queue):
    boss.send(queue)
    with pgboss_settings_with(PERSIST_QUEUE_STATS=False):
        boss.supervise()
        (point,) = boss.get_queue_stats(queue)
    assert (point.queued_count, point.created_delta, point.captured_on) == (1, None, now())


# -- monitors side by side ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_three_monitors_racing_count_each_queue_once_without_deadlock(clock):
    import threading

    from django.db import connections

    from django_pgboss import Boss

    names = [f"race-{n}" for n in range(6)]
    for index, name in enumerate(names):
        boss.create_queue(name, partition=index % 2 == 0, expire_in_seconds=1)
        boss.insert(name, [{"data": i} for i in range(20)])
        boss.fetch(name, batch_size=5)

    def monitor(start: threading.Barrier, reports: list, errors: list) -> None:
        try:
            start.wait()
            reports.append(Boss().supervise())
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    tally = dict.fromkeys(names, 0)
    for _ in range(3):
        start = threading.Barrier(3)
        reports, errors = [], []
        threads = [threading.Thread(target=monitor, args=(start, reports, errors)) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []  # in particular, no deadlock
        counted = [name for report in reports for name in report.counted]
        # No queue is counted twice in a pass. A queue whose claim was taken by a monitor that then
        # lost the stats try-lock to another sits this pass out, as in pg-boss.
        assert len(counted) == len(set(counted))
        assert counted
        for name in counted:
            tally[name] += 1
        # One snapshot per counting, never more.
        assert dict(rows("SELECT name, count(*) FROM {s}.queue_stats GROUP BY name")) == {
            name: n for name, n in tally.items() if n
        }
        clock.advance(seconds=60)


@pytest.mark.django_db(transaction=True)
def test_counters_agree_with_a_recount_over_a_mixed_workload(clock):
    boss.create_queue("mixed", retry_limit=0)
    boss.supervise()  # starts the window
    clock.advance(seconds=5)
    boss.insert("mixed", [{"data": i, "priority": 1} for i in range(50)])
    retriable = boss.insert("mixed", [{"data": i, "retry_limit": 1} for i in range(10)], return_ids=True)
    clock.advance(seconds=5)
    jobs = boss.fetch("mixed", batch_size=50)  # the priority-1 jobs
    boss.complete("mixed", jobs[:20])
    boss.fail("mixed", jobs[20:30])  # no retries left: failed
    boss.cancel("mixed", jobs[30:35])  # neither completed nor failed
    clock.advance(seconds=5)
    retrying = boss.fetch("mixed", batch_size=10)
    assert sorted(j.id for j in retrying) == sorted(retriable)
    boss.fail("mixed", retrying)  # back to retry: not failed (yet)
    clock.advance(seconds=45)
    boss.supervise()
    recount = rows(
        "SELECT count(*), count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'failed') "
        "FROM {s}.job WHERE name = 'mixed'"
    )
    assert recount == [(60, 20, 10)]
    assert (
        rows("SELECT created_delta, completed_delta, failed_delta FROM {s}.queue WHERE name = 'mixed'")
        == recount
    )


@pytest.mark.django_db(transaction=True)
def test_a_second_monitor_cannot_count_between_a_count_and_its_snapshot(clock):
    """Every job is in exactly one snapshot when a second monitor's pass lands inside the first's.

    The first monitor's snapshot is held at its insert (a third connection holds the insert's
    advisory lock, as a slow insert would); meanwhile a second monitor asks for a pass with a
    claim interval of 0 (as a pass asked for by hand does, or any pass once a count runs longer
    than the interval). Were the snapshot taken in a transaction of its own, the second count
    would commit in between and both snapshots would copy its window, leaving the first window's
    jobs in none (the example project's demo runs such a pass beside its monitor thread).
    """
    import threading

    from django.db import connections, transaction

    from django_pgboss import Boss
    from django_pgboss.plans.queues import advisory_lock

    boss.create_queue("q", retry_limit=0)
    boss.supervise(["q"])  # starts the window
    clock.advance(seconds=20)
    boss.insert("q", [{"data": n} for n in range(3)])
    boss.complete("q", boss.fetch("q", batch_size=3))
    clock.advance(seconds=60)  # the first monitor's window holds those 3 jobs

    held, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold_the_insert_lock() -> None:
        try:
            with transaction.atomic(), connections["default"].cursor() as cursor:
                cursor.execute(advisory_lock(), {"lock_key": boss.context.lock_key("queue-stats-insert")})
                held.set()
                release.wait(60)
        finally:
            connections.close_all()

    def monitor(**options) -> None:
        try:
            Boss().supervise(["q"], **options)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    def waiting_for_advisory_locks() -> int:
        return rows(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )[0][0]

    def waiting_for_locks() -> int:
        # By the waiting session's database: a wait for a row is on its holder's transaction id,
        # a lock of no database. With the job table distributed, the queue row a claim waits for
        # is its copy on a worker (queue is a reference table: CLUSTER_LOCK_WAITS).
        return rows(
            "SELECT (SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            f"WHERE NOT l.granted AND a.datname = current_database()){CLUSTER_LOCK_WAITS}"
        )[0][0]

    holder = threading.Thread(target=hold_the_insert_lock)
    holder.start()
    first = threading.Thread(target=monitor)
    second = threading.Thread(target=monitor, kwargs={"interval_seconds": 0})
    try:
        assert held.wait(30)
        first.start()
        deadline = time.monotonic() + 30
        while waiting_for_advisory_locks() < 1:  # the first monitor has counted, not snapshotted
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Two more jobs, in the second monitor's window.
        clock.advance(seconds=5)
        boss.insert("q", [{"data": n} for n in range(3, 5)])
        boss.complete("q", boss.fetch("q", batch_size=2))
        clock.advance(seconds=25)
        second.start()
        deadline = time.monotonic() + 30
        # On PostgreSQL the second claim skips the queue row the first holds, or waits on an
        # advisory lock; with a Citus backend (pg-boss's claims without SKIP LOCKED) it waits
        # on the row itself until the first commits.
        while second.is_alive() and waiting_for_locks() < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        release.set()
        for thread in (holder, first, second):
            if thread.ident is not None:
                thread.join(30)
    assert errors == []
    boss.supervise(["q"], interval_seconds=0)  # counts whatever is left, and trues up
    # In window order: the window's start, the first monitor's 3 jobs, then the 2 after them.
    # Where the second monitor's claim waited for the first (a Citus backend), it counted those 2
    # itself, and the last pass found an empty window.
    windows = sorted(boss.get_queue_stats("q"), key=lambda p: p.delta_on)
    history = [(p.created_delta, p.completed_delta) for p in windows]
    waited = not queue_claims_skip_locked(pgboss_settings.BACKEND)
    assert history == [(0, 0), (3, 3), (2, 2)] + ([(0, 0)] if waited else [])
