"""The mixed fleet's verdict (tests/fleet.py runs the storm): from the job rows, the handlers' ledger,
the effects and the kills, every job lost, completed twice, or retried without a kill to explain it,
each in a sentence; and what the storm did, counted.

Pure: it reads no database and starts nothing, so tests/unit/test_fleet_verdict.py tries it on made-up
histories.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

WORKER_ROLES = ("python-worker", "node-worker")


@dataclass(frozen=True)
class Run:
    event: str
    queue: str
    job_id: str
    attempt: int
    side: str
    pid: int
    at: float


@dataclass(frozen=True)
class Kill:
    role: str
    pid: int
    at: float


@dataclass(frozen=True)
class JobRow:
    queue: str
    state: str
    retry_count: int
    created: float
    completed: float | None


@dataclass
class FleetResult:
    """What a storm did and what ``check()`` found wrong (nothing, when all went well)."""

    problems: list[str]
    sent: dict[str, str]
    kills: list[Kill]
    completed_by: dict[str, int]
    failed: int
    retried_by_kill_of: dict[str, int]
    reclaimed_on: dict[str, int]
    seconds: float
    jobs_per_second: float
    reclaimed_by_our_monitor: int = 0
    #: Seconds the fleet took to start, the sends (and the storm) lasted, and the last jobs took to settle.
    phases: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        kills = defaultdict(int)
        for kill in self.kills:
            kills[kill.role] += 1
        return (
            f"{len(self.sent)} jobs in {self.seconds:.1f}s ("
            + ", ".join(f"{phase} {seconds:.1f}s" for phase, seconds in self.phases.items())
            + f"; {self.jobs_per_second:.0f} jobs/s): completed by "
            f"{dict(self.completed_by)}, failed {self.failed}; kills {dict(kills)}; attempts lost to a "
            f"killed {dict(self.retried_by_kill_of)}; jobs retried on {dict(self.reclaimed_on)}; "
            f"{self.reclaimed_by_our_monitor} reclaim(s) by our monitor; "
            f"{len(self.problems)} problem(s)"
        )


def check(
    sent: dict[str, str],
    rows: dict[str, JobRow],
    runs: dict[str, dict[int, list[Run]]],
    effect_rows: list[tuple[str, str, int, str, int]],
    kills: list[Kill],
    settled_at: float,
) -> FleetResult:
    """Every job lost, completed twice, or retried without a kill to explain it, in a sentence each."""
    problems: list[str] = []
    killed_at = {kill.pid: kill.at for kill in kills if kill.role in WORKER_ROLES}
    effects_of: dict[str, list[tuple[str, str, int, str, int]]] = defaultdict(list)
    for effect in effect_rows:
        effects_of[effect[0]].append(effect)
    for job_id in set(effects_of) - set(sent):
        problems.append(f"an effect of job {job_id}, which was never sent")
    completed_by: dict[str, int] = defaultdict(int)
    retried_by_kill_of: dict[str, int] = defaultdict(int)
    reclaimed_on: dict[str, int] = defaultdict(int)
    failed = 0
    for job_id in sent:
        row = rows.get(job_id)
        if row is None:
            problems.append(f"job {job_id} was sent and is gone from the job table")
            continue
        if row.state not in ("completed", "failed"):
            problems.append(f"job {job_id} of {row.queue} never settled: still {row.state}")
            continue
        attempts = runs.get(job_id, {})
        mine = effects_of.get(job_id, [])
        if row.retry_count:
            reclaimed_on[row.queue] += 1
        if row.state == "completed":
            lost = range(row.retry_count)
            if len(mine) != 1:
                problems.append(f"job {job_id} completed once and left {len(mine)} effects: {mine}")
            else:
                (_, _, attempt, side, pid) = mine[0]
                if attempt != row.retry_count or pid not in [r.pid for r in attempts.get(attempt, [])]:
                    problems.append(
                        f"job {job_id} completed as attempt {row.retry_count}, but its effect is of attempt "
                        f"{attempt} in pid {pid}, which the ledger does not show running it"
                    )
                completed_by[side] += 1
        else:
            failed += 1
            lost = range(row.retry_count + 1)
            if mine:
                problems.append(f"job {job_id} failed and still left effects: {mine}")
        for attempt in sorted(attempts):
            if len(attempts[attempt]) > 1:
                problems.append(f"job {job_id} ran attempt {attempt} more than once: {attempts[attempt]}")
            if attempt > row.retry_count:
                problems.append(f"job {job_id} ran attempt {attempt}, past its retry count {row.retry_count}")
        for explained in explain_lost_attempts(job_id, row, attempts, lost, killed_at, settled_at):
            if explained in ("python", "node", "claimer"):
                retried_by_kill_of[explained] += 1
            else:
                problems.append(explained)
    created = [row.created for row in rows.values()]
    completed = [row.completed for row in rows.values() if row.completed is not None]
    span = (max(completed) - min(created)) if completed and created else 0.0
    return FleetResult(
        problems=problems,
        sent=sent,
        kills=kills,
        completed_by=completed_by,
        failed=failed,
        retried_by_kill_of=retried_by_kill_of,
        reclaimed_on=reclaimed_on,
        seconds=0.0,
        jobs_per_second=len(completed) / span if span else 0.0,
    )


def explain_lost_attempts(
    job_id: str,
    row: JobRow,
    attempts: dict[int, list[Run]],
    lost: range,
    killed_at: dict[int, float],
    settled_at: float,
) -> list[str]:
    """For each attempt of the job that did not complete, in order, the side whose killed process
    explains it ("python", "node", or "claimer" for an attempt that never ran), or a sentence saying
    why nothing does.

    An attempt that ran is explained by the kill of the process that ran it, after the run began and
    before the next attempt's began. One that never ran was claimed by a process that died before
    its handler started: some worker must have been killed after the kill that explained the attempt
    before it (the job could be claimed again only once that attempt was reclaimed) and before the
    next attempt's run.
    """
    found: list[str] = []
    floor = row.created - 1  # the database's clock and ours agree to well within a second
    for attempt in lost:
        later = [r.at for k, rs in attempts.items() if k > attempt for r in rs]
        window_end = min(later) if later else (row.completed or settled_at)
        if attempts.get(attempt):
            run = attempts[attempt][0]
            at = killed_at.get(run.pid)
            if at is None or not run.at <= at <= window_end:
                found.append(
                    f"job {job_id} of {row.queue}: attempt {attempt} ran in {run.side} pid {run.pid} "
                    f"from {run.at:.3f} and was retried without that process being killed before "
                    f"{window_end:.3f} (killed at {at})"
                )
            else:
                found.append(run.side)
                floor = at
            continue
        kill = min((at for at in killed_at.values() if floor < at <= window_end), default=None)
        if kill is None:
            found.append(
                f"job {job_id} of {row.queue}: attempt {attempt} never ran and was retried with no "
                f"worker killed between {floor:.3f} and {window_end:.3f}"
            )
        else:
            found.append("claimer")
            floor = kill
    return found
