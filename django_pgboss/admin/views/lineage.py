"""The lineage page: the dead-letter chain a job belongs to, hop by hop (boss.get_lineage())."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.contrib import messages
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from django_pgboss.admin.views.common import pretty_json
from django_pgboss.api.boss import boss
from django_pgboss.records import Job

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


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
