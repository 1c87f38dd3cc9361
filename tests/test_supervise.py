"""supervise(): jobs whose worker went silent are failed through the fail path, and retried."""

from __future__ import annotations

import pytest

from django_pgboss import boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.plans.fragments import plus_seconds
from tests.helpers import job_row, rows

pytestmark = pytest.mark.django_db


def counts(report) -> tuple[int, int]:
    return report.expired, report.stalled


def elapse() -> None:
    """As if the monitor interval had passed: every queue is due for its next pass."""
    rows("UPDATE {s}.queue SET monitor_claim_on = now() - interval '1 hour'")


def elapsed_supervise(*args):
    elapse()
    return boss.supervise(*args)


def age(job_id: str, column: str, seconds: int) -> None:
    rows(f"UPDATE {{s}}.job SET {column} = {column} - %s * interval '1s' WHERE id = %s", [seconds, job_id])


def test_an_expired_job_is_failed_and_retried():
    boss.create_queue("q", expire_in_seconds=60, retry_limit=1)
    boss.send("q")
    (job,) = boss.fetch("q")
    assert counts(elapsed_supervise()) == (0, 0)
    age(job.id, "started_on", 61)
    assert counts(elapsed_supervise()) == (1, 0)
    assert job_row(job.id, "state", "output") == ("retry", {"value": {"message": "job timed out"}})
    (again,) = boss.fetch("q")
    assert (again.id, again.retry_count) == (job.id, 1)
    # The worker that overran cannot settle the attempt another worker now holds.
    assert boss.complete("q", job, {"late": True}) == 0
    assert boss.complete("q", again, {"on": "time"}) == 1


def test_a_stalled_heartbeat_is_failed_and_dead_lettered_when_out_of_retries():
    boss.create_queue("dlq")
    boss.create_queue("q", heartbeat_seconds=10, retry_limit=0, dead_letter="dlq")
    boss.send("q")
    (job,) = boss.fetch("q")
    age(job.id, "heartbeat_on", 5)
    assert counts(elapsed_supervise()) == (0, 0)
    age(job.id, "heartbeat_on", 6)
    assert counts(elapsed_supervise()) == (0, 1)
    assert job_row(job.id, "state") == ("failed",)
    (copy,) = boss.find_jobs("dlq")
    assert copy.source_output == {"value": {"message": "job heartbeat timeout"}}


def test_touch_keeps_a_job_alive():
    boss.create_queue("q", heartbeat_seconds=10)
    boss.send("q")
    (job,) = boss.fetch("q")
    age(job.id, "heartbeat_on", 30)
    boss.touch("q", job)
    assert elapsed_supervise().stalled == 0


def test_supervise_only_the_named_queues_on_every_table():
    boss.create_queue("a", expire_in_seconds=1)
    boss.create_queue("b", expire_in_seconds=1, partition=True)
    boss.create_queue("c", expire_in_seconds=1)
    boss.insert("a", [{}])
    boss.insert("b", [{}])
    boss.insert("c", [{}])
    for name in "abc":
        (job,) = boss.fetch(name)
        age(job.id, "started_on", 5)
    assert counts(elapsed_supervise(["a", "b"])) == (2, 0)
    assert rows("SELECT name, state FROM {s}.job ORDER BY name") == [
        ("a", "retry"),
        ("b", "retry"),
        ("c", "active"),
    ]
    assert counts(elapsed_supervise()) == (1, 0)


def test_waiting_jobs_are_never_swept():
    boss.create_queue("q", expire_in_seconds=1, heartbeat_seconds=10)
    job_id = boss.send("q")
    rows("UPDATE {s}.job SET created_on = now() - interval '1 day' WHERE id = %s", [job_id])
    assert counts(elapsed_supervise()) == (0, 0)


