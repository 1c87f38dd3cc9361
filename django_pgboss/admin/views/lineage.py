"""The lineage page: the dead-letter chain a job belongs to, hop by hop (boss.get_lineage())."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from django_pgboss.admin.job_keys import job_key, key_of, parse_job_key
from django_pgboss.admin.views.common import pretty_json
from django_pgboss.api.boss import boss
from django_pgboss.exceptions import PgBossError
from django_pgboss.records import Job

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


def lineage(job_id: str, name: str | None = None) -> list[Job]:
    """Every job in the dead-letter chain holding job (``name``, ``job_id``), oldest first (boss.get_lineage)."""
    return boss.get_lineage(job_id, name=name)


def lineage_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """The chain a job belongs to, hop by hop: where it started, each dead-letter copy, each redrive.

    ``object_id`` is the job's key, "<queue>/<id>" (a bare id still works while one queue holds
    it), quoted in the URL as the admin quotes object ids.
    """
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    changelist = reverse("admin:pgboss_job_changelist")
    key = parse_job_key(unquote(object_id))
    if key is None:
        shown = unquote(object_id).replace("\x00", "")
        messages.error(request, f"{shown!r} is not a job id: a job is named <queue>/<job id>, the id a UUID.")
        return HttpResponseRedirect(changelist)
    job_id = str(key.id)
    try:
        chain = lineage(job_id, key.name)
    except PgBossError as exc:
        messages.error(request, f"No lineage for {key}: {exc}")
        return HttpResponseRedirect(changelist)
    if not chain:
        where = "" if key.name is None else f" in queue {key.name!r}"
        messages.error(request, f"No job with id {key.id}{where} (retention may have deleted it).")
        return HttpResponseRedirect(changelist)
    current = next((job for job in chain if job.id == job_id and key.name in (None, job.name)), None)
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
                "is_current": job is current,
                "url": reverse("admin:pgboss_job_change", args=[quote(job_key(job))]),
                "queue_url": reverse("admin:pgboss_queue_change", args=[quote(job.name)]),
                "source_url": reverse(
                    "admin:pgboss_job_change", args=[quote(key_of(job.source_name, job.source_id))]
                )
                if job.source_id and job.source_name
                else None,
                "output": pretty_json(job.output),
                "source_output": pretty_json(job.source_output),
            }
        )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Lineage of job {key}",
        "opts": model_admin.model._meta,
        "job_id": job_id,
        "hops": hops,
        "root_id": chain[0].source_root_id or chain[0].id,
    }
    return TemplateResponse(request, "admin/pgboss/lineage.html", context)
