"""The admin's own pages: queue charts, the redrive confirmation, job lineage and schedules.

admin.py wires these into the ModelAdmins; everything that changes a job or a schedule goes
through ``Boss`` (the models are read-only), checks its permission first, accepts only POST for
writes (the admin's CSRF middleware guards every POST), and leaves an admin LogEntry behind.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from django_pgboss.admin import charts
from django_pgboss.api.boss import boss
from django_pgboss.exceptions import PgBossError, QueueNotFound
from django_pgboss.models import Job as JobRow
from django_pgboss.models import Queue, Schedule
from django_pgboss.records import Job, StatsPoint

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

# -- chart ranges -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChartRange:
    """A time range the queue page offers, and the bucket width its charts use."""

    key: str
    label: str
    span: dt.timedelta
    bucket_seconds: int


#: The ranges offered, in the order the picker shows them. The buckets give 48 to 60 points, one
#: monitor pass (60 s by default) per point on the shortest range.
CHART_RANGES = {
    r.key: r
    for r in (
        # A monitor passes once a minute by default; a shorter interval (a demo, a busy queue
        # being watched) fills 15-second buckets.
        ChartRange("15m", "15 minutes", dt.timedelta(minutes=15), 15),
        ChartRange("1h", "1 hour", dt.timedelta(hours=1), 60),
        ChartRange("6h", "6 hours", dt.timedelta(hours=6), 6 * 60),
        ChartRange("24h", "24 hours", dt.timedelta(hours=24), 30 * 60),
        ChartRange("7d", "7 days", dt.timedelta(days=7), 3 * 60 * 60),
    )
}
DEFAULT_RANGE = "1h"
#: The changelist's throughput window: the last hour, in 5-minute buckets for the sparkline.
THROUGHPUT_WINDOW = dt.timedelta(hours=1)
THROUGHPUT_BUCKET_SECONDS = 300


def pick_range(request: HttpRequest) -> ChartRange:
    """The range the request asks for (?range=), or the default with a message when it is not offered."""
    key = request.GET.get("range", DEFAULT_RANGE)
    if key in CHART_RANGES:
        return CHART_RANGES[key]
    offered = ", ".join(CHART_RANGES)
    messages.warning(
        request,
        f"The chart range {key!r} is not offered (choose one of {offered}); "
        f"showing the last {CHART_RANGES[DEFAULT_RANGE].label}.",
    )
    return CHART_RANGES[DEFAULT_RANGE]


def bucket_label(seconds: int) -> str:
    """A bucket's width as the charts name it: "15 s", "1 min", "3 h"."""
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h"


def per_minute(points: Sequence[StatsPoint], counter: str) -> float | None:
    """A counter's rate per minute over ``points``: sum(delta) / sum(delta_seconds), as pg-boss charts it.

    Only points that a counting pass covered take part; None when there is none.
    """
    counted = [p for p in points if getattr(p, counter) is not None and p.delta_seconds]
    seconds = sum(p.delta_seconds or 0 for p in counted)
    if not seconds:
        return None
    return 60 * sum(getattr(p, counter) for p in counted) / seconds


@dataclass(frozen=True, slots=True)
class Throughput:
    """A queue's completions over the changelist's window: the rate and the per-bucket counts."""

    completed_per_minute: float | None
    completed: list[int | None]


def queue_throughput(name: str, now: dt.datetime | None = None) -> Throughput:
    """Completed jobs per minute over the last hour, and per 5-minute bucket for the sparkline."""
    now = now or timezone.now()
    points = boss.get_queue_stats(
        name, start=now - THROUGHPUT_WINDOW, end=now, bucket_seconds=THROUGHPUT_BUCKET_SECONDS
    )
    points = list(reversed(points))
    return Throughput(per_minute(points, "completed_delta"), [p.completed_delta for p in points])


def queue_charts_context(request: HttpRequest, name: str) -> dict[str, Any]:
    """What the queue page shows above its settings: the range picker, the rates and two charts."""
    chosen = pick_range(request)
    end = timezone.now()
    start = end - chosen.span
    points = list(
        reversed(boss.get_queue_stats(name, start=start, end=end, bucket_seconds=chosen.bucket_seconds))
    )
    bucket = bucket_label(chosen.bucket_seconds)
    empty = "No history in this range yet: the monitor (manage.py pgboss_monitor) records it."
    throughput_chart = charts.line_chart(
        [
            charts.Series("Created", [(p.captured_on, p.created_delta) for p in points], charts.BLUE),
            charts.Series("Completed", [(p.captured_on, p.completed_delta) for p in points], charts.GREEN),
            charts.Series("Failed", [(p.captured_on, p.failed_delta) for p in points], charts.VERMILLION),
        ],
        start=start,
        end=end,
        title=f"Jobs created, completed and failed per {bucket}, last {chosen.label}",
        y_label=f"jobs per {bucket}",
        empty_message=empty,
    )
    gauge_chart = charts.line_chart(
        [
            charts.Series("Queued", [(p.captured_on, p.queued_count) for p in points], charts.BLUE),
            charts.Series("Active", [(p.captured_on, p.active_count) for p in points], charts.PURPLE),
            charts.Series("Failed", [(p.captured_on, p.failed_count) for p in points], charts.VERMILLION),
        ],
        start=start,
        end=end,
        title=f"Jobs queued, active and failed (largest count per {bucket}), last {chosen.label}",
        y_label="jobs",
        empty_message=empty,
    )
    rates = [
        (label, per_minute(points, counter))
        for label, counter in (
            ("Created", "created_delta"),
            ("Completed", "completed_delta"),
            ("Failed", "failed_delta"),
        )
    ]
    return {
        "chart_ranges": list(CHART_RANGES.values()),
        "chart_range": chosen,
        "chart_bucket": bucket,
        "chart_timezone": timezone.get_current_timezone_name(),
        "chart_points": list(reversed(points)),
        "throughput_chart": throughput_chart,
        "gauge_chart": gauge_chart,
        "rates": [(label, None if rate is None else round(rate, 2)) for label, rate in rates],
    }


