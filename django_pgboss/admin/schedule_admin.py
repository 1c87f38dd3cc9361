"""The admin index's Schedules row and the schedule pages' URLs (the pages: admin/views/schedules.py)."""

from __future__ import annotations

import functools
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import path

from django_pgboss.admin.views import schedules
from django_pgboss.models import Schedules


@admin.register(Schedules)
class ScheduleAdmin(admin.ModelAdmin):
    """Schedules, on the admin index beside queues and jobs: the list with each one's next run
    and last job, add and change forms that preview the next runs, and delete. Every write goes
    through boss.schedule() / boss.unschedule() (admin/views/schedules.py), never the ORM.

    Registered for :class:`~django_pgboss.models.Schedules`, the admin's stand-in model (Django's
    admin refuses the composite key of ``Schedule``): get_urls() replaces every ORM-backed view,
    so the model only names the index row and the URLs.
    """

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("pgboss.view_schedule") or self.has_change_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("pgboss.add_schedule")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("pgboss.change_schedule")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("pgboss.delete_schedule")

    def get_urls(self) -> list:
        # The pages address a schedule by (name, key) in the query string rather than by the
        # composite primary key in the path, and none of them is Django's ORM-backed view. Each
        # page has two names: the one the admin index reverses (from the stand-in model's name,
        # pgboss_schedules_*) and pgboss_schedule_*, which the templates, the queue pages and
        # links written before the stand-in model use.
        info = self.opts.app_label, self.opts.model_name
        wrap = self.admin_site.admin_view
        pages = [
            ("", "changelist", schedules.schedule_list_view),
            ("add/", "add", schedules.schedule_add_view),
            ("change/", "change", schedules.schedule_change_view),
            ("delete/", "delete", schedules.schedule_delete_view),
        ]
        urls = []
        for route, page, view in pages:
            served = wrap(functools.partial(view, self))
            urls.append(path(route, served, name=f"{info[0]}_{info[1]}_{page}"))
            urls.append(path(route, served, name=f"{info[0]}_schedule_{page}"))
        return urls
