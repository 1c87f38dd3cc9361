"""The shop's models in the admin, beside pg-boss's queues and jobs."""

from __future__ import annotations

from django.contrib import admin

from example_project.shop.models import Customer, DailyReport, Order


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ["name", "email", "loyalty_points"]
    search_fields = ["name", "email"]


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "customer", "item", "quantity", "total", "placed_at", "confirmation_sent_at"]
    list_select_related = ["customer"]
    raw_id_fields = ["customer"]


@admin.register(DailyReport)
class DailyReportAdmin(admin.ModelAdmin):
    list_display = ["day", "orders", "revenue", "generated_at"]
