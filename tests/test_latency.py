"""The monitor's wait and run histograms, blocked and retained counts (pg-boss 12.38's schema 46).
The arithmetic on the histograms, without a database, is tests/unit/test_latency.py's.

The tests on one connection run on a TestClock (django_pgboss.testing), so a job waits and runs
exactly as long as the test advances the clock. The comparison with pg-boss's own monitor commits
for real (pg-boss connects on its own) and stamps the jobs with SQL instead.
"""

from __future__ import annotations

import pytest

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.exceptions import InvalidOption
from django_pgboss.latency import LATENCY_SLOTS, percentile
from django_pgboss.plans.fragments import plus_seconds
from django_pgboss.records import Percentile
from tests.helpers import rows

pytestmark = [pytest.mark.queue(retry_limit=0)]


def slots(**counts: int) -> list[int]:
    """A histogram with ``counts`` (slot_<k>=n) in the named slots and 0 elsewhere."""
    bins = [0] * LATENCY_SLOTS
    for name, n in counts.items():
        bins[int(name.removeprefix("slot_"))] = n
    return bins


# -- the monitor ------------------------------------------------------------------------------------


def queue_row(name: str, *columns: str) -> tuple:
    (row,) = rows(f"SELECT {', '.join(columns)} FROM {{s}}.queue WHERE name = %s", [name])
    return row


@pytest.mark.django_db
def test_a_counting_pass_records_the_wait_and_run_of_the_jobs_that_finished(queue, clock):
    boss.supervise()  # starts the counting window
    boss.send(queue, {"n": 1})
    boss.send(queue, {"n": 2})
    clock.advance(seconds=2)
    first, second = boss.fetch(queue, batch_size=2)  # each waited 2 s
    clock.advance(seconds=5)
    boss.complete(queue, first)  # ran 5 s
    boss.fail(queue, second)  # failed after 5 s: its times count too
    boss.send(queue, {"n": 3})  # waiting, ready: neither waited nor ran to the end yet
    clock.advance(seconds=70)
    assert boss.supervise().counted == [queue]
    info = boss.get_queue(queue)
    # 2 s lands in slot 16 (1.81 s to 2.56 s), 5 s in slot 18 (3.62 s to 5.12 s).
    assert info.wait_bins == slots(slot_16=2)
    assert info.run_bins == slots(slot_18=2)
    assert info.ready_oldest_seconds == 70
    # The snapshot keeps them, and reads them back with their percentiles.
    (point, _first) = boss.get_queue_stats(queue, percentiles=[50, 99, 50])
    assert (point.wait_bins, point.run_bins, point.ready_oldest_seconds) == (
        info.wait_bins,
        info.run_bins,
        70,
    )
    assert [entry.p for entry in point.percentiles] == [50, 99]
    assert point.percentiles[0] == Percentile(
        50, percentile(info.wait_bins, 50), percentile(info.run_bins, 50)
    )
    assert 1.81 < point.percentiles[0].wait_seconds < 2.56
    assert 3.62 < point.percentiles[1].run_seconds < 5.12


@pytest.mark.django_db
def test_a_pass_in_which_nothing_finished_writes_empty_histograms(queue, clock):
    assert boss.get_queue(queue).wait_bins is None  # never counted
    boss.supervise()
    info = boss.get_queue(queue)
    assert (info.wait_bins, info.run_bins, info.ready_oldest_seconds) == ([0] * 48, [0] * 48, 0)
    # Stored as pg-boss stores them: 48 NULL slots, not a NULL array.
    assert queue_row(queue, "wait_bins")[0] == [None] * 48
    (point,) = boss.get_queue_stats(queue, percentiles=[95])
    assert point.percentiles == [Percentile(95, None, None)]


