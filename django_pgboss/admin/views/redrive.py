"""The redrive action: a confirmation page with boss.preview_redrive(), then boss.redrive()."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.contrib.admin.utils import quote
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from django_pgboss.admin import internal_queues
from django_pgboss.admin.job_keys import job_key, key_of
from django_pgboss.admin.views.common import log_entry
from django_pgboss.api.boss import boss
from django_pgboss.exceptions import PgBossError
from django_pgboss.models import Job as JobRow

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: How many new jobs the result message links to; the rest are counted.
MESSAGE_LINKS = 20


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
    show_internal = internal_queues.asked_for(request.POST)
    by_queue: dict[str, list[str]] = defaultdict(list)
    for job in jobs:
        by_queue[job.name].append(str(job.id))
    if request.POST.get("post") == "yes":
        _redrive(model_admin, request, jobs, by_queue, destination)
        return None
    previews: list[dict[str, Any]] = []
    for name, ids in sorted(by_queue.items()):
        try:
            preview = boss.preview_redrive(name, destination=destination, ids=ids)
        except PgBossError as exc:
            messages.error(request, f"Cannot redrive from {name!r}: {exc}. Nothing was redriven.")
            return None
        listed = [_listed(job) for job in jobs if job.name == name]
        previews.append({"queue": name, "ids": ids, "preview": preview, "jobs": listed})
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Redrive dead-letter jobs",
        "opts": model_admin.model._meta,
        "previews": previews,
        "jobs": jobs,
        "destination": destination or "",
        # pg-boss's own queues only when asked for (the page's checkbox), or already chosen.
        "queues": internal_queues.queue_names(internal=show_internal, keep=[destination]),
        "show_internal": show_internal,
        "internal_parameter": internal_queues.PARAMETER,
        "action_checkbox_name": "_selected_action",
        "selected_ids": [job_key(job) for job in jobs],
        "movable": sum(p["preview"].total - p["preview"].unroutable for p in previews),
    }
    return TemplateResponse(request, "admin/pgboss/redrive_confirmation.html", context)


def job_url(name: str, job_id: Any) -> str:
    """The admin page of the job ``job_id`` of queue ``name``."""
    return reverse("admin:pgboss_job_change", args=[quote(key_of(name, job_id))])


def _listed(job: JobRow) -> dict[str, Any]:
    # What the operator checks before moving a job: which one, where from, and why it failed.
    # A dead-letter copy keeps the failure its source job ended with in source_output.
    output = job.output if job.output is not None else job.source_output
    message = output.get("message") if isinstance(output, dict) else None
    return {
        "id": str(job.id),
        "url": job_url(job.name, job.id),
        "source": job.source_name or "",
        "message": message if isinstance(message, str) else "",
        "state": job.state,
    }


def _redrive(
    model_admin: ModelAdmin,
    request: HttpRequest,
    jobs: list[JobRow],
    by_queue: dict[str, list[str]],
    destination: str | None,
) -> None:
    moved = conflicted = waiting = 0
    outcome: dict[tuple[str, str], str] = {}
    moved_to: dict[tuple[str, str], str] = {}
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
        # Keyed by (queue, id): two dead-letter queues may each hold a job with one id.
        outcome.update({(name, old): f"moved, now job {new}" for old, new in result.moved_ids})
        moved_to.update({(name, old): new for old, new in result.moved_ids})
        outcome.update({(name, old): "conflict: failed in place" for old in result.conflicted_ids})
        outcome.update({(name, old): "waiting behind its key" for old in result.waiting_ids})
    if not redriven:
        return
    new_jobs: list[tuple[str, str]] = []
    for job in redriven:
        target = destination or job.source_name or ""
        what = outcome.get((job.name, str(job.id)), "not taken (not waiting, or no destination queue)")
        new_id = moved_to.get((job.name, str(job.id)))
        # The log entry names the job that exists afterwards, so "Recent actions" links to a page:
        # a moved job's dead-letter copy is gone, its new job is in the destination queue.
        if new_id is not None:
            logged, text = key_of(target, new_id), f"{target} {new_id}"
            new_jobs.append((target, new_id))
        else:
            logged, text = job_key(job), str(job)
        log_entry(request, JobRow, logged, text, CHANGE, f"redrive from {job.name} to {target}: {what}")
    text = f"Redrive of {len(redriven)} selected job(s): {moved} moved, {conflicted} conflicted"
    if conflicted:
        text += " (failed in place in the dead-letter queue; their output names the conflict)"
    if waiting:
        text += f", {waiting} waiting behind an earlier job with the same key"
    untouched = len(redriven) - moved - conflicted - waiting
    if untouched:
        text += f", {untouched} not taken (not waiting, or no destination queue)"
    level = messages.SUCCESS if moved == len(redriven) else messages.WARNING
    if new_jobs:
        # Django's message template escapes plain text; this one is built with format_html,
        # every value escaped, so its links survive.
        shown = new_jobs[:MESSAGE_LINKS]
        links = format_html_join(", ", '<a href="{}">{}</a>', ((job_url(n, i), f"{n}/{i}") for n, i in shown))
        more = f" and {len(new_jobs) - len(shown)} more" if len(new_jobs) > len(shown) else ""
        messages.add_message(request, level, format_html("{}. New jobs: {}{}.", text, links, more))
    else:
        messages.add_message(request, level, text + ".")
