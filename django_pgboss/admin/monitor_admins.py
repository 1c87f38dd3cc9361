"""The monitor's records in the admin: its queue stats snapshots and the warnings it kept.

Both are lists of rows the monitor writes many of a minute (a snapshot per queue per pass, a
warning per check that trips), so their times are shown to the second, with the zone
(job_display.moment()): to the minute, as Django's DATETIME_FORMAT shows them, two passes of one
minute read as duplicates. The warnings list says how to turn persistence on while it is off,
since then it stays empty whatever the monitor finds.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from django_pgboss.admin import job_display
from django_pgboss.admin.model_admins import ReadOnlyAdmin
from django_pgboss.conf import pgboss_settings
from django_pgboss.models import QueueStats, Warning


@admin.register(QueueStats)
class QueueStatsAdmin(ReadOnlyAdmin):
    """The queue stats snapshots (PGBOSS["PERSIST_QUEUE_STATS"]), read-only."""

    list_display = ["name", "captured", "queued_count", "active_count", "completed_delta", "failed_delta"]
    list_filter = ["name"]

    class Media:
        css = {"all": ["pgboss/admin.css"]}

    @admin.display(description="captured on", ordering="captured_on")
    def captured(self, obj: QueueStats) -> str:
        return job_display.moment(obj.captured_on)

    # The snapshot's page: every column, its times to the second as on the list.
    readonly_fields = [
        {"captured_on": "captured", "delta_on": "delta"}.get(field.name, field.name)
        for field in QueueStats._meta.concrete_fields
    ]
    fields = list(readonly_fields)

    @admin.display(description="delta on")
    def delta(self, obj: QueueStats) -> str:
        return job_display.moment(obj.delta_on)


@admin.register(Warning)
class WarningAdmin(ReadOnlyAdmin):
    """Warnings the monitor kept (PGBOSS["PERSIST_WARNINGS"]), read-only."""

    list_display = ["created", "type", "message"]
    list_filter = ["type"]
    readonly_fields = ["created", "pretty_data"]
    fields = ["id", "type", "message", "created", "pretty_data"]
    change_list_template = "admin/pgboss/warning/change_list.html"

    class Media:
        css = {"all": ["pgboss/admin.css"]}

    @admin.display(description="created on", ordering="created_on")
    def created(self, obj: Warning) -> str:
        return job_display.moment(obj.created_on)

    @admin.display(description="data")
    def pretty_data(self, obj: Warning) -> str:
        return job_display.output_block(obj.data)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # Read at each request: the setting may change (override_settings, a deploy).
        extra = {**(extra_context or {}), "persist_warnings": pgboss_settings.PERSIST_WARNINGS}
        return super().changelist_view(request, extra)
