"""A mixed fleet under a kill -9 storm (tests/fleet.py): django_pgboss's ``pgboss_work`` processes and
pg-boss 12.38.0's workers on the same two queues, our monitor reclaiming one queue's killed jobs and
pg-boss's supervisor the other's, processes on both sides killed with SIGKILL and replaced while the
jobs flow. No job is lost, none completes twice, and every retry is explained by a kill.

The storm is random; its seed is in the failure message, and PGBOSS_FLEET_SEED replays it. The seed
also decides which queue each monitor keeps, so that runs cover both: ours reclaiming expired jobs
and pg-boss's reclaiming those whose heartbeat stopped, and the other way round.
"""

from __future__ import annotations

import os
import random

import pytest

from tests.conftest import database_url
from tests.fleet import FleetPlan, Launch, drop_effects, storm
from tests.fleetapp import QUEUES
from tests.processes import REPO, worker_env

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("run_pgboss")  # it fails the test, saying why, when pg-boss is not installed
def test_a_mixed_fleet_under_a_kill_storm_loses_no_job_completes_none_twice_and_retries_only_killed_attempts(
    tmp_path,
):
    seed = int(os.environ.get("PGBOSS_FLEET_SEED") or random.randrange(2**32))
    plan = FleetPlan(
        jobs=300, send_seconds=8, handler_ms=(100, 300), our_monitor_on=QUEUES[seed % 2], seed=seed
    )
    launch = Launch(
        python_env=worker_env(PGBOSS_TEST_EXTRA_APPS="tests.fleetapp", PGBOSS_TEST_CONN_MAX_AGE="60"),
        node_dir=os.environ["PGBOSS_NODE_DIR"],
        database_url=database_url(),
        cwd=REPO,
    )
    try:
        result = storm(plan, launch, tmp_path)
    finally:
        drop_effects()
    said = f"seed {seed}: {result.summary()}"
    assert result.problems == [], said + "\n" + "\n".join(result.problems)
    assert len(result.sent) == plan.jobs, said
    # The storm reached what it is about: both sides completed jobs and lost attempts to a kill, and
    # killed jobs came back on both queues, through their expiry and through their heartbeat.
    assert result.completed_by["python"] and result.completed_by["node"], said
    assert result.retried_by_kill_of["python"] and result.retried_by_kill_of["node"], said
    assert set(result.reclaimed_on) == set(QUEUES), said
    # Our monitor's log says it failed some of its queue's killed jobs for retry itself.
    assert result.reclaimed_by_our_monitor > 0, said