# -- logging ------------------------------------------------------------------------------------


def log_entry(request: HttpRequest, model: type, object_id: str, text: str, flag: int, message: str) -> None:
    """One admin LogEntry for an object that may no longer exist (or has a composite key)."""
    LogEntry.objects.create(
        user_id=request.user.pk,
        content_type=ContentType.objects.get_for_model(model, for_concrete_model=False),
        object_id=object_id,
        object_repr=text[:200],
        action_flag=flag,
        change_message=message,
    )


# -- job actions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobVerb:
    """A Boss settle method the job list offers as an action."""

    method: str
    done: str
    applies_to: str


JOB_VERBS = {
    "retry": JobVerb("retry", "Retried", "failed jobs"),
    "cancel": JobVerb("cancel", "Cancelled", "jobs that have not finished"),
    "resume": JobVerb("resume", "Resumed", "cancelled jobs"),
    "delete": JobVerb("delete_job", "Deleted", "jobs in any state"),
}


def run_job_verb(model_admin: ModelAdmin, request: HttpRequest, queryset: Any, verb: str) -> None:
    """Apply one Boss method to the selected jobs, queue by queue, then report and log it."""
    action = JOB_VERBS[verb]
    jobs = list(queryset)
    by_queue: dict[str, list[str]] = defaultdict(list)
    for job in jobs:
        by_queue[job.name].append(str(job.id))
    if verb == "delete":
        # Logged first: the rows are gone afterwards.
        model_admin.log_deletions(request, jobs)
    done = 0
    for name, ids in sorted(by_queue.items()):
        try:
            done += getattr(boss, action.method)(name, ids)
        except PgBossError as exc:
            messages.error(request, f"Could not {verb} the jobs of queue {name!r}: {exc}")
    if verb != "delete":
        for job in jobs:
            model_admin.log_change(
                request, job, f"{verb} through django_pgboss ({done} of {len(jobs)} changed)"
            )
    level = messages.SUCCESS if done == len(jobs) else messages.WARNING
    rest = (
        ""
        if done == len(jobs)
        else f"; {verb} applies only to {action.applies_to}, so the others are unchanged"
    )
    messages.add_message(request, level, f"{action.done} {done} of {len(jobs)} selected jobs{rest}.")


# -- redrive ------------------------------------------------------------------------------------


def redrive_view(model_admin: ModelAdmin, request: HttpRequest, queryset: Any) -> HttpResponse | None:
    """The redrive action: a confirmation page with the preview, then the redrive itself.

    The selected jobs must be dead-letter copies (they name their source queue); they are grouped
    by the dead-letter queue holding them. The first POST shows, per dead-letter queue, where the
    jobs would go, how many, and how many cannot be routed; confirming (``post=yes``) redrives
    them and reports how many moved and how many were failed in place as conflicts.
    """
    jobs = list(queryset)
    strays = [job for job in jobs if job.source_id is None]
    if strays:
        messages.error(
            request,
            f"{len(strays)} selected job(s) are not dead-letter copies (they came from no other queue): "
            f"{', '.join(str(j.id) for j in strays[:5])}. Nothing was redriven.",
        )
        return None
    destination = request.POST.get("destination") or None
    by_queue: dict[str, list[str]] = defaultdict(list)
    for job in jobs:
        by_queue[job.name].append(str(job.id))
    if request.POST.get("post") == "yes":
        return _redrive(model_admin, request, jobs, by_queue, destination)
    previews = []
    for name, ids in sorted(by_queue.items()):
        try:
            preview = boss.preview_redrive(name, destination=destination, ids=ids)
        except PgBossError as exc:
            messages.error(request, f"Cannot redrive from {name!r}: {exc}. Nothing was redriven.")
            return None
        previews.append({"queue": name, "ids": ids, "preview": preview})
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Redrive dead-letter jobs",
        "opts": model_admin.model._meta,
        "previews": previews,
        "jobs": jobs,
        "destination": destination or "",
        "queues": list(Queue.objects.values_list("name", flat=True)),
        "action_checkbox_name": "_selected_action",
        "selected_ids": [str(job.id) for job in jobs],
        "movable": sum(p["preview"].total - p["preview"].unroutable for p in previews),
    }
    return TemplateResponse(request, "admin/pgboss/redrive_confirmation.html", context)


