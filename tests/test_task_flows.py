"""Django tasks chained through a flow (django_pgboss.tasks.flows): enqueued together, run in
dependency order by the tasks backend's worker, each reading its parents' return values."""

from __future__ import annotations

import re
import sys

import pytest
from django.db import transaction

from django_pgboss import FlowCycle, UnknownFlowRef, boss
from django_pgboss.monitor import Monitor
from django_pgboss.tasks.compat import SOURCE, TaskResultStatus, task_backends, task_enqueued
from django_pgboss.tasks.flows import TaskStep, enqueue_flow
from tests.helpers import count_jobs, job_row
from tests.taskapp import flow_tasks, tasks
from tests.test_tasks_backend import REPO, result_of, work_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_chain_of_tasks_runs_in_order_and_passes_its_results_down():
    sent = []
    task_enqueued.connect(
        lambda sender, task_result, **kw: sent.append(task_result.id), weak=False, dispatch_uid="t"
    )
    try:
        with transaction.atomic():
            results = enqueue_flow(
                [
                    TaskStep("a", flow_tasks.total, args=[1]),
                    TaskStep("b", flow_tasks.total, args=[10], depends_on=["a"]),
                    TaskStep("c", flow_tasks.total, args=[100], depends_on=["a"]),
                    TaskStep("d", flow_tasks.total, args=[1000], depends_on=["b", "c"]),
                ]
            )
    finally:
        task_enqueued.disconnect(dispatch_uid="t")
    assert sorted(sent) == sorted(r.id for r in results.values())
    assert all(r.status == TaskResultStatus.READY and r.enqueued_at for r in results.values())
    assert job_row(results["d"].id, "blocked", "pending_dependencies") == (True, 2)
    monitor = Monitor(cron=False)
    for _ in range(3):
        work_tasks()
        monitor.resolve_flows(gated=False)
    assert result_of(results["a"]).return_value == 1
    assert result_of(results["b"]).return_value == 11
    assert result_of(results["c"]).return_value == 101
    # d ran after both of its parents and added their totals.
    assert result_of(results["d"]).return_value == 1000 + 11 + 101


def test_a_failing_task_holds_back_the_tasks_after_it():
    results = enqueue_flow(
        [
            TaskStep("bad", tasks.fail_always.using(retry_limit=0), args=["no"]),
            TaskStep("after", flow_tasks.total, args=[1], depends_on=["bad"]),
        ]
    )
    work_tasks()
    Monitor(cron=False).resolve_flows(gated=False)
    work_tasks()
    assert result_of(results["bad"]).status == TaskResultStatus.FAILED
    assert result_of(results["after"]).status == TaskResultStatus.READY
    assert job_row(results["after"].id, "blocked") == (True,)


def test_a_bad_chain_is_refused_before_anything_is_written():
    task_backends["default"].ensure_queues()
    with pytest.raises(UnknownFlowRef, match="'b' depends on 'x'"):
        enqueue_flow(
            [TaskStep("a", flow_tasks.total, args=[1]), TaskStep("b", flow_tasks.total, depends_on=["x"])]
        )
    with pytest.raises(FlowCycle):
        enqueue_flow(
            [
                TaskStep("a", flow_tasks.total, args=[1], depends_on=["b"]),
                TaskStep("b", flow_tasks.total, args=[1], depends_on=["a"]),
            ]
        )
    assert count_jobs() == 0
    assert boss.get_queue("default") is not None


def test_the_docs_chain_runs_as_written(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "tasks.md").read_text(), re.S)
    (tasks_block,) = [b for b in blocks if b.startswith("# orders/tasks.py")]
    (enqueue_block,) = [b for b in blocks if "enqueue_flow(" in b and "TaskStep(" in b]
    if SOURCE == "django_tasks":
        tasks_block = tasks_block.replace("from django.tasks import task", "from django_tasks import task")
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "__init__.py").write_text("")
    (tmp_path / "orders" / "tasks.py").write_text(tasks_block)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in [name for name in sys.modules if name == "orders" or name.startswith("orders.")]:
        monkeypatch.delitem(sys.modules, module)
    namespace: dict = {}
    try:
        exec(enqueue_block, namespace)
    finally:
        # The package lives in this test's folder: no later test may find it in sys.modules.
        for module in ("orders.tasks", "orders"):
            sys.modules.pop(module, None)
    results = namespace["results"]
    monitor = Monitor(cron=False)
    for _ in range(2):
        work_tasks()
        monitor.resolve_flows(gated=False)
    assert result_of(results["charge"]).return_value == {"order": 42, "charged": 1999}
    assert result_of(results["receipt"]).return_value == {"receipt_for": 1999}