@pytest.mark.django_db
def test_buckets_add_their_passes_histograms(queue, clock):
    # Buckets are epoch-aligned: the three passes below span 124 s, so they start well inside one.
    into_bucket = clock.now().timestamp() % 100_000
    if into_bucket > 100_000 - 300:
        clock.advance(seconds=100_000 - into_bucket + 10)
    boss.supervise()
    for _ in range(2):
        boss.send(queue)
        clock.advance(seconds=1)
        job = boss.fetch(queue)
        clock.advance(seconds=1)
        boss.complete(queue, job)
        clock.advance(seconds=60)
        boss.supervise()
    (bucket,) = boss.get_queue_stats(queue, bucket_seconds=100_000)
    # Each pass counted one job that waited 1 s and ran 1 s: slot 14 (0.91 s to 1.28 s).
    assert bucket.wait_bins == slots(slot_14=2)
    assert bucket.run_bins == slots(slot_14=2)


@pytest.mark.django_db
def test_the_count_is_the_same_while_bam_has_not_built_schema_46_s_indexes(queue, clock):
    # An upgraded schema has job_i14 to job_i16 only once bam built them: until then the same
    # statement reads the queue without them.
    # One index a statement: Citus drops only one distributed object per command.
    for index in ("job_common_i14", "job_common_i15", "job_common_i16"):
        rows(f"DROP INDEX {{s}}.{index}")
    boss.supervise()
    boss.send(queue)
    clock.advance(seconds=2)
    boss.complete(queue, boss.fetch(queue))
    clock.advance(seconds=70)
    assert boss.supervise().counted == [queue]
    info = boss.get_queue(queue)
    assert (info.wait_bins, info.run_bins) == (slots(slot_16=1), slots(slot_0=1))
    assert (info.completed_delta, info.retained_count, info.total_count) == (1, 1, 1)


@pytest.mark.django_db
def test_blocked_jobs_are_counted_apart_from_ready_ones(queue):
    boss.flow([{"ref": "parent", "name": queue}, {"ref": "child", "name": queue, "depends_on": ["parent"]}])
    boss.send(queue, start_after=3600)
    boss.supervise()
    info = boss.get_queue(queue)
    assert (info.queued_count, info.ready_count, info.blocked_count, info.deferred_count) == (3, 1, 1, 1)


@pytest.mark.django_db
def test_total_count_is_the_live_jobs_plus_the_retained_ones(queue, clock):
    for _ in range(4):
        boss.send(queue)
    done = boss.fetch(queue, batch_size=3)
    boss.complete(queue, done[:2])
    boss.cancel(queue, done[2])
    clock.advance(seconds=60)
    boss.supervise()  # the maintenance pass counts what the queue keeps
    info = boss.get_queue(queue)
    assert (info.retained_count, info.total_count, info.queued_count) == (3, 4, 1)
    # A job finishing later is taken in by the next monitor pass, once it is DELTA_LAG old.
    boss.complete(queue, boss.fetch(queue))
    clock.advance(seconds=60)
    boss.supervise()
    info = boss.get_queue(queue)
    assert (info.retained_count, info.total_count, info.queued_count) == (4, 4, 0)


@pytest.mark.django_db(transaction=True)
def test_deletes_and_resumes_take_the_jobs_they_move_off_the_retained_count(queue):
    for _ in range(6):
        boss.send(queue)
    jobs = boss.fetch(queue, batch_size=6)
    boss.complete(queue, jobs[:3])
    boss.cancel(queue, [job.id for job in jobs[3:]])
    rows(
        f"UPDATE {{s}}.job SET completed_on = {plus_seconds('completed_on', '-60')} WHERE name = %s", [queue]
    )
    rows("UPDATE {s}.queue SET monitor_claim_on = NULL, maintain_on = NULL WHERE name = %s", [queue])
    boss.supervise()
    assert (boss.get_queue(queue).retained_count, boss.get_queue(queue).total_count) == (6, 6)
    boss.delete_job(queue, jobs[0].id)  # a completed job: out of both counts at once
    boss.resume(queue, jobs[3].id)  # a cancelled one: out of the retained, still in the total
    info = boss.get_queue(queue)
    assert (info.retained_count, info.total_count) == (4, 5)
    assert boss.delete_stored_jobs(queue) == 4
    info = boss.get_queue(queue)
    assert (info.retained_count, info.total_count) == (0, 1)


