"""docs/flows.md's order pipeline, run as written: the handlers block as an app's jobs.py, the
flow sent inside a transaction, then a worker and the monitor's flow pass work it to the end."""

from __future__ import annotations

import sys

import pytest

from django_pgboss import boss
from django_pgboss.monitor import Monitor
from django_pgboss.worker import Worker, registry
from django_pgboss.worker.registry import registrations
from tests.test_docs import marked_blocks, run_block

pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = ("orders.charge", "orders.email", "orders.invoice", "orders.archive")


@pytest.fixture
def orders_app(tmp_path, monkeypatch):
    """The page's ``orders/jobs.py``, importable as ``orders.jobs``; the registry is restored after."""
    jobs_block = marked_blocks("flows.md", 2)[0]
    assert jobs_block.startswith("# orders/jobs.py\n")
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "__init__.py").write_text("")
    (tmp_path / "orders" / "jobs.py").write_text(jobs_block)
    monkeypatch.syspath_prepend(str(tmp_path))
    # Another test may have imported an ``orders`` package from its own folder (docs/tasks.md's).
    for module in [name for name in sys.modules if name == "orders" or name.startswith("orders.")]:
        monkeypatch.delitem(sys.modules, module)
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)
    for module in ("orders.jobs", "orders"):
        sys.modules.pop(module, None)


def test_the_order_pipeline_runs_in_order(orders_app):
    namespace = run_block(marked_blocks("flows.md", 2)[1], "flows.md")
    ids = namespace["ids"]
    import orders.jobs  # noqa: F401  (registers the handlers, as pgboss_work's autodiscovery does)

    worker_registrations = [registrations()[name] for name in QUEUES]
    monitor = Monitor(cron=False)
    finished: list[list[str]] = []
    # Each round: a burst worker drains what is ready, then the monitor's flow pass unblocks.
    for _ in range(4):
        Worker(worker_registrations, burst=True).run()
        finished.append(
            sorted(job.name for name in QUEUES for job in boss.find_jobs(name) if job.state == "completed")
        )
        monitor.resolve_flows(gated=False)
    assert finished[0] == ["orders.charge"]
    assert finished[1] == ["orders.charge", "orders.email", "orders.invoice"]
    assert finished[2] == sorted(QUEUES)
    assert boss.get_job_by_id("orders.email", ids["email"]).output == {
        "emailed": "ada@example.com",
        "amount": 1999,
    }
    assert boss.get_job_by_id("orders.invoice", ids["invoice"]).output == {
        "invoice": "INV-42",
        "amount": 1999,
    }
    assert boss.get_job_by_id("orders.archive", ids["archive"]).output == {
        "archived": 42,
        "after": ["orders.email", "orders.invoice"],
    }
