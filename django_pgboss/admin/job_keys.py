"""How the admin names one job: by its queue and its id, the job table's primary key.

``send(id=...)`` lets two queues hold a job with the same id, so an id alone may name two jobs.
Every admin URL, action checkbox and log entry names a job by ``"<queue>/<id>"`` instead; URLs
carry it through Django's admin ``quote()`` as any object id. Ids are uuids, which hold no "/", so
the id is what follows the last "/" and a queue name may hold any character, "/" included. A bare
id (a link made before keys named the queue) still finds its job when only one queue has it.
admin/job_admin.py puts these keys to work in the job ModelAdmin.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q


@dataclass(frozen=True, slots=True)
class JobKey:
    """A job's address: its queue (None for a bare id, any queue) and its id."""

    name: str | None
    id: uuid.UUID

    def __str__(self) -> str:
        return str(self.id) if self.name is None else f"{self.name}/{self.id}"

    def as_q(self) -> Q:
        """The ORM condition that selects this job (jobs, for a bare id shared by several queues)."""
        return Q(id=self.id) if self.name is None else Q(name=self.name, id=self.id)


def job_key(job: Any) -> str:
    """The key of a job row or a records.Job: ``"<queue>/<id>"``."""
    return f"{job.name}/{job.id}"


def key_of(name: str, job_id: Any) -> str:
    """The key of the job ``job_id`` of queue ``name``."""
    return f"{name}/{job_id}"


def parse_job_key(text: str) -> JobKey | None:
    """The job a key names, or None when ``text`` is no key (not a uuid, or a NUL that no queue
    name can hold: PostgreSQL text refuses it, so it could only fail the query)."""
    if not isinstance(text, str) or "\x00" in text:
        return None
    name, slash, raw_id = text.rpartition("/")
    try:
        job_id = uuid.UUID(raw_id)
    except ValueError:
        return None
    if slash and not name:
        return None
    return JobKey(name if slash else None, job_id)


def selected_keys(values: list[str]) -> tuple[list[JobKey], list[str]]:
    """The job keys among an action's selected values, and the values that are no key."""
    keys, bad = [], []
    for value in values:
        key = parse_job_key(value)
        if key is None:
            bad.append(value)
        else:
            keys.append(key)
    return keys, bad
