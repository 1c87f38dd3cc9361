"""Placing an order: the order and its jobs commit together, or neither does."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import transaction
from django.urls import reverse

from django_pgboss.models import Job
from example_project.shop.factories import CustomerFactory
from example_project.shop.models import Order
from example_project.shop.queues import EMAILS, LOYALTY, WAREHOUSE
from example_project.shop.services import place_order

pytestmark = pytest.mark.usefixtures("shop_queues")


def test_an_order_is_saved_with_its_email_loyalty_and_warehouse_jobs():
    customer = CustomerFactory()
    order = place_order(customer, "mug", 3, Decimal("8.50"))

    assert order.total == Decimal("25.50")
    email = Job.objects.get(name=EMAILS)
    assert (str(email.id), email.data, email.priority) == (
        str(order.confirmation_job_id),
        {"order_id": order.pk},
        3,
    )
    loyalty = Job.objects.get(name=LOYALTY)
    assert (loyalty.data, loyalty.singleton_key) == (
        {"order_id": order.pk, "points": 25},
        f"customer-{customer.pk}",
    )
    warehouse = Job.objects.get(name=WAREHOUSE)
    assert warehouse.data["task"] == "example_project.shop.tasks.send_to_warehouse"
    assert warehouse.data["args"] == [order.pk]


def test_an_order_whose_transaction_rolls_back_leaves_no_job():
    customer = CustomerFactory()
    with pytest.raises(RuntimeError, match="card declined"), transaction.atomic():
        place_order(customer, "teapot", 1, Decimal("24.00"))
        raise RuntimeError("card declined")

    assert not Order.objects.exists()
    assert not Job.objects.filter(name__in=[EMAILS, LOYALTY, WAREHOUSE]).exists()


def test_the_order_page_places_an_order_and_answers_with_its_confirmation_job(client):
    customer = CustomerFactory()
    response = client.post(reverse("shop:order"), {"customer": customer.pk, "item": "kettle", "quantity": 2})

    assert response.status_code == 201
    order = Order.objects.get()
    assert response.json() == {
        "order": order.pk,
        "total": "79.80",
        "confirmation_job": str(order.confirmation_job_id),
    }
    assert Job.objects.filter(id=order.confirmation_job_id, name=EMAILS, state="created").exists()


def test_the_order_page_refuses_an_unknown_item_and_sends_nothing(client):
    customer = CustomerFactory()
    response = client.post(reverse("shop:order"), {"customer": customer.pk, "item": "anvil", "quantity": 1})

    assert response.status_code == 400
    assert "anvil is not one of the available choices" in response.text
    assert not Order.objects.exists()
    assert not Job.objects.filter(name=EMAILS).exists()


def test_the_order_page_shows_a_form_with_the_customers(client):
    customer = CustomerFactory(name="Ada Lovelace")
    response = client.get(reverse("shop:order"))

    assert response.status_code == 200
    assert (
        f'<option value="{customer.pk}">Ada Lovelace &lt;ada.lovelace@example.com&gt;</option>'
        in response.text
    )
