"""The Instances page: the processes in the instance registry (pg-boss (Node) instances and
django_pgboss workers and monitors), read-only.

``live`` is judged as pg-boss judges it (not stopped, heard from within three of its own
heartbeats), against the schema's clock, read once per page.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from django_pgboss.admin import job_display
from django_pgboss.admin.model_admins import ReadOnlyAdmin
from django_pgboss.api.instances import InstanceStore, is_live
from django_pgboss.db.context import DatabaseContext
from django_pgboss.models import Instance

# The clock a page's rows are judged by, per thread: a ModelAdmin is one object serving every request.
_page = threading.local()


def queues_text(workers: Any) -> str:
    """The queues a row's ``workers`` entries name, each with its concurrency: ``"emails (4), sms (1)"``."""
    if not isinstance(workers, list):
        return "-"
    shown = [
        f"{entry.get('queue')} ({entry.get('localConcurrency', '?')})"
        for entry in workers
        if isinstance(entry, dict)
    ]
    return ", ".join(shown) or "-"


@admin.register(Instance)
class InstanceAdmin(ReadOnlyAdmin):
    """The instance registry, newest start first."""

    list_display = ["host", "name", "pid", "version", "live", "last_heartbeat", "queues", "started"]
    search_fields = ["host", "name"]
    ordering = ["-started_on", "-id"]
    fields = [
        "id",
        "name",
        "host",
        "pid",
        "version",
        "node_version",
        "application_name",
        "heartbeat_seconds",
        "supervise",
        "schedule",
        "persist_queue_stats",
        "persist_warnings",
        "crash_restarts",
        "started_on",
        "heartbeat_on",
        "stopped_on",
        "workers",
        "metrics",
        "config",
    ]

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # One read of the schema's clock for the whole page, which every row's live is judged by.
        # Kept until this thread's next page: the response renders the rows after this returns.
        _page.now = InstanceStore(DatabaseContext()).database_now()
        return super().changelist_view(request, extra_context)

    def _database_now(self) -> dt.datetime:
        now = getattr(_page, "now", None)
        return now if now is not None else InstanceStore(DatabaseContext()).database_now()

    @admin.display(boolean=True, description="live")
    def live(self, obj: Instance) -> bool:
        return is_live(obj.stopped_on, obj.heartbeat_on, obj.heartbeat_seconds, self._database_now())

    @admin.display(description="last heartbeat", ordering="heartbeat_on")
    def last_heartbeat(self, obj: Instance) -> str:
        return job_display.moment(obj.heartbeat_on)

    @admin.display(description="started", ordering="started_on")
    def started(self, obj: Instance) -> str:
        return job_display.moment(obj.started_on)

    @admin.display(description="queues")
    def queues(self, obj: Instance) -> str:
        return queues_text(obj.workers)
