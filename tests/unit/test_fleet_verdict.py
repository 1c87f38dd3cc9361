"""The mixed fleet's verdict (tests/fleet_verdict.py), on made-up histories, without a database:
what it calls a lost job, a job completed twice and a retry no kill explains, so that the storm's
test (tests/test_mixed_fleet.py) can fail for each."""

from __future__ import annotations

from tests.fleet_verdict import JobRow, Kill, Run, check

JOB = "00000000-0000-4000-8000-000000000001"
QUEUE = "fleet-expiry"


def run(attempt: int, pid: int, at: float, side: str = "python") -> Run:
    return Run("run", QUEUE, JOB, attempt, side, pid, at)


def completed(retry_count: int, at: float = 200.0) -> dict[str, JobRow]:
    return {JOB: JobRow(QUEUE, "completed", retry_count, 99.0, at)}


def verdict(rows, runs, effects, kills):
    by_attempt: dict[int, list[Run]] = {}
    for line in runs:
        by_attempt.setdefault(line.attempt, []).append(line)
    return check({JOB: "python"}, rows, {JOB: by_attempt}, effects, kills, settled_at=300.0)


def test_a_retry_is_explained_by_a_kill_of_the_process_that_ran_the_attempt_before_the_next_began():
    runs = [run(0, 10, 100.0), run(1, 11, 110.0, side="node")]
    effects = [(JOB, QUEUE, 1, "node", 11)]
    result = verdict(completed(1), runs, effects, [Kill("python-worker", 10, 101.0)])
    assert result.problems == []
    assert dict(result.retried_by_kill_of) == {"python": 1}
    assert dict(result.completed_by) == {"node": 1}
    assert dict(result.reclaimed_on) == {QUEUE: 1}


def test_a_retry_without_a_kill_of_its_process_or_with_the_kill_after_the_next_attempt_is_named():
    runs = [run(0, 10, 100.0), run(1, 11, 110.0)]
    effects = [(JOB, QUEUE, 1, "python", 11)]
    for kills in ([], [Kill("python-worker", 12, 101.0)], [Kill("python-worker", 10, 111.0)]):
        (problem,) = verdict(completed(1), runs, effects, kills).problems
        assert f"job {JOB} of {QUEUE}: attempt 0 ran in python pid 10" in problem
        assert "retried without that process being killed" in problem
    # A monitor's kill explains no job's retry.
    (problem,) = verdict(completed(1), runs, effects, [Kill("python-monitor", 10, 101.0)]).problems
    assert "retried without that process being killed" in problem


def test_an_attempt_that_never_ran_needs_a_worker_killed_between_the_runs_around_it():
    runs = [run(0, 10, 100.0), run(2, 12, 120.0)]
    effects = [(JOB, QUEUE, 2, "python", 12)]
    first = Kill("python-worker", 10, 101.0)
    result = verdict(completed(2), runs, effects, [first, Kill("node-worker", 20, 115.0)])
    assert result.problems == []
    assert dict(result.retried_by_kill_of) == {"python": 1, "claimer": 1}
    # The kill that explains attempt 0 cannot explain attempt 1 too, nor can one after attempt 2 began.
    for kills in ([first], [first, Kill("node-worker", 20, 125.0)]):
        (problem,) = verdict(completed(2), runs, effects, kills).problems
        assert (
            "attempt 1 never ran and was retried with no worker killed between 101.000 and 120.000" in problem
        )


def test_a_job_gone_a_job_never_settled_and_a_job_completed_twice_are_named():
    assert verdict({}, [], [], []).problems == [f"job {JOB} was sent and is gone from the job table"]
    active = {JOB: JobRow(QUEUE, "active", 0, 99.0, None)}
    assert verdict(active, [run(0, 10, 100.0)], [], []).problems == [
        f"job {JOB} of {QUEUE} never settled: still active"
    ]
    twice = [(JOB, QUEUE, 0, "python", 10), (JOB, QUEUE, 0, "node", 20)]
    (problem,) = verdict(completed(0), [run(0, 10, 100.0)], twice, []).problems
    assert problem.startswith(f"job {JOB} completed once and left 2 effects")


def test_an_effect_must_be_the_completing_attempts_and_a_failed_job_may_leave_none():
    (problem,) = verdict(completed(0), [run(0, 10, 100.0)], [(JOB, QUEUE, 0, "python", 99)], []).problems
    assert "its effect is of attempt 0 in pid 99, which the ledger does not show running it" in problem
    failed = {JOB: JobRow(QUEUE, "failed", 0, 99.0, None)}
    kills = [Kill("python-worker", 10, 101.0)]
    result = verdict(failed, [run(0, 10, 100.0)], [(JOB, QUEUE, 0, "python", 10)], kills)
    assert result.problems == [f"job {JOB} failed and still left effects: [{(JOB, QUEUE, 0, 'python', 10)}]"]
    assert result.failed == 1
    # The same attempt twice (two claims of one attempt) is named too.
    twice = [run(0, 10, 100.0), run(0, 11, 100.5)]
    problems = verdict(completed(0), twice, [(JOB, QUEUE, 0, "python", 10)], []).problems
    assert any("ran attempt 0 more than once" in p for p in problems)