@pytest.mark.django_db
def test_bad_percentiles_are_refused_before_any_sql(queue, django_assert_num_queries):
    for bad in ([], [0], [101], [True], ["50"], [float("nan")], 50, "50"):
        with django_assert_num_queries(0), pytest.raises(InvalidOption, match="percentiles"):
            boss.get_queue_stats(queue, percentiles=bad)


# -- the same bins as pg-boss's own monitor ---------------------------------------------------------

# The (wait, run) in seconds of each completed job, from under 10 ms to past the last bin.
TIMED_JOBS = [(0.004, 0.2), (0.5, 1.5), (3, 40), (3, 40), (90, 7200), (100_000, 0.02)]


def stage(name: str) -> None:
    """Jobs of ``name`` that finished 30 s ago after the waits and runs of TIMED_JOBS, a cancelled
    one, a failed one, a ready one an hour old and a blocked flow child; and a counting window
    that opened five minutes ago, so one pass of either monitor counts them all."""
    boss.create_queue(name, retry_limit=0)
    ids = [boss.send(name, {"n": n}) for n in range(len(TIMED_JOBS) + 2)]
    assert len(boss.fetch(name, batch_size=len(ids))) == len(ids)
    for job_id, (wait, run) in zip(ids, TIMED_JOBS, strict=False):
        rows(
            "UPDATE {s}.job SET state = 'completed', "
            "completed_on = now() - interval '30 seconds', "
            "started_on = now() - interval '30 seconds' - %s * interval '1 second', "
            "created_on = now() - interval '30 seconds' - %s * interval '1 second', "
            "start_after = now() - interval '30 seconds' - %s * interval '1 second' "
            "WHERE name = %s AND id = %s",
            [run, run + wait, run + wait, name, job_id],
        )
    failed = ids[len(TIMED_JOBS)]
    boss.fail(name, failed)
    rows(
        "UPDATE {s}.job SET completed_on = now() - interval '20 seconds', "
        "started_on = now() - interval '25 seconds', created_on = now() - interval '26 seconds', "
        "start_after = now() - interval '26 seconds' "
        "WHERE name = %s AND id = %s",
        [name, failed],
    )
    boss.cancel(name, ids[-1])
    rows(
        "UPDATE {s}.job SET completed_on = now() - interval '15 seconds' WHERE name = %s AND id = %s",
        [name, ids[-1]],
    )
    ready = boss.send(name)
    rows(
        "UPDATE {s}.job SET created_on = now() - interval '1 hour', start_after = now() - interval '1 hour' "
        "WHERE name = %s AND id = %s",
        [name, ready],
    )
    boss.flow([{"ref": "p", "name": name}, {"ref": "c", "name": name, "depends_on": ["p"]}])
    rows(
        "UPDATE {s}.queue SET delta_on = now() - interval '5 minutes', monitor_on = NULL, "
        "monitor_claim_on = NULL, maintain_on = NULL WHERE name = %s",
        [name],
    )


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_a_python_and_a_node_monitor_give_the_same_bins_and_counts(run_pgboss):
    stage("ours")
    stage("theirs")
    boss.supervise(["ours"])
    theirs = run_pgboss("supervise", pgboss_settings.SCHEMA, "theirs", "[50, 95, 99]")
    ours = boss.get_queue("ours")
    queue = theirs["queue"]
    assert ours.wait_bins == queue["waitBins"]
    assert ours.run_bins == queue["runBins"]
    assert sum(ours.wait_bins) == len(TIMED_JOBS) + 1  # the completed and the failed ones
    counts = ("deferred", "queued", "ready", "blocked", "active", "failed", "total")
    assert {c: getattr(ours, f"{c}_count") for c in counts} == {c: queue[f"{c}Count"] for c in counts}
    assert (ours.blocked_count, ours.ready_count) == (1, 2)  # the flow's parent is ready too
    assert (ours.completed_delta, ours.failed_delta) == (queue["completedDelta"], queue["failedDelta"])
    (retained,) = rows("SELECT retained_count FROM {s}.queue WHERE name = 'theirs'")[0]
    assert ours.retained_count == retained == len(TIMED_JOBS) + 1
    # pg-boss ran a second or two later, on the same jobs: the oldest ready job is that much older.
    assert 0 <= queue["readyOldestSeconds"] - ours.ready_oldest_seconds <= 5
    (point, *_) = boss.get_queue_stats("ours", percentiles=[50, 95, 99])
    (their_point, *_) = theirs["stats"]
    assert point.wait_bins == their_point["waitBins"]
    assert [(e.p, e.wait_seconds, e.run_seconds) for e in point.percentiles] == [
        (e["p"], pytest.approx(e["waitSeconds"]), pytest.approx(e["runSeconds"]))
        for e in their_point["percentiles"]
    ]


