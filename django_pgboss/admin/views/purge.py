"""A queue's purge actions (delete its queued, finished or all jobs) and its blocked keys.

Each purge is a page of its own under the queue's page: a GET shows what would be deleted (the
counts, read now) behind a confirmation form; the confirming POST runs boss.delete_*_jobs(),
leaves a LogEntry on the queue and goes back to the queue's page. Each needs its own permission
(``pgboss.purge_queued_jobs``, ``purge_stored_jobs``, ``purge_all_jobs``), checked on both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.contrib.admin.utils import quote, unquote
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from django_pgboss.admin.views.common import log_entry, require_permission
from django_pgboss.api.boss import boss
from django_pgboss.constants import JobState, QueuePolicy
from django_pgboss.exceptions import PgBossError
from django_pgboss.models import Job, Queue

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

WAITING = [JobState.CREATED, JobState.RETRY]
FINISHED = [JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED]


@dataclass(frozen=True)
class Purge:
    """One purge action: what it deletes, the Boss method, and its permission."""

    key: str
    label: str
    deletes: str
    permission: str
    method: str  # the Boss method that deletes them

    def run(self, name: str) -> int:
        """Delete the queue's jobs through Boss; returns how many were deleted."""
        delete: Callable[[str], int] = getattr(boss, self.method)
        return delete(name)


PURGES = {
    purge.key: purge
    for purge in (
        Purge(
            "queued",
            "Delete queued jobs",
            "jobs waiting to run (created or retry)",
            "purge_queued_jobs",
            "delete_queued_jobs",
        ),
        Purge(
            "stored",
            "Delete finished jobs",
            "finished jobs (completed, cancelled or failed)",
            "purge_stored_jobs",
            "delete_stored_jobs",
        ),
        Purge(
            "all", "Delete all jobs", "every job, active ones included", "purge_all_jobs", "delete_all_jobs"
        ),
    )
}


def purge_links(request: HttpRequest, queue: Queue) -> list[dict[str, str]]:
    """The purge actions the user may run on ``queue``, as links for the queue's page."""
    return [
        {
            "label": purge.label,
            "url": reverse("admin:pgboss_queue_purge", args=[quote(queue.name), purge.key]),
        }
        for purge in PURGES.values()
        if request.user.has_perm(f"pgboss.{purge.permission}")
    ]


def state_counts(name: str) -> dict[str, int]:
    """How many jobs of the queue wait, are active, and are finished (read now, not cached)."""
    counts = Job.objects.filter(name=name).aggregate(
        queued=Count("id", filter=Q(state__in=WAITING)),
        active=Count("id", filter=Q(state=JobState.ACTIVE)),
        stored=Count("id", filter=Q(state__in=FINISHED)),
        all=Count("id"),
    )
    return {key: value or 0 for key, value in counts.items()}


def purge_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str, which: str) -> HttpResponse:
    """The confirmation page of one purge (GET), and the purge itself (POST with post=yes)."""
    purge = PURGES.get(which)
    if purge is None:
        raise Http404("no such purge")
    require_permission(request, purge.permission)
    name = unquote(object_id)
    queue = Queue.objects.filter(name=name).first()
    if queue is None:
        raise Http404(f"no queue {name!r}")
    queue_url = reverse("admin:pgboss_queue_change", args=[quote(name)])
    if request.method == "POST" and request.POST.get("post") == "yes":
        try:
            deleted = purge.run(name)
        except PgBossError as exc:
            messages.error(request, f"Nothing was deleted from {name!r}: {exc}")
            return HttpResponseRedirect(queue_url)
        log_entry(request, Queue, name, name, CHANGE, f"{purge.label}: {deleted} deleted")
        messages.success(request, f"Deleted {deleted} job{'s' if deleted != 1 else ''} from {name!r}.")
        return HttpResponseRedirect(queue_url)
    counts = state_counts(name)
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": f"{purge.label} of queue {name}",
        "opts": model_admin.model._meta,
        "queue": queue,
        "queue_url": queue_url,
        "purge": purge,
        "counts": counts,
        "to_delete": counts[purge.key],
    }
    return TemplateResponse(request, "admin/pgboss/purge_confirmation.html", context)


def blocked_keys_context(queue: Queue) -> dict[str, Any]:
    """For a key_strict_fifo queue: each blocked key with a link to the failed job blocking it."""
    if queue.policy != QueuePolicy.KEY_STRICT_FIFO:
        return {}
    keys = boss.get_blocked_keys(queue.name)
    failed = (
        Job.objects.filter(
            name=queue.name, state=JobState.FAILED, policy=QueuePolicy.KEY_STRICT_FIFO, singleton_key__in=keys
        )
        .order_by("singleton_key", "-completed_on")
        .values_list("singleton_key", "id")
    )
    # The newest failed job of each key: the one a retry would unblock the key with.
    blocking: dict[str, str] = {}
    for key, job_id in failed:
        blocking.setdefault(cast(str, key), str(job_id))  # singleton_key__in= leaves no NULL key
    return {
        "strict_fifo": True,
        "blocked_keys": [
            {
                "key": key,
                "job_id": blocking.get(key),
                "url": _job_url(blocking[key]) if key in blocking else None,
            }
            for key in keys
        ],
    }


def _job_url(job_id: str) -> str:
    return reverse("admin:pgboss_job_change", args=[quote(job_id)])
