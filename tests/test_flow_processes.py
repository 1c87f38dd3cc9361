"""Flows worked end to end by real processes: manage.py pgboss_work runs the handlers and manage.py
pgboss_monitor's flow pass unblocks each job once its parents completed; nothing else runs."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from django_pgboss import boss
from tests.flowapp.jobs import FLOW_QUEUES
from tests.helpers import job_row, rows
from tests.processes import manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FLOW_INTERVAL = "1"


def start(command: str, *args: str) -> subprocess.Popen:
    return manage(
        command, *args, PGBOSS_TEST_EXTRA_APPS="tests.flowapp", PGBOSS_TEST_FLOW_INTERVAL=FLOW_INTERVAL
    )


@pytest.fixture
def processes():
    """A worker on the flow queues and a monitor, as two processes, stopped after the test."""
    for name in FLOW_QUEUES:
        boss.create_queue(name, retry_limit=0)
    queue_args = [arg for name in FLOW_QUEUES for arg in ("--queue", name)]
    started = [start("pgboss_work", *queue_args), start("pgboss_monitor", "--interval", "1")]
    yield started
    for process in started:
        process.send_signal(signal.SIGTERM)
    for process in started:
        _out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err


def ran(marker: Path) -> dict[str, tuple[float, list[str]]]:
    """Each step that ran: when it started and the steps its parents' outputs named."""
    if not marker.exists():
        return {}
    steps = {}
    for line in marker.read_text().splitlines():
        step, at, _pid, inputs = ([*line.split(" "), ""])[:4]
        steps[step] = (float(at), [i for i in inputs.split(",") if i])
    return steps


def job(ref: str, queue: str, marker: Path, *depends_on: str, **data) -> dict:
    return {
        "ref": ref,
        "name": queue,
        "data": {"step": ref, "marker": str(marker), **data},
        "depends_on": list(depends_on),
    }


def test_a_diamond_runs_in_dependency_order(processes, tmp_path):
    marker = tmp_path / "ran"
    ids = boss.flow(
        [
            job("a", "flow.a", marker),
            job("b", "flow.b", marker, "a"),
            job("c", "flow.c", marker, "a"),
            job("d", "flow.d", marker, "b", "c"),
        ]
    )
    wait_for(lambda: job_row(ids["d"], "state") == ("completed",), timeout=60, interval=0.2)
    steps = ran(marker)
    assert set(steps) == {"a", "b", "c", "d"}
    assert steps["a"][0] < steps["b"][0] and steps["a"][0] < steps["c"][0]
    assert steps["d"][0] > max(steps["b"][0], steps["c"][0])
    # Each handler read its parents' outputs.
    assert steps["b"][1] == ["a"] and steps["c"][1] == ["a"] and steps["d"][1] == ["b", "c"]
    assert job_row(ids["d"], "output") == ({"step": "d", "inputs": ["b", "c"]},)


def test_a_chain_runs_one_job_after_the_other(processes, tmp_path):
    marker = tmp_path / "ran"
    refs = [f"s{i}" for i in range(5)]
    jobs = [job(refs[0], FLOW_QUEUES[0], marker)] + [
        job(ref, FLOW_QUEUES[i % len(FLOW_QUEUES)], marker, refs[i - 1]) for i, ref in enumerate(refs) if i
    ]
    ids = boss.flow(jobs)
    wait_for(lambda: job_row(ids[refs[-1]], "state") == ("completed",), timeout=60, interval=0.2)
    steps = ran(marker)
    assert sorted(steps, key=lambda s: steps[s][0]) == refs
    assert [steps[ref][1] for ref in refs] == [[], *[[ref] for ref in refs[:-1]]]


def test_a_parent_failing_for_good_holds_its_children_back(processes, tmp_path):
    marker = tmp_path / "ran"
    ids = boss.flow(
        [
            job("a", "flow.a", marker),
            job("bad", "flow.b", marker, "a", fail=True),
            job("after", "flow.c", marker, "bad"),
            job("other", "flow.d", marker, "a"),
        ]
    )
    wait_for(lambda: job_row(ids["bad"], "state") == ("failed",), timeout=60, interval=0.2)
    wait_for(lambda: job_row(ids["other"], "state") == ("completed",), timeout=60, interval=0.2)
    # Several flow passes later the failed job's child is still blocked and never ran.
    time.sleep(3 * float(FLOW_INTERVAL))
    assert job_row(ids["after"], "state", "blocked", "pending_dependencies") == ("created", True, 1)
    assert set(ran(marker)) == {"a", "bad", "other"}
    # Retried, the failed job completes this time and the flow goes on to the end.
    rows("UPDATE {s}.job SET data = data - 'fail' WHERE id = %s", [ids["bad"]])
    assert boss.retry("flow.b", ids["bad"]) == 1
    wait_for(lambda: job_row(ids["after"], "state") == ("completed",), timeout=60, interval=0.2)
