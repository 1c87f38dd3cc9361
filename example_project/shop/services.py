"""The shop's own code: placing an order sends its jobs in the same transaction."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from django_pgboss import boss
from example_project.shop.models import Customer, Order
from example_project.shop.queues import EMAILS, LOYALTY, REPORTS
from example_project.shop.tasks import send_to_warehouse


def place_order(customer: Customer, item: str, quantity: int, unit_price: Decimal) -> Order:
    """Create an order and queue its confirmation email, loyalty points and warehouse task.

    Everything happens in one transaction: if anything fails, there is no order and no job, and a
    worker can never pick up a job whose order is not committed yet.
    """
    with transaction.atomic():
        order = Order.objects.create(
            customer=customer, item=item, quantity=quantity, total=unit_price * quantity
        )
        order.confirmation_job_id = boss.send(EMAILS, {"order_id": order.pk}, priority=quantity)
        order.save(update_fields=["confirmation_job_id"])
        # One customer's points are added in the order the orders were placed (key_strict_fifo).
        boss.send(
            LOYALTY,
            {"order_id": order.pk, "points": int(order.total)},
            singleton_key=f"customer-{customer.pk}",
        )
        send_to_warehouse.enqueue(order.pk)
    return order


def request_sales_report(day: str) -> str | None:
    """Ask for a fresh sales report of ``day``; None when one is already waiting to run (stately)."""
    return boss.send(REPORTS, {"kind": "on-demand", "day": day})
