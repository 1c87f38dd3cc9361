"""Testing aids for projects that use django_pgboss (docs/testing.md shows each with pytest-django).

- ``run_jobs()``: the registered handlers of the waiting jobs, run on the test's thread until the
  queues are idle, inside or outside the test's transaction, each call ending as under a worker.
- ``wait_for_job()`` and ``JobSpy``: wait for a job to reach a state; record what a queue's
  handler saw (pg-boss's spies), with a worker on a thread or in another process.
- ``TestClock``: ``job_now()`` and the monitor's timers moved by the test, not by real time.
"""

from __future__ import annotations

from django_pgboss.testing.clock import CLOCK_SETTING, TestClock
from django_pgboss.testing.runs import JobRun, RanJob, run_jobs
from django_pgboss.testing.spies import JobSpy, SpyJob, wait_for_job

__all__ = [
    "CLOCK_SETTING",
    "JobRun",
    "JobSpy",
    "RanJob",
    "SpyJob",
    "TestClock",
    "run_jobs",
    "wait_for_job",
]
