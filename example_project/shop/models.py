"""The shop's own tables: customers, their orders, and the nightly sales reports."""

from __future__ import annotations

from django.db import models


class Customer(models.Model):
    """Someone who orders; their loyalty points are added by a job, strictly in order."""

    name = models.CharField(max_length=100)
    email = models.CharField(max_length=254, help_text="where order confirmations go")
    loyalty_points = models.PositiveIntegerField(default=0)
    #: The last order whose points were added: the loyalty job refuses to add an older one after it.
    last_points_order = models.ForeignKey(
        "Order", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


class Order(models.Model):
    """An order; placing it sends its confirmation email, loyalty and warehouse jobs in one transaction."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    item = models.CharField(max_length=100)
    quantity = models.PositiveIntegerField(default=1)
    total = models.DecimalField(max_digits=10, decimal_places=2)
    placed_at = models.DateTimeField(auto_now_add=True)
    #: The pg-boss job that sends the confirmation email, and when it was sent.
    confirmation_job_id = models.UUIDField(null=True, blank=True)
    confirmation_sent_at = models.DateTimeField(null=True, blank=True)
    #: Set by the warehouse task (through the Django tasks backend) once the pick list is out.
    sent_to_warehouse_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-placed_at"]

    def __str__(self) -> str:
        return f"order {self.pk}: {self.quantity} x {self.item} for {self.customer.name}"


class DailyReport(models.Model):
    """One day's sales, written by the nightly report job."""

    day = models.DateField(unique=True)
    orders = models.PositiveIntegerField()
    revenue = models.DecimalField(max_digits=12, decimal_places=2)
    generated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day"]

    def __str__(self) -> str:
        return f"{self.day}: {self.orders} orders, {self.revenue}"
