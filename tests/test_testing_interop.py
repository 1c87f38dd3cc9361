"""The testing aids with pg-boss 12.38.0 itself (Node) on the same schema: run_jobs() runs the jobs
pg-boss sent, with pg-boss's retry options, and what it stores is what pg-boss reads; a job
pg-boss's worker completed is what wait_for_job() and a JobSpy's wait by id return."""

from __future__ import annotations

import json

import pytest

from django_pgboss import Boss, work
from django_pgboss.conf import pgboss_settings
from django_pgboss.testing import JobSpy, run_jobs, wait_for_job
from django_pgboss.worker import registry

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

boss = Boss()


@pytest.fixture
def handlers():
    registry.autodiscover()  # what run_jobs() imports stays registered after the test
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)


def test_run_jobs_runs_what_pg_boss_sent_and_pg_boss_reads_the_outcome(handlers, run_pgboss):
    @work("from-node")
    def handle(job):
        if job.data["n"] == 2:
            raise ValueError("two is refused")
        return {"seen": job.data["n"]}

    boss.create_queue("from-node-dead")
    boss.create_queue("from-node", dead_letter="from-node-dead")
    requests = [
        {"data": {"n": 1}},
        {"data": {"n": 2}, "options": {"retryLimit": 1, "retryDelay": 0}},
    ]
    done, refused = run_pgboss("send", pgboss_settings.SCHEMA, "from-node", json.dumps(requests))["ids"]

    run = run_jobs("from-node")

    assert [(ran.id, ran.state) for ran in run] == [
        (done, "completed"),
        (refused, "retry"),
        (refused, "failed"),
    ]
    (completed,) = run_pgboss("get", pgboss_settings.SCHEMA, "from-node", done)["jobs"]
    assert (completed["state"], completed["output"]) == ("completed", {"seen": 1})
    (failed,) = run_pgboss("get", pgboss_settings.SCHEMA, "from-node", refused)["jobs"]
    assert (failed["state"], failed["retryCount"]) == ("failed", 1)
    assert failed["output"]["message"] == "two is refused"
    assert [job.data for job in boss.fetch("from-node-dead")] == [{"n": 2}]


def test_wait_for_job_returns_a_job_pg_boss_completed(run_pgboss):
    boss.create_queue("to-node")
    job_id = boss.send("to-node", {"n": 1})
    with JobSpy("to-node") as spy:
        run_pgboss("work", pgboss_settings.SCHEMA, "to-node", json.dumps({"by": "node"}))

        job = wait_for_job("to-node", job_id, "completed", timeout=30)
        seen = spy.wait_for_job_with_id(job_id, "completed", timeout=30)

    assert (job.state, job.output) == ("completed", {"by": "node"})
    assert (seen.data, seen.output) == ({"n": 1}, {"by": "node"})
    assert spy.jobs == []  # pg-boss's worker sends no Django signal: the wait read the database
