"""How the admin names one job: by its queue and its id, the job table's primary key.

``send(id=...)`` lets two queues hold a job with the same id, so an id alone may name two jobs.
Every admin URL, action checkbox and log entry names a job by ``"<queue>/<id>"`` instead; URLs
carry it through Django's admin ``quote()`` as any object id. Ids are uuids, which hold no "/", so
the id is what follows the last "/" and a queue name may hold any character, "/" included. A bare
id (a link made before keys named the queue) still finds its job when only one queue has it.
"""

from __future__ import annotations

import functools
import operator
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from django_pgboss.admin.views.common import log_entry

if TYPE_CHECKING:
    from django.http.request import _ImmutableQueryDict


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


class JobKeyAdminMixin(admin.ModelAdmin):
    """What makes a ModelAdmin of jobs name each job by (queue, id) instead of its ORM key.

    The ORM key of the Job model is ``id`` alone (the admin needs a single-field key); this
    replaces it wherever the admin puts one in a URL, an action checkbox or a log entry, and reads
    it back in get_object() and the actions.
    """

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        key = parse_job_key(object_id)
        if key is None:
            return None
        matches = list(self.get_queryset(request).filter(key.as_q())[:2])
        # A bare id that two queues hold names no one job.
        return matches[0] if len(matches) == 1 else None

    def queues_holding(self, request: HttpRequest, object_id: str) -> list[str]:
        """The queues holding a job with the id of a bare-id ``object_id`` (none for a full key)."""
        key = parse_job_key(object_id)
        if key is None or key.name is not None:
            return []
        return sorted(self.get_queryset(request).filter(id=key.id).values_list("name", flat=True))

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return JobChangeList

    def action_checkbox(self, obj: Any) -> SafeString:
        attrs = {
            "class": "action-select",
            "aria-label": format_html(_("Select this object for an action - {}"), str(obj)),
        }
        return forms.CheckboxInput(attrs, lambda value: False).render(ACTION_CHECKBOX_NAME, job_key(obj))

    def response_action(
        self, request: HttpRequest, queryset: QuerySet, *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """Run the action on the jobs the selected keys name, each by (queue, id)."""
        if request.POST.get("select_across") != "1":
            keys, bad = selected_keys(request.POST.getlist(ACTION_CHECKBOX_NAME))
            if bad:
                messages.error(
                    request,
                    f"{bad[0]!r} names no job (a job is named <queue>/<job id>, the id a UUID). "
                    "Nothing was done.",
                )
                return None
            shared = [key for key in keys if key.name is None and queryset.filter(id=key.id).count() > 1]
            if shared:
                messages.error(
                    request,
                    f"Several queues hold a job with id {shared[0].id}: select the one you mean from "
                    "the job list. Nothing was done.",
                )
                return None
            if keys:
                queryset = queryset.filter(functools.reduce(operator.or_, (key.as_q() for key in keys)))
                # Django's own response_action narrows the queryset to pk__in the selected values:
                # given the ids, that keeps exactly the rows selected above.
                post = request.POST.copy()
                post.setlist(ACTION_CHECKBOX_NAME, [str(key.id) for key in keys])
                request.POST = cast("_ImmutableQueryDict", post)
        return super().response_action(request, queryset, *args, **kwargs)

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> LogEntry:
        return log_entry(request, type(obj), job_key(obj), str(obj), CHANGE, message)

    def log_deletions(self, request: HttpRequest, queryset: Any) -> list[LogEntry]:
        return [log_entry(request, type(obj), job_key(obj), str(obj), DELETION, "") for obj in queryset]


class JobChangeList(ChangeList):
    """The job list, linking each row to its job by (queue, id)."""

    def url_for_result(self, result: Any) -> str:
        return reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
            args=(quote(job_key(result)),),
            current_app=self.model_admin.admin_site.name,
        )
