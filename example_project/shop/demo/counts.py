"""Per-queue counts read from pg-boss's job table, for the live display and the summary."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, Sum

from django_pgboss import JobState
from django_pgboss.models import Job


@dataclass
class QueueCounts:
    """What happened in one queue so far."""

    queued: int = 0
    active: int = 0
    completed: int = 0
    failed: int = 0
    #: Attempts after the first (each retry raises a job's retry_count by one).
    retried: int = 0
    #: Jobs of this queue copied into its dead-letter queue (redriven ones included).
    dead_lettered: int = 0
    #: Of those, the copies still waiting in the dead-letter queue (not redriven, not failed there).
    dead_letter_waiting: int = 0
    #: Jobs re-created in this queue by a redrive.
    redriven: int = 0


def queue_counts(names: list[str], dead_letters: dict[str, str]) -> dict[str, QueueCounts]:
    """Counts for each queue of ``names``; ``dead_letters`` maps a queue to its dead-letter queue."""
    counts = {name: QueueCounts() for name in names}
    rows = (
        Job.objects.filter(name__in=names)
        .values("name")
        .annotate(
            queued=Count("id", filter=Q(state__in=[JobState.CREATED, JobState.RETRY])),
            active=Count("id", filter=Q(state=JobState.ACTIVE)),
            completed=Count("id", filter=Q(state=JobState.COMPLETED)),
            failed=Count("id", filter=Q(state=JobState.FAILED)),
            retried=Sum("retry_count"),
            redriven=Count("id", filter=Q(source_root_id__isnull=False, source_name__isnull=True)),
        )
    )
    for row in rows:
        entry = counts[row["name"]]
        for key in ("queued", "active", "completed", "failed", "retried", "redriven"):
            setattr(entry, key, row[key] or 0)
    # A dead-letter copy names its source queue; a redriven job left the dead-letter queue.
    copies = (
        Job.objects.filter(name__in=set(dead_letters.values()), source_name__in=list(dead_letters))
        .values("source_name")
        .annotate(n=Count("id"), waiting=Count("id", filter=Q(state__in=[JobState.CREATED, JobState.RETRY])))
    )
    for row in copies:
        counts[row["source_name"]].dead_lettered += row["n"]
        counts[row["source_name"]].dead_letter_waiting += row["waiting"]
    for name in dead_letters:
        counts[name].dead_lettered += counts[name].redriven
    return counts
