"""How the job pages show a job: moments with seconds and their zone, a stored traceback as a
block of text, and where a dead-lettered job went (formatting, plus the reads of that job's copy
or its redrive).

Django's admin shows a readonly DateTimeField in DATETIME_FORMAT (minutes, no zone) and a JSON
field as one escaped string, so a traceback reads as ``"Traceback...\\n  File..."``; these replace
both on the job list and the job page.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from django_pgboss.admin.job_keys import job_key
from django_pgboss.admin.views.common import pretty_json
from django_pgboss.constants import JobState
from django_pgboss.models import Job

#: The keys a failure's traceback is stored under: ours (wire.py, the worker) and pg-boss's.
TRACEBACK_KEYS = ("traceback", "stack")
#: What completed_on means for each state a job ends in: pg-boss stores every end there.
ENDED = {JobState.COMPLETED: "completed", JobState.FAILED: "failed", JobState.CANCELLED: "cancelled"}


def moment(value: dt.datetime | None) -> str:
    """One format for every time the job pages show: seconds, and the zone's name."""
    if value is None:
        return "-"
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")


def ended(job: Any) -> str:
    """The job's completed_on, saying what it marks: the end of a completed, failed or cancelled job."""
    if job.completed_on is None:
        return "-"
    what = ENDED.get(job.state)
    return moment(job.completed_on) + (f" ({what})" if what else "")


def _two_lines(text: str) -> SafeString | str:
    date, space, rest = text.partition(" ")
    return format_html("{}<br>{}", date, rest) if space else text


def output_block(value: Any) -> SafeString | str:
    """A job's output for reading: its JSON, with a stored traceback as a monospace block."""
    if value is None:
        return "-"
    trace = None
    if isinstance(value, dict):
        trace = next((value[k] for k in TRACEBACK_KEYS if isinstance(value.get(k), str)), None)
    if trace is None:
        return format_html('<pre class="pgboss-json" tabindex="0">{}</pre>', pretty_json(value))
    rest = {k: v for k, v in value.items() if k not in TRACEBACK_KEYS}
    head = format_html('<pre class="pgboss-json" tabindex="0">{}</pre>', pretty_json(rest)) if rest else ""
    return format_html(
        '{}<p class="pgboss-traceback-label">Traceback:</p><pre class="pgboss-traceback" tabindex="0">{}</pre>',
        head,
        trace.rstrip("\n"),
    )


def after_dead_letter(job: Any) -> SafeString | str:
    """Where a job went after it failed for good: its dead-letter copy, or, once the copy was
    redriven, the jobs the redrive made, each linked to its page; "-" for a job that went nowhere."""
    if job.state != JobState.FAILED or not job.dead_letter:
        return "-"
    # The copy names this job as its source (queue and id).
    later: list[Any] = list(Job.objects.filter(source_name=job.name, source_id=job.id).order_by("created_on"))
    if not later:
        # Once its copy is redriven, nothing links this job to the new one but the chain's root
        # (the copy that named both is gone): the jobs a redrive re-created from this root since
        # this one failed.
        later = list(
            Job.objects.filter(
                source_root_id=job.source_root_id or job.id,
                source_id__isnull=True,
                created_on__gte=job.completed_on or job.created_on,
            )
            .exclude(name=job.name, id=job.id)
            .order_by("created_on")
        )
    if not later:
        return f"Not in {job.dead_letter}: no copy was made, or it was deleted."
    steps = []
    for hop in later:
        if hop.source_id is not None:
            what = f"copied to dead-letter queue {hop.name}"
        else:
            what = f"redriven to {hop.name}"
        steps.append(
            (what, reverse("admin:pgboss_job_change", args=[quote(job_key(hop))]), str(hop.id), hop.state)
        )
    lines = format_html_join("", '<li>{}: <a class="pgboss-id" href="{}">{}</a> ({})</li>', steps)
    note = ""
    if all(hop.source_id is None for hop in later):
        # The copy left the dead-letter queue when it was redriven.
        note = format_html(
            "<li>copied to dead-letter queue {} first (the copy left it when redriven)</li>", job.dead_letter
        )
    return format_html('<ul class="pgboss-went">{}{}</ul>', note, lines)


class JobDisplayMixin(admin.ModelAdmin):
    """The job admin's read-only columns and fields in the formats above."""

    # The list shows an id's first characters (CSS cuts the rest off, the full id stays in the
    # page for search, copy and screen readers, and in the tooltip): a whole uuid is a third of
    # the list's width at 1400 px.
    @admin.display(description="id", ordering="id")
    def short_id(self, obj: Job) -> SafeString:
        return format_html('<span class="pgboss-short-id" title="{}">{}</span>', obj.id, obj.id)

    @admin.display(description="retries", ordering="retry_count")
    def retries(self, obj: Job) -> int:
        return obj.retry_count

    @admin.display(description="output")
    def pretty_output(self, obj: Job) -> SafeString | str:
        return output_block(obj.output)

    @admin.display(description="source output")
    def pretty_source_output(self, obj: Job) -> SafeString | str:
        return output_block(obj.source_output)

    # Times with seconds and their zone, in one format (moment); pg-boss keeps the
    # end of a completed, failed or cancelled job alike in completed_on, so it is labelled so.
    # In the list, a time's date and clock on two lines, so the column is narrow.
    @admin.display(description="created", ordering="created_on")
    def created(self, obj: Job) -> SafeString | str:
        return _two_lines(moment(obj.created_on))

    # "finished": the end of a completed, failed or cancelled job alike (ended() says which).
    @admin.display(description="finished", ordering="completed_on")
    def finished(self, obj: Job) -> SafeString | str:
        return _two_lines(ended(obj))

    @admin.display(description="start after")
    def start_after_at(self, obj: Job) -> str:
        return moment(obj.start_after)

    @admin.display(description="created on")
    def created_at(self, obj: Job) -> str:
        return moment(obj.created_on)

    @admin.display(description="started on")
    def started_at(self, obj: Job) -> str:
        return moment(obj.started_on)

    @admin.display(description="ended on (pg-boss's completed_on)")
    def finished_at(self, obj: Job) -> str:
        return ended(obj)

    @admin.display(description="heartbeat on")
    def heartbeat_at(self, obj: Job) -> str:
        return moment(obj.heartbeat_on)

    @admin.display(description="keep until")
    def keep_until_at(self, obj: Job) -> str:
        return moment(obj.keep_until)

    @admin.display(description="source created on")
    def source_created_at(self, obj: Job) -> str:
        return moment(obj.source_created_on)

    @admin.display(description="after it failed")
    def went_to(self, obj: Job) -> SafeString | str:
        return after_dead_letter(obj)
