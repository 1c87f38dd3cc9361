"""The shop's handlers, run by a real worker against the queues as shop_setup creates them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.core import mail
from django.utils import timezone

from django_pgboss import Job, boss
from example_project.shop.factories import CustomerFactory, OrderFactory
from example_project.shop.jobs import OutOfOrder, add_loyalty_points, build_sales_report
from example_project.shop.models import DailyReport
from example_project.shop.queues import EMAILS, EMAILS_DEAD, LOYALTY, REPORTS
from example_project.shop.services import place_order, request_sales_report


def job(queue: str, data: dict) -> Job:
    """A Job as the worker hands it to a handler (for calling a handler directly)."""
    return Job(
        id="00000000-0000-4000-8000-000000000001", name=queue, data=data, retry_count=0, expire_in_seconds=900
    )


@pytest.mark.django_db(transaction=True)
def test_the_worker_emails_the_order_confirmation(shop_queues, work_off):
    order = place_order(CustomerFactory(name="Ada Lovelace"), "teapot", 1, Decimal("24.00"))

    stats = work_off(EMAILS)

    assert (stats.completed, stats.failed) == (1, 0)
    (message,) = mail.outbox
    assert (message.to, message.subject) == (
        ["ada.lovelace@example.com"],
        f"Your order {order.pk} is confirmed",
    )
    assert "1 x teapot, 24.00 EUR" in message.body
    order.refresh_from_db()
    assert order.confirmation_sent_at is not None
    assert boss.get_job_by_id(EMAILS, str(order.confirmation_job_id)).output == {
        "sent_to": "ada.lovelace@example.com"
    }


@pytest.mark.django_db(transaction=True)
def test_an_undeliverable_address_is_retried_dead_lettered_and_redriven_once_fixed(shop_queues, work_off):
    boss.update_queue(EMAILS, retry_delay=0)  # retry at once, so one burst works every attempt
    customer = CustomerFactory(email="grace.hopper(at)example.com")
    order = place_order(customer, "mug", 1, Decimal("8.50"))

    stats = work_off(EMAILS)

    assert (stats.completed, stats.failed) == (0, 3)  # the first attempt and two retries
    assert mail.outbox == []
    (copy,) = boss.find_jobs(EMAILS_DEAD)
    assert copy.data == {"order_id": order.pk}
    assert copy.source_output["name"] == "UndeliverableAddress"
    assert copy.source_output["message"] == "cannot email 'grace.hopper(at)example.com': not an email address"

    customer.email = "grace.hopper@example.com"
    customer.save()
    result = boss.redrive(EMAILS_DEAD)
    assert result.moved == 1
    assert work_off(EMAILS).completed == 1

    ((_, new_id),) = result.moved_ids
    lineage = boss.get_lineage(new_id)
    assert [(j.id, j.name, j.state) for j in lineage] == [
        (str(order.confirmation_job_id), EMAILS, "failed"),
        (new_id, EMAILS, "completed"),
    ]
    assert [m.to for m in mail.outbox] == [["grace.hopper@example.com"]]


@pytest.mark.django_db(transaction=True)
def test_loyalty_points_are_added_one_order_at_a_time_per_customer(shop_queues, work_off):
    ada, grace = CustomerFactory(), CustomerFactory()
    orders = [place_order(c, "mug", 1, Decimal("10.00")) for c in (ada, grace, ada, ada, grace)]

    stats = work_off(LOYALTY)

    assert (stats.completed, stats.failed) == (5, 0)
    ada.refresh_from_db()
    grace.refresh_from_db()
    assert (ada.loyalty_points, ada.last_points_order_id) == (30, orders[3].pk)
    assert (grace.loyalty_points, grace.last_points_order_id) == (20, orders[4].pk)


def test_a_loyalty_job_refuses_an_order_older_than_the_last_one_counted(db):
    customer = CustomerFactory()
    older, newer = OrderFactory(customer=customer), OrderFactory(customer=customer)
    add_loyalty_points(job(LOYALTY, {"order_id": newer.pk, "points": 5}))

    with pytest.raises(OutOfOrder, match=f"order {older.pk} arrived after order {newer.pk}"):
        add_loyalty_points(job(LOYALTY, {"order_id": older.pk, "points": 7}))
    customer.refresh_from_db()
    assert customer.loyalty_points == 5


def test_the_sales_report_counts_the_days_orders_and_revenue(db):
    OrderFactory(total=Decimal("10.00"))
    OrderFactory(total=Decimal("2.50"))
    today = timezone.localdate()

    output = build_sales_report(job(REPORTS, {"day": today.isoformat()}))

    assert output == {"day": today.isoformat(), "orders": 2, "revenue": "12.50"}
    report = DailyReport.objects.get(day=today)
    assert (report.orders, report.revenue) == (2, Decimal("12.50"))


def test_the_nightly_report_without_a_day_reports_yesterday(db):
    yesterday = timezone.localdate() - dt.timedelta(days=1)

    output = build_sales_report(job(REPORTS, {"kind": "nightly"}))

    assert output == {"day": yesterday.isoformat(), "orders": 0, "revenue": "0.00"}


def test_a_report_request_while_one_waits_is_dropped_by_the_stately_policy(shop_queues):
    first = request_sales_report("2030-01-01")

    assert first is not None
    assert request_sales_report("2030-01-01") is None
    assert [j.id for j in boss.find_jobs(REPORTS)] == [first]
