"""The schedule pages: list, add (boss.schedule()) and delete (boss.unschedule())."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import messages
from django.contrib.admin.models import ADDITION, DELETION
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from django_pgboss.admin.views.common import log_entry, pretty_json, require_permission
from django_pgboss.api.boss import boss
from django_pgboss.exceptions import PgBossError, QueueNotFound
from django_pgboss.models import Queue, Schedule

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


class ScheduleForm(forms.Form):
    """What boss.schedule() takes; its validation errors come back as this form's errors."""

    name = forms.ChoiceField(label="Queue")
    key = forms.CharField(required=False, help_text="Tells several schedules of one queue apart.")
    cron = forms.CharField(help_text="5 fields (minute hour day month weekday), or 6 with seconds first.")
    tz = forms.CharField(label="Time zone", initial="UTC", help_text="An IANA name, e.g. Europe/Paris.")
    # Named as boss.schedule()'s argument. Django's form metaclass moves declared fields off the
    # class, so the field does not shadow BaseForm.data (the bound data) as mypy believes.
    data = forms.CharField(  # type: ignore[assignment]
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 40}),
        help_text='The job\'s data, as JSON (e.g. {"kind": "nightly"}); empty for none.',
    )
    missed = forms.ChoiceField(
        choices=[("skip", "skip missed occurrences"), ("once", "send one job for missed occurrences")],
        initial="skip",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        name = cast(forms.ChoiceField, self.fields["name"])  # declared above
        name.choices = [(n, n) for n in Queue.objects.values_list("name", flat=True)]

    def clean_data(self) -> Any:
        # A CharField, not forms.JSONField: that one shows an empty answer back as "null".
        text = self.cleaned_data["data"].strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}.") from None


def _schedule_error_field(message: str) -> str | None:
    lowered = message.lower()
    if "time zone" in lowered or lowered.startswith("tz "):
        return "tz"
    if "cron" in lowered:
        return "cron"
    if "missed" in lowered:
        return "missed"
    return None


def _schedule_row(schedule: Any) -> dict[str, Any]:
    # The stored options repeat the time zone and key (pg-boss keeps them there too); what is
    # left beside "missed" are the options each job is sent with.
    options = {k: v for k, v in (schedule.options or {}).items() if k not in {"tz", "key", "missed"}}
    return {
        "schedule": schedule,
        "data": pretty_json(schedule.data),
        "missed": (schedule.options or {}).get("missed", "skip"),
        "options": pretty_json(options or None),
    }


def schedule_list_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Every schedule, with links to add one and buttons to delete each."""
    require_permission(request, "view_schedule")
    schedules = boss.get_schedules()
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Schedules",
        "opts": model_admin.model._meta,
        "schedules": [_schedule_row(s) for s in schedules],
        "can_add": request.user.has_perm("pgboss.add_schedule"),
        "can_delete": request.user.has_perm("pgboss.delete_schedule"),
    }
    return TemplateResponse(request, "admin/pgboss/schedule_list.html", context)


def schedule_add_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Create (or replace) a schedule through boss.schedule()."""
    require_permission(request, "add_schedule")
    form = ScheduleForm(request.POST or None, initial={"name": request.GET.get("queue")})
    if request.method == "POST" and form.is_valid():
        values = form.cleaned_data
        try:
            boss.schedule(
                values["name"],
                values["cron"],
                values["data"],
                tz=values["tz"],
                key=values["key"],
                missed=values["missed"],
            )
        except QueueNotFound as exc:
            form.add_error("name", str(exc))
        except PgBossError as exc:
            form.add_error(_schedule_error_field(str(exc)), str(exc))
        else:
            text = f"{values['name']} {values['key']}".rstrip()
            log_entry(
                request,
                Schedule,
                f"{values['name']}\t{values['key']}",
                text,
                ADDITION,
                f"schedule {values['cron']!r} in {values['tz']}",
            )
            messages.success(request, f"Scheduled {text!r}: {values['cron']} ({values['tz']}).")
            return HttpResponseRedirect(reverse("admin:pgboss_queue_schedules"))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Add schedule",
        "opts": model_admin.model._meta,
        "form": form,
    }
    return TemplateResponse(request, "admin/pgboss/schedule_form.html", context)


def schedule_delete_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Ask, then (on POST) remove a schedule through boss.unschedule()."""
    require_permission(request, "delete_schedule")
    source = request.POST if request.method == "POST" else request.GET
    name, key = source.get("name", ""), source.get("key", "")
    listing = reverse("admin:pgboss_queue_schedules")
    found = [s for s in boss.get_schedules() if s.name == name and s.key == key]
    if not found:
        messages.error(request, f"No schedule {name!r} with key {key!r}.")
        return HttpResponseRedirect(listing)
    if request.method == "POST":
        boss.unschedule(name, key)
        text = f"{name} {key}".rstrip()
        log_entry(request, Schedule, f"{name}\t{key}", text, DELETION, "unschedule")
        messages.success(request, f"Deleted the schedule {text!r}.")
        return HttpResponseRedirect(listing)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Delete schedule",
        "opts": model_admin.model._meta,
        "schedule": found[0],
    }
    return TemplateResponse(request, "admin/pgboss/schedule_confirm_delete.html", context)
