"""The job ModelAdmin's addressing: each job by (queue, id), through the keys of admin/job_keys.py.

The ORM key of the Job model is ``id`` alone (the admin needs a single-field key), and two queues
may hold one id; the mixin here replaces that key wherever the admin puts one in a URL, an action
checkbox or a log entry, and reads it back in get_object() and the actions.
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from django_pgboss.admin.job_keys import job_key, parse_job_key, selected_keys
from django_pgboss.admin.views.common import log_entry

if TYPE_CHECKING:
    from django.http.request import _ImmutableQueryDict


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