def test_complete_each_settles_a_batch_with_outputs_and_fences_each_job():
    boss.create_queue("q")
    boss.insert("q", [{"data": i} for i in range(3)])
    first, second, third = boss.fetch("q", batch_size=3)
    rows("UPDATE {s}.job SET state = 'retry' WHERE id = %s", [third.id])
    (third_again,) = boss.fetch("q")
    done = JobStore(boss.context).complete_each("q", [(first, {"n": 1}), (second, [2]), (third, "stale")])
    assert sorted(done) == sorted([first.id, second.id])
    assert job_row(first.id, "output") == ({"n": 1},)
    assert job_row(second.id, "output") == ({"value": [2]},)
    assert job_row(third.id, "state", "output") == ("active", None)
    assert JobStore(boss.context).complete_each("q", [(third_again, None)]) == [third.id]


#: The deadlines the sweeps' statements compare, unqualified (the count qualifies them: "j.").
SWEEP_DEADLINES = (
    plus_seconds("started_on", "expire_seconds"),
    plus_seconds("heartbeat_on", "heartbeat_seconds"),
)


def sweeps_run(*args) -> list[str]:
    """The expiry and heartbeat sweeps one pass ran (their SQL), seen through an execute wrapper."""
    from django.db import connection

    seen: list[str] = []

    def watch(execute, sql, params, many, context):
        if any(deadline in sql for deadline in SWEEP_DEADLINES):
            seen.append(sql)
        return execute(sql, params, many, context)

    elapse()
    with connection.execute_wrapper(watch):
        boss.supervise(*args)
    return seen


def test_the_sweeps_skip_queues_the_count_found_no_active_job_in():
    # Reading every row of the job table for jobs that cannot be there was most of a pass's cost.
    boss.create_queue("idle", expire_in_seconds=60)
    boss.create_queue("busy", expire_in_seconds=60, heartbeat_seconds=10)
    boss.send("idle")
    boss.send("busy")
    assert sweeps_run() == []
    (job,) = boss.fetch("busy")
    age(job.id, "started_on", 61)
    (swept,) = sweeps_run()
    assert SWEEP_DEADLINES[0] in swept and "busy" not in swept  # the queue is bound
    assert job_row(job.id, "state") == ("retry",)


def test_each_sweep_runs_only_for_queues_the_count_found_a_job_due_in():
    # With jobs active but none past its expiry or heartbeat, neither sweep has anything to fail:
    # running them read every row of the named queues twice more for nothing.
    boss.create_queue("other", expire_in_seconds=60, heartbeat_seconds=10)
    boss.create_queue("q", expire_in_seconds=60, heartbeat_seconds=10, retry_limit=5)
    boss.send("other")
    boss.send("q")
    (other,) = boss.fetch("other")
    (job,) = boss.fetch("q")
    assert sweeps_run() == []
    assert job_row(job.id, "state") == ("active",)

    # Past its heartbeat only: the heartbeat sweep runs, the expiry sweep does not.
    age(job.id, "heartbeat_on", 11)
    (swept,) = sweeps_run()
    assert SWEEP_DEADLINES[1] in swept
    assert job_row(job.id, "state", "output") == ("retry", {"value": {"message": "job heartbeat timeout"}})

    # Past its expiry (its heartbeat fresh): the expiry sweep only, and it fails the job.
    (job,) = boss.fetch("q")
    age(job.id, "started_on", 61)
    (swept,) = sweeps_run()
    assert SWEEP_DEADLINES[0] in swept
    assert job_row(job.id, "state", "output") == ("retry", {"value": {"message": "job timed out"}})
    # The other queue's job, active and not due, was never touched.
    assert job_row(other.id, "state", "output") == ("active", None)


def test_a_job_past_both_its_expiry_and_its_heartbeat_is_failed_once():
    boss.create_queue("q", expire_in_seconds=60, heartbeat_seconds=10, retry_limit=5)
    boss.send("q")
    (job,) = boss.fetch("q")
    age(job.id, "started_on", 61)
    age(job.id, "heartbeat_on", 61)
    assert len(sweeps_run()) == 2
    # The expiry sweep runs first and fails it; the heartbeat sweep then finds it no longer active.
    assert job_row(job.id, "state", "output") == ("retry", {"value": {"message": "job timed out"}})
    (again,) = boss.fetch("q")
    assert again.retry_count == 1


