"""The schedule pages: list (next run, last job), add and edit (with a preview of the next runs
before saving, through boss.schedule()) and delete (boss.unschedule()).

ScheduleAdmin (admin/model_admins.py) serves them, so schedules have their own row on the admin
index; the queue list links here too.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.contrib.admin.models import ADDITION, CHANGE, DELETION
from django.contrib.admin.utils import quote
from django.db import DatabaseError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from django_pgboss.admin import internal_queues
from django_pgboss.admin.job_keys import key_of
from django_pgboss.admin.views.common import log_entry, pretty_json, require_permission
from django_pgboss.api.boss import boss
from django_pgboss.api.schedules import ScheduleStore, send_options
from django_pgboss.exceptions import InvalidSchedule, PgBossError, QueueNotFound
from django_pgboss.models import Schedule
from django_pgboss.recurrence import PREVIEW_DEFAULT_COUNT, Recurrence, read_stored

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

LIST_URL = "admin:pgboss_schedule_changelist"


class ScheduleForm(forms.Form):
    """What boss.schedule() takes; its validation errors come back as this form's errors, under
    the field they name."""

    name = forms.ChoiceField(label="Queue")
    key = forms.CharField(
        required=False,
        widget=forms.TextInput(attrs={"class": "vTextField"}),
        help_text="Tells several schedules of one queue apart.",
    )
    cron = forms.CharField(
        label="Cron or RRULE",
        widget=forms.Textarea(
            attrs={"rows": 3, "cols": 60, "class": "vLargeTextField", "spellcheck": "false"}
        ),
        help_text=(
            "A cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first. "
            "Or an RFC 5545 rule, such as FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17, optionally with a "
            "DTSTART line (and RDATE or EXDATE lines) before it."
        ),
    )
    tz = forms.CharField(
        label="Time zone",
        initial="UTC",
        widget=forms.TextInput(attrs={"class": "vTextField"}),
        help_text="An IANA name, e.g. Europe/Paris.",
    )
    # A field named "data" shadows BaseForm.data only for the type checker: the form metaclass
    # moves declared fields into base_fields.
    data = forms.CharField(  # type: ignore[assignment]
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60, "class": "vLargeTextField"}),
        help_text='The job\'s data, as JSON (e.g. {"kind": "nightly"}); empty for none.',
    )
    missed = forms.ChoiceField(
        choices=[("skip", "skip missed occurrences"), ("once", "send one job for missed occurrences")],
        initial="skip",
    )

    def __init__(self, *args: Any, editing: bool = False, internal: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        queue_field = self.fields["name"]
        assert isinstance(queue_field, forms.ChoiceField)
        # pg-boss's own queues only with ``internal`` (?internal=1), or when the form already
        # names one (a schedule being edited, a ?queue= link), which it must still show.
        names = internal_queues.queue_names(internal=internal, keep=[self.initial.get("name")])
        queue_field.choices = [(n, n) for n in names]
        if editing:
            # Changing the queue or the key would make another schedule, not edit this one.
            self.fields["name"].disabled = True
            self.fields["key"].disabled = True
        self.preview: list[dt.datetime] = []

    def clean_data(self) -> Any:
        # A CharField, not forms.JSONField: that one shows an empty answer back as "null".
        text = self.cleaned_data["data"].strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
        except RecursionError:
            raise forms.ValidationError("Not storable: the JSON is nested too deeply to read.") from None

    def clean(self) -> dict[str, Any]:
        values = super().clean() or {}
        if "cron" in values and "tz" in values:
            # Judged as schedule() judges it, so a preview is never shown for what cannot be saved.
            try:
                Recurrence.parse(values["cron"], values["tz"])
                self.preview = boss.preview_schedule(
                    values["cron"], tz=values["tz"], count=PREVIEW_DEFAULT_COUNT
                )
            except InvalidSchedule as exc:
                self.add_error("tz" if exc.field == "tz" else "cron", str(exc))
        return values


def _schedule_error_field(exc: Exception) -> str | None:
    if isinstance(exc, InvalidSchedule):
        return "tz" if exc.field == "tz" else "cron"
    lowered = str(exc).lower()
    if lowered.startswith("key "):
        return "key"
    if "missed" in lowered:
        return "missed"
    if "key" in lowered:
        return "key"
    if "data" in lowered:
        return "data"
    return None


def _next_run(schedule: Any, now: dt.datetime) -> tuple[dt.datetime | None, str]:
    """The schedule's next occurrence after ``now`` as the timekeeper reads the row, or why not."""
    try:
        occurrence = read_stored(schedule.cron, schedule.timezone, schedule.kind).next_after(now)
    except InvalidSchedule as exc:
        return None, f"cannot be evaluated: {exc}"
    return occurrence, "" if occurrence is not None else "none left"


