"""factory-boy factories for the shop's models (tests and the demo build customers with them)."""

from __future__ import annotations

from decimal import Decimal

import factory

from example_project.shop.models import Customer, Order


def email_for(name: str) -> str:
    """ada.lovelace@example.com for "Ada Lovelace" (Faker's names may carry accents and apostrophes)."""
    local = "".join(c for c in name.lower().replace(" ", ".") if c.isascii() and (c.isalnum() or c == "."))
    return f"{local.strip('.') or 'customer'}@example.com"


class CustomerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Customer

    name = factory.Faker("name")
    email = factory.LazyAttribute(lambda o: email_for(o.name))


class OrderFactory(factory.django.DjangoModelFactory):
    """An order row only: use services.place_order() for an order with its jobs."""

    class Meta:
        model = Order

    customer = factory.SubFactory(CustomerFactory)
    item = factory.Iterator(["teapot", "kettle", "mug", "tea towel", "sugar bowl"])
    quantity = 1
    total = Decimal("12.50")
