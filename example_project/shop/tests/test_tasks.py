"""The warehouse task, through Django's task framework and django_pgboss's tasks backend."""

from __future__ import annotations

from decimal import Decimal

import pytest

from django_pgboss import boss
from django_pgboss.tasks_compat import TaskResultStatus
from example_project.shop.factories import CustomerFactory
from example_project.shop.models import Order
from example_project.shop.queues import WAREHOUSE
from example_project.shop.tasks import send_to_warehouse


@pytest.mark.django_db(transaction=True)
def test_the_warehouse_task_runs_on_the_worker_and_its_result_is_readable(shop_queues, work_off):
    order = Order.objects.create(
        customer=CustomerFactory(), item="kettle", quantity=2, total=Decimal("79.80")
    )
    result = send_to_warehouse.enqueue(order.pk)
    assert result.status == TaskResultStatus.READY
    # The task's pg-boss options ride on the job.
    assert boss.get_job_by_id(WAREHOUSE, result.id).retry_limit == 3

    assert work_off(WAREHOUSE).completed == 1

    result = send_to_warehouse.get_result(result.id)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"order": order.pk, "pick": [{"item": "kettle", "quantity": 2}]}
    order.refresh_from_db()
    assert order.sent_to_warehouse_at is not None
