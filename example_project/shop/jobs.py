"""The shop's job handlers: ``manage.py pgboss_work`` imports this module and runs them.

A handler's return value is stored as the job's output; an exception fails the attempt, which
pg-boss retries (the queue's retry_limit and retry_delay) and finally copies into the queue's
dead-letter queue.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from django_pgboss import Job, work
from example_project.shop.models import Customer, DailyReport, Order
from example_project.shop.queues import EMAILS, LOYALTY, REPORTS


class UndeliverableAddress(Exception):
    """The customer's email address cannot receive mail: retrying will not help until it is fixed."""


class OutOfOrder(Exception):
    """A loyalty job ran after a newer order of the same customer (key_strict_fifo prevents it)."""


@work(EMAILS, concurrency=4)
def send_order_confirmation(job: Job) -> dict[str, str]:
    """Email the customer their order confirmation, through Django's email backend."""
    order = Order.objects.select_related("customer").get(pk=job.data["order_id"])
    address = order.customer.email  # read now, so a redrive after a fix uses the fixed address
    try:
        validate_email(address)
    except ValidationError as exc:
        raise UndeliverableAddress(f"cannot email {address!r}: not an email address") from exc
    EmailMessage(
        subject=f"Your order {order.pk} is confirmed",
        body=f"Hello {order.customer.name},\n\nWe received your order: {order.quantity} x {order.item}, "
        f"{order.total} EUR.\n",
        to=[address],
    ).send()
    Order.objects.filter(pk=order.pk).update(confirmation_sent_at=timezone.now())
    return {"sent_to": address}


@work(LOYALTY, concurrency=2)
def add_loyalty_points(job: Job) -> dict[str, int]:
    """Add an order's points to its customer; one customer's jobs run one at a time, oldest first."""
    with transaction.atomic():
        customer = Customer.objects.select_for_update().get(orders__pk=job.data["order_id"])
        if customer.last_points_order_id is not None and customer.last_points_order_id > job.data["order_id"]:
            raise OutOfOrder(
                f"order {job.data['order_id']} arrived after order {customer.last_points_order_id}"
            )
        customer.loyalty_points += job.data["points"]
        customer.last_points_order_id = job.data["order_id"]
        customer.save(update_fields=["loyalty_points", "last_points_order"])
    return {"customer": customer.pk, "loyalty_points": customer.loyalty_points}


@work(REPORTS)
def build_sales_report(job: Job) -> dict[str, object]:
    """Count a day's orders and revenue into a DailyReport (the nightly schedule reports yesterday)."""
    data = job.data or {}
    yesterday = timezone.localdate() - dt.timedelta(days=1)
    day = dt.date.fromisoformat(data["day"]) if "day" in data else yesterday
    totals = Order.objects.filter(placed_at__date=day).aggregate(orders=Count("id"), revenue=Sum("total"))
    report, _ = DailyReport.objects.update_or_create(
        day=day, defaults={"orders": totals["orders"], "revenue": totals["revenue"] or Decimal("0.00")}
    )
    return {"day": day.isoformat(), "orders": report.orders, "revenue": str(report.revenue)}