def stage_late_flow(name: str) -> tuple[str, str]:
    """A flow of ``name`` sent an hour ago whose parent completed ten minutes ago and whose child
    is still blocked (no flow pass has run since); returns the parent's and the child's ids."""
    boss.create_queue(name, retry_limit=0)
    ids = boss.flow([{"ref": "p", "name": name}, {"ref": "c", "name": name, "depends_on": ["p"]}])
    (parent,) = boss.fetch(name)
    assert parent.id == ids["p"] and boss.complete(name, parent) == 1
    rows(
        "UPDATE {s}.job SET created_on = now() - interval '1 hour', start_after = now() - interval '1 hour' "
        "WHERE name = %s",
        [name],
    )
    rows(
        "UPDATE {s}.job SET started_on = now() - interval '11 minutes', completed_on = now() - interval '10 minutes' "
        "WHERE name = %s AND id = %s",
        [name, ids["p"]],
    )
    return ids["p"], ids["c"]


def worked_from_its_start_after(name: str, child: str) -> None:
    """The child of ``name`` completed as if fetched 2 s after its start_after and run 1 s, all of
    its moments a minute earlier (so that they are past), then a counting window that opened five
    minutes ago, so one pass counts it."""
    rows(
        f"UPDATE {{s}}.job SET state = 'completed', created_on = {plus_seconds('created_on', '-60')}, "
        f"start_after = {plus_seconds('start_after', '-60')}, "
        f"started_on = {plus_seconds('start_after', '-58')}, "
        f"completed_on = {plus_seconds('start_after', '-57')} WHERE name = %s AND id = %s",
        [name, child],
    )
    rows(
        "UPDATE {s}.queue SET delta_on = now() - interval '5 minutes', monitor_on = NULL, "
        "monitor_claim_on = NULL, maintain_on = NULL WHERE name = %s",
        [name],
    )


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_a_flow_child_released_late_waits_from_its_release_as_in_pg_boss(run_pgboss):
    _, ours = stage_late_flow("ours")
    _, theirs = stage_late_flow("theirs")
    (before,) = rows("SELECT now()")[0]

    assert boss.resolve_flow(["ours"]) == 1
    run_pgboss("resolve", pgboss_settings.SCHEMA)

    # Released by either resolver, the child is ready, and its start_after is the release: not the
    # hour-old moment it was sent.
    released = dict(
        rows(
            "SELECT name, start_after >= %s FROM {s}.job WHERE (name, id) IN (('ours', %s), ('theirs', %s)) "
            "AND NOT blocked AND state = 'created'",
            [before, ours, theirs],
        )
    )
    assert released == {"ours": True, "theirs": True}
    worked_from_its_start_after("ours", ours)
    worked_from_its_start_after("theirs", theirs)

    boss.supervise(["ours"])
    node = run_pgboss("supervise", pgboss_settings.SCHEMA, "theirs")["queue"]

    # The child waited 2 s, counted from its release, not an hour from when the flow was sent: the
    # same slot in both monitors' bins (the parent completed before the counting window).
    mine = boss.get_queue("ours")
    assert mine.wait_bins == node["waitBins"] and mine.run_bins == node["runBins"]
    assert sum(mine.wait_bins) == 1
    (p50,) = boss.get_queue_stats("ours", percentiles=[50])[0].percentiles
    assert 1 < p50.wait_seconds < 4
