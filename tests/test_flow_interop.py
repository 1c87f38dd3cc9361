"""Flows across pg-boss 12.35.0 (Node) and django_pgboss on one schema, both directions: a flow
pg-boss inserted is worked and resolved by Python, and one Python inserted by pg-boss itself.

They commit for real (pg-boss connects on its own), hence transaction=True; scripts/test.sh
installs pg-boss and sets PGBOSS_NODE_DIR (tests/node/flows.mjs drives it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from django_pgboss import DependencyRef, boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.monitor import Monitor
from tests.conftest import _node_dir, database_url, pgboss_schema_option
from tests.helpers import job_row

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

FLOWS_SCRIPT = Path(__file__).resolve().parent / "node" / "flows.mjs"
QUEUES = ["order.charge", "order.email", "order.invoice", "order.archive"]


@pytest.fixture
def node_flows():
    """Run tests/node/flows.mjs (pg-boss 12.35.0) on the suite's schema; returns its JSON output."""
    node_dir = _node_dir()

    def run(command: str, *args: str) -> dict:
        completed = subprocess.run(
            [
                "node",
                str(FLOWS_SCRIPT),
                command,
                database_url(),
                pgboss_schema_option(pgboss_settings.SCHEMA),
                *args,
            ],
            env={**os.environ, "PGBOSS_NODE_DIR": str(node_dir)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if completed.returncode != 0:
            raise AssertionError(f"pg-boss (node) {command} failed:\n{completed.stderr}\n{completed.stdout}")
        return json.loads(completed.stdout.strip().splitlines()[-1])

    for name in QUEUES:
        boss.create_queue(name)
    return run


def work_in_python(deadline_passes: int = 20) -> list[str]:
    """Work the queues as a Python worker and monitor would: complete each ready job with its
    parents' steps (read through get_parent_outputs), then run the monitor's flow pass."""
    completed: list[str] = []
    monitor = Monitor(cron=False)
    for _ in range(deadline_passes):
        for name in QUEUES:
            for job in boss.fetch(name, batch_size=10):
                parents = sorted(output["step"] for output in boss.get_parent_outputs(name, job.id).values())
                boss.complete(name, job, {"step": job.data["step"], "by": "python", "parents": parents})
                completed.append(job.data["step"])
        if len(completed) == 4:
            break
        monitor.resolve_flows(gated=False)
    return completed


def test_a_flow_pg_boss_inserted_is_worked_and_resolved_by_python(node_flows):
    ids = node_flows(
        "flow",
        json.dumps(
            [
                {"ref": "charge", "name": "order.charge", "data": {"step": "charge"}},
                {"ref": "email", "name": "order.email", "data": {"step": "email"}, "dependsOn": ["charge"]},
                {
                    "ref": "invoice",
                    "name": "order.invoice",
                    "data": {"step": "invoice"},
                    "dependsOn": ["charge"],
                },
                {
                    "ref": "archive",
                    "name": "order.archive",
                    "data": {"step": "archive"},
                    "dependsOn": ["email", "invoice"],
                },
            ]
        ),
    )["ids"]
    # Python reads pg-boss's edges and flow columns as pg-boss wrote them.
    assert set(boss.get_dependencies("order.archive", ids["archive"])) == {
        DependencyRef("order.email", ids["email"]),
        DependencyRef("order.invoice", ids["invoice"]),
    }
    assert job_row(ids["archive"], "blocked", "pending_dependencies") == (True, 2)
    completed = work_in_python()
    assert completed[0] == "charge" and completed[-1] == "archive"
    assert sorted(completed[1:3]) == ["email", "invoice"]
    assert job_row(ids["archive"], "state", "output") == (
        "completed",
        {"step": "archive", "by": "python", "parents": ["email", "invoice"]},
    )


def test_a_flow_python_inserted_is_worked_and_resolved_by_pg_boss(node_flows):
    ids = boss.flow(
        [
            {"ref": "charge", "name": "order.charge", "data": {"step": "charge"}},
            {"ref": "email", "name": "order.email", "data": {"step": "email"}, "depends_on": ["charge"]},
            {
                "ref": "invoice",
                "name": "order.invoice",
                "data": {"step": "invoice"},
                "depends_on": ["charge"],
            },
            {
                "ref": "archive",
                "name": "order.archive",
                "data": {"step": "archive"},
                "depends_on": ["email", "invoice"],
            },
        ]
    )
    edges = node_flows("edges", "order.charge", ids["charge"])
    assert edges["dependencies"] == []
    assert sorted((d["name"], d["id"]) for d in edges["dependents"]) == sorted(
        [("order.email", ids["email"]), ("order.invoice", ids["invoice"])]
    )
    completed = node_flows("work", json.dumps(QUEUES), "60")["completed"]
    assert completed[0] == "charge" and completed[-1] == "archive"
    assert sorted(completed[1:3]) == ["email", "invoice"]
    assert job_row(ids["archive"], "state", "blocked", "output") == (
        "completed",
        False,
        {"step": "archive", "by": "node", "parents": ["email", "invoice"]},
    )
    # pg-boss's resolver cleared blocking on every parent, as ours does.
    assert job_row(ids["charge"], "blocking") == (False,)


def test_parents_completed_by_one_side_are_resolved_by_the_other(node_flows):
    ids = boss.flow(
        [
            {"ref": "charge", "name": "order.charge", "data": {"step": "charge"}},
            {"ref": "email", "name": "order.email", "data": {"step": "email"}, "depends_on": ["charge"]},
        ]
    )
    (job,) = boss.fetch("order.charge")
    boss.complete("order.charge", job, {"step": "charge"})
    # pg-boss's work command resolves (resolveFlow) the parent Python completed, then runs the child.
    completed = node_flows("work", json.dumps(["order.charge", "order.email"]), "30")["completed"]
    assert completed == ["email"]
    assert job_row(ids["email"], "state") == ("completed",)
