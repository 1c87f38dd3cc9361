"""A task of Django's task framework, run through django_pgboss's tasks backend (settings.TASKS)."""

from __future__ import annotations

from django.utils import timezone

from django_pgboss.tasks.compat import task
from example_project.shop.models import Order
from example_project.shop.queues import WAREHOUSE


@task(queue_name=WAREHOUSE)
def send_to_warehouse(order_id: int) -> dict[str, object]:
    """Hand the order to the warehouse: here, stamp it and return its pick list."""
    order = Order.objects.get(pk=order_id)
    Order.objects.filter(pk=order_id, sent_to_warehouse_at=None).update(sent_to_warehouse_at=timezone.now())
    return {"order": order.pk, "pick": [{"item": order.item, "quantity": order.quantity}]}


# pg-boss job options ride on the task through using(), which every supported Django accepts
# (@task takes them too from Django 6.1 and with the backport, but not on Django 6.0). The module
# attribute is what the worker imports, so the options stay with the task.
send_to_warehouse = send_to_warehouse.using(retry_limit=3)
