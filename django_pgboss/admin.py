"""Read-only admin pages over pg-boss's tables.

Operators browse queues, jobs, stats and warnings here. Nothing is added, changed or deleted
through these pages: writes go through ``Boss`` (admin actions that do so arrive with the job API).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from django_pgboss.models import Job, Queue, QueueStats, Warning


class ReadOnlyAdmin(admin.ModelAdmin):
    """A ModelAdmin that shows rows and never writes them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Queue)
class QueueAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "policy",
        "partition",
        "queued_count",
        "active_count",
        "failed_count",
        "dead_letter",
    ]
    list_filter = ["policy", "partition"]
    search_fields = ["name"]


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "state", "priority", "retry_count", "created_on", "completed_on"]
    list_filter = ["state", "name"]
    search_fields = ["=id", "singleton_key"]
    date_hierarchy = "created_on"


@admin.register(QueueStats)
class QueueStatsAdmin(ReadOnlyAdmin):
    list_display = ["name", "captured_on", "queued_count", "active_count", "completed_delta", "failed_delta"]
    list_filter = ["name"]


@admin.register(Warning)
class WarningAdmin(ReadOnlyAdmin):
    list_display = ["created_on", "type", "message"]
    list_filter = ["type"]
