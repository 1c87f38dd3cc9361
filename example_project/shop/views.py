"""The shop's one page: a form that places an order (and queues its jobs in the same transaction)."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from example_project.shop.models import Customer
from example_project.shop.services import place_order

PRICES = {"teapot": Decimal("24.00"), "kettle": Decimal("39.90"), "mug": Decimal("8.50")}


class OrderForm(forms.Form):
    customer = forms.ModelChoiceField(queryset=Customer.objects.order_by("name"))
    item = forms.ChoiceField(choices=[(item, f"{item} ({price} EUR)") for item, price in PRICES.items()])
    quantity = forms.IntegerField(min_value=1, max_value=20, initial=1)


def order_view(request: HttpRequest) -> HttpResponse:
    """GET: the order form. POST: place the order; 201 with its id and confirmation job id as JSON."""
    form = OrderForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        item = form.cleaned_data["item"]
        order = place_order(form.cleaned_data["customer"], item, form.cleaned_data["quantity"], PRICES[item])
        return JsonResponse(
            {
                "order": order.pk,
                "total": str(order.total),
                "confirmation_job": str(order.confirmation_job_id),
            },
            status=201,
        )
    status = 400 if request.method == "POST" else 200
    return render(request, "shop/order_form.html", {"form": form}, status=status)