def _redrive(
    model_admin: ModelAdmin,
    request: HttpRequest,
    jobs: list[JobRow],
    by_queue: dict[str, list[str]],
    destination: str | None,
) -> None:
    moved = conflicted = waiting = 0
    outcome: dict[str, str] = {}
    redriven: list[JobRow] = []
    for name, ids in sorted(by_queue.items()):
        try:
            result = boss.redrive(name, destination=destination, ids=ids, limit=len(ids))
        except PgBossError as exc:
            messages.error(request, f"Cannot redrive from {name!r}: {exc}. Nothing was redriven from it.")
            continue
        redriven += [job for job in jobs if job.name == name]
        moved += result.moved
        conflicted += result.conflicted
        waiting += result.waiting
        outcome.update({old: f"moved, now job {new}" for old, new in result.moved_ids})
        outcome.update(dict.fromkeys(result.conflicted_ids, "conflict: failed in place"))
        outcome.update(dict.fromkeys(result.waiting_ids, "waiting behind its key"))
    if not redriven:
        return
    for job in redriven:
        target = destination or job.source_name
        what = outcome.get(str(job.id), "not taken (not waiting, or no destination queue)")
        log_entry(
            request, JobRow, str(job.id), str(job), CHANGE, f"redrive from {job.name} to {target}: {what}"
        )
    text = f"Redrive of {len(redriven)} selected job(s): {moved} moved, {conflicted} conflicted"
    if conflicted:
        text += " (failed in place in the dead-letter queue; their output names the conflict)"
    if waiting:
        text += f", {waiting} waiting behind an earlier job with the same key"
    untouched = len(redriven) - moved - conflicted - waiting
    if untouched:
        text += f", {untouched} not taken (not waiting, or no destination queue)"
    level = messages.SUCCESS if moved == len(redriven) else messages.WARNING
    messages.add_message(request, level, text + ".")


# -- lineage ------------------------------------------------------------------------------------


def lineage(job_id: str) -> list[Job]:
    """Every job in the dead-letter chain holding ``job_id``, oldest first (boss.get_lineage)."""
    return boss.get_lineage(job_id)


def lineage_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """The chain a job belongs to, hop by hop: where it started, each dead-letter copy, each redrive."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    changelist = reverse("admin:pgboss_job_changelist")
    try:
        job_id = str(uuid.UUID(object_id))
    except ValueError:
        messages.error(request, f"{object_id!r} is not a job id: a job id is a UUID.")
        return HttpResponseRedirect(changelist)
    chain = lineage(job_id)
    if not chain:
        messages.error(request, f"No job with id {job_id} (retention may have deleted it).")
        return HttpResponseRedirect(changelist)
    hops = []
    for position, job in enumerate(chain, start=1):
        if job.source_id is not None:
            how = "dead-letter copy"
        elif job.source_root_id is not None:
            how = "redriven"
        else:
            how = "original"
        hops.append(
            {
                "position": position,
                "job": job,
                "how": how,
                "id": job.id,
                "is_current": job.id == job_id,
                "url": reverse("admin:pgboss_job_change", args=[quote(job.id)]),
                "queue_url": reverse("admin:pgboss_queue_change", args=[quote(job.name)]),
                "source_url": reverse("admin:pgboss_job_change", args=[quote(job.source_id)])
                if job.source_id
                else None,
                "output": pretty_json(job.output),
                "source_output": pretty_json(job.source_output),
            }
        )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Lineage of job {job_id}",
        "opts": model_admin.model._meta,
        "job_id": job_id,
        "hops": hops,
        "root_id": chain[0].source_root_id or chain[0].id,
    }
    return TemplateResponse(request, "admin/pgboss/lineage.html", context)


def pretty_json(value: Any) -> str:
    """JSON indented for reading; an empty string for None."""
    if value is None:
        return ""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


# -- schedules ----------------------------------------------------------------------------------


class ScheduleForm(forms.Form):
    """What boss.schedule() takes; its validation errors come back as this form's errors."""

    name = forms.ChoiceField(label="Queue")
    key = forms.CharField(required=False, help_text="Tells several schedules of one queue apart.")
    cron = forms.CharField(help_text="5 fields (minute hour day month weekday), or 6 with seconds first.")
    tz = forms.CharField(label="Time zone", initial="UTC", help_text="An IANA name, e.g. Europe/Paris.")
    data = forms.CharField(
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
        self.fields["name"].choices = [(n, n) for n in Queue.objects.values_list("name", flat=True)]

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


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(f"pgboss.{permission}"):
        raise PermissionDenied


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
    _require(request, "view_schedule")
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
    _require(request, "add_schedule")
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
    _require(request, "delete_schedule")
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
