"""The job list's settle actions (retry, cancel, resume, delete), each run through Boss."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import HttpRequest

from django_pgboss.api.boss import boss
from django_pgboss.exceptions import PgBossError

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


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
        model_admin.log_deletions(request, queryset)  # the rows list() just read, from its cache
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