def test_the_sweeps_run_when_the_backoff_holds_the_count_off():
    # Without a fresh count the pass cannot know which queues hold active jobs, so it sweeps all.
    boss.create_queue("q", expire_in_seconds=60)
    boss.send("q")
    (job,) = boss.fetch("q")
    age(job.id, "started_on", 61)
    rows("UPDATE {s}.version SET monitor_backoff_on = {s}.job_now() + interval '10 minutes'")
    assert len(sweeps_run()) == 2
    assert job_row(job.id, "state") == ("retry",)


def test_a_pass_inside_the_callers_transaction_leaves_its_settings_alone():
    # The pass turns JIT off for its count only in a transaction of its own.
    from django.db import connection

    boss.create_queue("q")
    boss.send("q")
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        (before,) = cursor.fetchone()
        elapsed_supervise()
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == (before,)


def failed_for_good_records(caplog) -> list:
    """The monitor's WARNING records about jobs a sweep failed for good."""
    return [
        record
        for record in caplog.records
        if record.name == "django_pgboss.monitor" and "failed for good" in record.getMessage()
    ]


def test_jobs_the_expiry_fails_for_good_are_one_warning_per_queue_with_count_and_ids(caplog):
    caplog.set_level("WARNING", logger="django_pgboss.monitor")
    boss.create_queue("spent", expire_in_seconds=60, retry_limit=0)
    boss.create_queue("own-table", expire_in_seconds=60, retry_limit=0, partition=True)
    boss.create_queue("retrying", expire_in_seconds=60, retry_limit=1)
    boss.insert("spent", [{} for _ in range(7)])
    boss.send("own-table")
    boss.send("retrying")
    spent = boss.fetch("spent", batch_size=7)
    (own,) = boss.fetch("own-table")
    (retrying,) = boss.fetch("retrying")
    for job in (*spent, own, retrying):
        age(job.id, "started_on", 61)
    assert counts(elapsed_supervise()) == (9, 0)

    by_queue = {record.queue: record for record in failed_for_good_records(caplog)}
    # The job with a retry left is retried, which is no news: only the two queues are named.
    assert sorted(by_queue) == ["own-table", "spent"]
    record = by_queue["spent"]
    assert record.levelname == "WARNING"
    first_ids = sorted(job.id for job in spent)[:5]
    assert record.getMessage() == (
        f"7 job(s) of spent failed for good past their expiry, no retries left: {', '.join(first_ids)} ..."
    )
    assert (record.job_ids, record.failed, record.dead_lettered, record.reason) == (
        first_ids,
        7,
        0,
        "expired",
    )
    assert by_queue["own-table"].getMessage() == (
        f"1 job(s) of own-table failed for good past their expiry, no retries left: {own.id}"
    )
    assert all(job_row(job.id, "state") == ("failed",) for job in (*spent, own))

    # Once: the next pass finds nothing more to fail, and says nothing.
    caplog.clear()
    assert counts(elapsed_supervise()) == (0, 0)
    assert failed_for_good_records(caplog) == []


def test_a_job_the_heartbeat_sweep_dead_letters_is_a_warning_that_says_so(caplog):
    caplog.set_level("WARNING", logger="django_pgboss.monitor")
    boss.create_queue("dlq")
    boss.create_queue("q", heartbeat_seconds=10, retry_limit=0, dead_letter="dlq")
    boss.send("q")
    (job,) = boss.fetch("q")
    age(job.id, "heartbeat_on", 11)
    assert counts(elapsed_supervise()) == (0, 1)
    (record,) = failed_for_good_records(caplog)
    assert record.getMessage() == (
        f"1 job(s) of q failed for good past their heartbeat, no retries left: {job.id}; "
        "it went to its dead letter queue"
    )
    assert (record.queue, record.job_ids, record.dead_lettered, record.reason) == (
        "q",
        [job.id],
        1,
        "stalled",
    )
    assert len(boss.find_jobs("dlq")) == 1
