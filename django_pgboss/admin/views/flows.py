"""A job's flow in the admin: its parents and children on its page, and the flow page, which draws
the whole graph (admin/flow_graph.py) and lists what the flow waits on."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from django_pgboss.admin.flow_graph import Node, flow_svg, holding_up, shown_state
from django_pgboss.admin.job_keys import job_key, key_of, parse_job_key
from django_pgboss.api.boss import boss
from django_pgboss.exceptions import PgBossError
from django_pgboss.models import Job

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


#: The most parents, and children, a job's page lists (a fan-out's parent may have thousands);
#: the flow page counts them all.
LISTED = 50


def _job_url(name: str, job_id: str) -> str:
    return reverse("admin:pgboss_job_change", args=[quote(key_of(name, job_id))])


def job_flow_context(job: Any) -> dict[str, Any]:
    """For a job's page: its parents and children (state, link), and the link to its flow page;
    empty for a job in no flow."""
    parents = boss.get_flow_jobs(job.name, job.id, parents=True, limit=LISTED + 1)
    children = boss.get_flow_jobs(job.name, job.id, parents=False, limit=LISTED + 1)
    if not parents and not children:
        return {}

    def rows(related: list) -> list[dict[str, Any]]:
        return [
            {
                "name": r.name,
                "id": r.id,
                "state": r.state or "deleted",
                "url": _job_url(r.name, r.id) if r.state is not None else None,
            }
            for r in related
        ]

    return {
        "flow_parents": rows(parents[:LISTED]),
        "flow_children": rows(children[:LISTED]),
        "flow_more_parents": len(parents) > LISTED,
        "flow_more_children": len(children) > LISTED,
        "flow_pending": job.pending_dependencies if job.blocked else 0,
        "flow_url": reverse("admin:pgboss_job_flow", args=[quote(job_key(job))]),
    }


def flow_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """The flow job ``object_id`` ("<queue>/<id>") belongs to: the graph, the counts by state, and
    the jobs it waits on."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    changelist = reverse("admin:pgboss_job_changelist")
    key = parse_job_key(unquote(object_id))
    if key is None:
        shown = unquote(object_id).replace("\x00", "")
        messages.error(request, f"{shown!r} is not a job id: a job is named <queue>/<job id>, the id a UUID.")
        return HttpResponseRedirect(changelist)
    name = key.name
    if name is None:
        holders = sorted(Job.objects.filter(id=key.id).values_list("name", flat=True))
        if len(holders) != 1:
            messages.error(request, f"Name the queue of job {key.id}: <queue>/<job id>.")
            return HttpResponseRedirect(changelist)
        name = holders[0]
    try:
        graph = boss.get_flow(name, str(key.id))
    except PgBossError as exc:
        messages.error(request, f"No flow for {key}: {exc}")
        return HttpResponseRedirect(changelist)
    current = (name, str(key.id))
    nodes = {
        (ref.name, ref.id): Node(
            ref.name,
            ref.id,
            shown_state(state, ref in graph.blocked),
            url=_job_url(ref.name, ref.id) if state is not None else None,
            current=(ref.name, ref.id) == current,
        )
        for ref, state in graph.nodes.items()
    }
    edges = [((p.name, p.id), (c.name, c.id)) for p, c in graph.edges]
    held = holding_up(nodes, edges)
    waits_on = [
        {"node": nodes[k], "why": "holds the flow up" if why == "stuck" else "next", "url": nodes[k].url}
        for k, why in sorted(held.items(), key=lambda item: (item[1] != "stuck", item[0]))
    ][:50]
    counts = Counter(node.state for node in nodes.values())
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Flow of job {name}/{key.id}",
        "opts": model_admin.model._meta,
        "job_url": _job_url(*current) if current in nodes and nodes[current].url else None,
        "job_key": f"{name}/{key.id}",
        "in_flow": bool(edges),
        "svg": flow_svg(nodes, edges, label=f"The flow of job {name}/{key.id}: {len(nodes)} jobs"),
        "counts": sorted(counts.items()),
        "total": len(nodes),
        "waits_on": waits_on,
        "truncated": graph.truncated,
    }
    return TemplateResponse(request, "admin/pgboss/flow.html", context)