def _schedule_row(schedule: Any, now: dt.datetime) -> dict[str, Any]:
    # The stored options repeat the time zone and key (pg-boss keeps them there too); what is
    # left beside "missed" are the options each job is sent with.
    options = {k: v for k, v in (schedule.options or {}).items() if k not in {"tz", "key", "missed"}}
    next_run, problem = _next_run(schedule, now)
    query = f"?name={quote(schedule.name)}&key={quote(schedule.key)}"
    return {
        "schedule": schedule,
        "data": pretty_json(schedule.data),
        "missed": (schedule.options or {}).get("missed", "skip"),
        "options": pretty_json(options or None),
        "next_run": next_run,
        "next_run_problem": problem,
        "last_job_url": (
            # Addressed by (queue, id), as every job page is: the job went to the schedule's queue.
            reverse("admin:pgboss_job_change", args=[quote(key_of(schedule.name, schedule.last_job_id))])
            if schedule.last_job_id
            else None
        ),
        "edit_query": query,
    }


def _context(model_admin: ModelAdmin, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
    return {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "opts": Schedule._meta,
        **extra,
    }


def schedule_list_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Every schedule with its next run and last job, links to add and edit, buttons to delete."""
    require_permission(request, "view_schedule")
    now = ScheduleStore(boss.context).database_now()
    context = _context(
        model_admin,
        request,
        "Schedules",
        schedules=[_schedule_row(s, now) for s in ScheduleStore(boss.context).all_schedules()],
        now=now,
        can_add=request.user.has_perm("pgboss.add_schedule"),
        can_change=request.user.has_perm("pgboss.change_schedule"),
        can_delete=request.user.has_perm("pgboss.delete_schedule"),
    )
    return TemplateResponse(request, "admin/pgboss/schedule_list.html", context)


def schedule_add_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Create (or replace) a schedule through boss.schedule(); "Preview" shows the next runs first."""
    require_permission(request, "add_schedule")
    form = ScheduleForm(
        request.POST or None,
        initial={"name": request.GET.get("queue")},
        internal=internal_queues.asked_for(request.GET),
    )
    return _schedule_form(model_admin, request, form, None)


def schedule_change_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Edit the schedule (name, key) from the query string: boss.schedule() replaces it."""
    require_permission(request, "change_schedule")
    # From the query string on both GET and POST: the form's queue and key are disabled fields,
    # which a browser does not submit.
    name, key = request.GET.get("name", ""), request.GET.get("key", "")
    try:
        found = boss.get_schedule(name, key) if name else None
    except PgBossError:  # a crafted name no queue could have
        found = None
    if found is None:
        messages.error(request, f"No schedule {name!r} with key {key!r}.")
        return HttpResponseRedirect(reverse(LIST_URL))
    initial = {
        "name": found.name,
        "key": found.key,
        "cron": found.cron,
        "tz": found.timezone,
        "data": pretty_json(found.data),
        "missed": (found.options or {}).get("missed", "skip"),
    }
    form = ScheduleForm(request.POST or None, initial=initial, editing=True)
    if request.method == "GET":
        form.preview = _preview_or_nothing(found.cron, found.timezone)
    return _schedule_form(model_admin, request, form, found)


def _preview_or_nothing(expression: str, timezone: str) -> list[dt.datetime]:
    try:
        return boss.preview_schedule(expression, tz=timezone, count=PREVIEW_DEFAULT_COUNT)
    except InvalidSchedule:
        return []


def _schedule_form(
    model_admin: ModelAdmin, request: HttpRequest, form: ScheduleForm, found: Any
) -> HttpResponse:
    previewing = "_preview" in request.POST
    if request.method == "POST" and form.is_valid() and not previewing:
        values = form.cleaned_data
        # Existing schedule-specific options (priority, retry_limit...) written through the API
        # are not on this form; an edit keeps them as they were.
        kept = {} if found is None else _send_options_of(found)
        try:
            # A savepoint: should the database refuse a value the API let through, the request's
            # transaction (ATOMIC_REQUESTS) stays usable and the form says why.
            with transaction.atomic(using=boss.context.using):
                boss.schedule(
                    values["name"],
                    values["cron"],
                    values["data"],
                    tz=values["tz"],
                    key=values["key"],
                    missed=values["missed"],
                    **kept,
                )
        except QueueNotFound as exc:
            form.add_error("name", str(exc))
        except (PgBossError, ValueError, TypeError) as exc:
            # The API's refusals of bad input (package errors, or ValueError / TypeError).
            form.add_error(_schedule_error_field(exc), str(exc))
        except RecursionError:
            form.add_error("data", "Not storable: the JSON is nested too deeply.")
        except DatabaseError as exc:
            form.add_error(None, f"The database refused this schedule: {exc}")
        else:
            text = f"{values['name']} {values['key']}".rstrip()
            log_entry(
                request,
                Schedule,
                f"{values['name']}\t{values['key']}",
                text,
                ADDITION if found is None else CHANGE,
                f"schedule {values['cron']!r} in {values['tz']}",
            )
            messages.success(request, f"Scheduled {text!r}: {values['cron']} ({values['tz']}).")
            return HttpResponseRedirect(reverse(LIST_URL))
    zone = request.POST.get("tz") or (found.timezone if found is not None else "UTC")
    context = _context(
        model_admin,
        request,
        "Add schedule" if found is None else "Change schedule",
        form=form,
        found=found,
        preview=_preview_rows(form.preview, zone),
        preview_count=PREVIEW_DEFAULT_COUNT,
        previewing=previewing,
        **_internal_toggle(request),
    )
    return TemplateResponse(request, "admin/pgboss/schedule_form.html", context)


def _internal_toggle(request: HttpRequest) -> dict[str, Any]:
    """The form's link that shows (or hides again) pg-boss's internal queues among the targets."""
    query = request.GET.copy()
    shown = internal_queues.asked_for(query)
    if shown:
        query.pop(internal_queues.PARAMETER, None)
    else:
        query[internal_queues.PARAMETER] = "1"
    return {"show_internal": shown, "internal_url": request.path + (f"?{query.urlencode()}" if query else "")}


def _send_options_of(found: Any) -> dict[str, Any]:
    return {k: v for k, v in send_options(found.options or {}).items() if v is not None}


def _preview_rows(occurrences: list[dt.datetime], timezone: str) -> list[dict[str, str]]:
    zone: dt.tzinfo
    try:
        zone = Recurrence.parse("* * * * *", timezone).zone
    except InvalidSchedule:
        zone = dt.UTC
    return [
        {
            "local": o.astimezone(zone).strftime("%a %Y-%m-%d %H:%M:%S %Z"),
            "utc": o.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
        }
        for o in occurrences
    ]


def schedule_delete_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Ask, then (on POST) remove a schedule through boss.unschedule()."""
    require_permission(request, "delete_schedule")
    source = request.POST if request.method == "POST" else request.GET
    name, key = source.get("name", ""), source.get("key", "")
    listing = reverse(LIST_URL)
    found = [s for s in ScheduleStore(boss.context).all_schedules() if s.name == name and s.key == key]
    if not found:
        messages.error(request, f"No schedule {name!r} with key {key!r}.")
        return HttpResponseRedirect(listing)
    if request.method == "POST":
        boss.unschedule(name, key)
        text = f"{name} {key}".rstrip()
        log_entry(request, Schedule, f"{name}\t{key}", text, DELETION, "unschedule")
        messages.success(request, f"Deleted the schedule {text!r}.")
        return HttpResponseRedirect(listing)
    context = _context(model_admin, request, "Delete schedule", schedule=found[0])
    return TemplateResponse(request, "admin/pgboss/schedule_confirm_delete.html", context)
