"""The redrive action: a confirmation page with boss.preview_redrive(), then boss.redrive()."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from django_pgboss.admin.job_keys import job_key
from django_pgboss.admin.views.common import log_entry
from django_pgboss.api.boss import boss
from django_pgboss.exceptions import PgBossError
from django_pgboss.models import Job as JobRow
from django_pgboss.models import Queue

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


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
        _redrive(model_admin, request, jobs, by_queue, destination)
        return None
    previews: list[dict[str, Any]] = []
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
        "selected_ids": [job_key(job) for job in jobs],
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
    outcome: dict[tuple[str, str], str] = {}
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
        outcome.update({(name, old): "conflict: failed in place" for old in result.conflicted_ids})
        outcome.update({(name, old): "waiting behind its key" for old in result.waiting_ids})
    if not redriven:
        return
    for job in redriven:
        target = destination or job.source_name
        what = outcome.get((job.name, str(job.id)), "not taken (not waiting, or no destination queue)")
        log_entry(
            request, JobRow, job_key(job), str(job), CHANGE, f"redrive from {job.name} to {target}: {what}"
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
