"""The admin an operator uses every day: queues with throughput, jobs with actions, schedules.

The models are read-only, so no admin form ever saves a row: every change (retry, cancel,
resume, delete, redrive, schedule, unschedule) goes through ``Boss``, needs its own permission,
is a POST (CSRF-checked by Django), and is recorded as an admin LogEntry. The pages themselves
live in admin/views/ (one module per page family) and the SVG charts in admin/charts.py.

Permissions: ``pgboss.view_*`` for the pages; ``pgboss.retry_job``, ``cancel_job``, ``resume_job``,
``redrive_job`` and ``delete_job`` for the job actions; ``pgboss.purge_queued_jobs``,
``purge_stored_jobs`` and ``purge_all_jobs`` for a queue's purges; ``pgboss.add_schedule``,
``change_schedule`` and ``delete_schedule`` for schedules.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from django_pgboss.admin import charts, internal_queues, job_display, request_checks
from django_pgboss.admin.job_admin import JobKeyAdminMixin
from django_pgboss.admin.job_keys import job_key, parse_job_key
from django_pgboss.admin.views import flows, job_actions, lineage, purge, redrive
from django_pgboss.admin.views import throughput as throughput_views
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import Backend, JobState, QueuePolicy
from django_pgboss.exceptions import PgBossError
from django_pgboss.models import Job, Queue


class ReadOnlyAdmin(admin.ModelAdmin):
    """A ModelAdmin that shows rows and never writes them through the ORM."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    #: Whether the list's query string may hold the job table's uuid and state lookups.
    checks_job_fields = False

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        # No text PostgreSQL stores holds a NUL: the lookup could only fail, so nothing has it.
        if "\x00" in str(object_id):
            return None
        return super().get_object(request, object_id, from_field)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # Filters PostgreSQL would refuse (a NUL, a state that is not one, a malformed id) are
        # dropped with a message before the query runs, instead of failing it with a server error.
        found = request_checks.problems(request.GET, job_fields=self.checks_job_fields)
        if found:
            for problem in found:
                messages.warning(request, problem)
            kept = request_checks.without(request.GET, job_fields=self.checks_job_fields)
            return HttpResponseRedirect(request.path + (f"?{kept}" if kept else ""))
        return super().changelist_view(request, extra_context)


def _waiting_copies() -> QuerySet:
    """Dead-letter copies waiting to be redriven (created or retry), in any queue."""
    return Job.objects.filter(state__in=[JobState.CREATED, JobState.RETRY])


@admin.register(Queue)
class QueueAdmin(ReadOnlyAdmin):
    """Queues with their counts and last hour's throughput; each queue's page has its charts."""

    list_display = [
        "name",
        "policy",
        "queued",
        "active",
        "failed",
        "dead_lettered",
        "throughput",
        "dead_letter",
    ]
    # pg-boss's own queues are hidden unless the filter shows them (admin/internal_queues.py).
    list_filter = [internal_queues.InternalQueueFilter, "policy", "partition"]
    search_fields = ["name"]
    change_form_template = "admin/pgboss/queue/change_form.html"
    change_list_template = "admin/pgboss/queue/change_list.html"
    # The queue row's thirty columns grouped: settings, counts, the monitor's bookkeeping folded.
    fieldsets = [
        (
            "Settings",
            {
                "fields": [
                    "name",
                    "policy",
                    "partition",
                    "dead_letter",
                    "retry_limit",
                    "retry_delay",
                    "retry_backoff",
                    "retry_delay_max",
                    "expire_seconds",
                    "heartbeat_seconds",
                    "retention_seconds",
                    "deletion_seconds",
                    "warning_queued",
                    "notify",
                    "table_name",
                ]
            },
        ),
        (
            "Counts (the monitor's cache, as of its last pass)",
            {
                "fields": [
                    "queued_count",
                    "deferred_count",
                    "ready_count",
                    "active_count",
                    "failed_count",
                    "total_count",
                    "singletons_active",
                ]
            },
        ),
        (
            "Monitor stamps",
            {
                "classes": ["collapse"],
                "description": "When the monitor last counted, swept and claimed this queue, and its last throughput delta.",
                "fields": [
                    "monitor_on",
                    "maintain_on",
                    "monitor_claim_on",
                    "delta_on",
                    "delta_seconds",
                    "created_delta",
                    "completed_delta",
                    "failed_delta",
                    "ready_history",
                    "created_on",
                    "updated_on",
                ],
            },
        ),
    ]

    class Media:
        css = {"all": ["pgboss/admin.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        if pgboss_settings.BACKEND == Backend.CITUS_DISTRIBUTED:
            # Citus runs no correlated subquery beside a reference table (the queue table, in
            # that mode): each row's count is read on its own (dead_lettered()), and the column
            # sorts as one value (docs/citus.md, "What a user gives up").
            return super().get_queryset(request).annotate(dead_lettered_count=Value(None, IntegerField()))
        # Jobs of the queue waiting in a dead-letter queue, ready to be redriven.
        waiting = (
            _waiting_copies()
            .filter(source_name=OuterRef("name"))
            .order_by()
            .values("source_name")
            .annotate(n=Count("*"))
            .values("n")
        )
        return (
            super()
            .get_queryset(request)
            .annotate(dead_lettered_count=Coalesce(Subquery(waiting, output_field=IntegerField()), Value(0)))
        )

    @admin.display(description="queued", ordering="queued_count")
    def queued(self, obj: Queue) -> int:
        return obj.queued_count

    @admin.display(description="active", ordering="active_count")
    def active(self, obj: Queue) -> int:
        return obj.active_count

    @admin.display(description="failed", ordering="failed_count")
    def failed(self, obj: Queue) -> int:
        return obj.failed_count

    @admin.display(description="dead-lettered", ordering="dead_lettered_count")
    def dead_lettered(self, obj: Queue) -> str | int:
        # An annotation of get_queryset(), which django-stubs cannot see on the model.
        count: int | None = obj.dead_lettered_count  # type: ignore[attr-defined]
        if count is None:
            count = _waiting_copies().filter(source_name=obj.name).count()
        if not count:
            return 0
        # The copies themselves, wherever they wait, ready to be selected and redriven.
        query = urlencode({"source_name": obj.name, "state__in": "created,retry"})
        return format_html('<a href="{}?{}">{}</a>', reverse("admin:pgboss_job_changelist"), query, count)

    def _throughput(self, obj: Queue) -> throughput_views.Throughput:
        # Kept on the row object: the rate and the sparkline columns of one row share one query.
        cached: throughput_views.Throughput | None = vars(obj).get("_pgboss_throughput")
        if cached is None:
            try:
                cached = throughput_views.queue_throughput(obj.name)
            except PgBossError:
                # A queue created through the schema's own SQL (as pg-boss Node may) with a name
                # the API refuses: its row shows, without throughput, rather than failing the list.
                cached = throughput_views.Throughput(None, [])
            vars(obj)["_pgboss_throughput"] = cached
        return cached

    @admin.display(description="completed/min, last hour")
    def throughput(self, obj: Queue) -> str:
        """The rate over the time the monitor counted in the last hour (said when that is less
        than the hour), then a sparkline of the completions per 5 minutes across the hour."""
        measured = self._throughput(obj)
        rate = measured.completed_per_minute
        text = "-" if rate is None else charts.format_number(round(rate, 2))
        if all(c is None for c in measured.completed):
            return text
        shown = ", ".join("-" if c is None else str(c) for c in measured.completed)
        line = charts.sparkline(
            measured.completed, label=f"{obj.name}: completed per 5 minutes, oldest first: {shown}"
        )
        window = throughput_views.covered_label(measured.covered_seconds)
        return format_html(
            '<span class="pgboss-rate">{}</span> {}{}',
            text,
            line,
            format_html('<span class="pgboss-window">{}</span>', window) if window else "",
        )

    def get_urls(self) -> list:
        info = self.opts.app_label, self.opts.model_name

        def moved(name: str) -> Any:
            # The schedule pages were under the queue admin before schedules had their own row
            # on the admin index; these names and URLs keep old links and bookmarks working.
            def view(request: HttpRequest) -> HttpResponse:
                query = request.META.get("QUERY_STRING", "")
                return HttpResponseRedirect(reverse(name) + (f"?{query}" if query else ""))

            return self.admin_site.admin_view(view)

        return [
            path(
                "schedules/", moved("admin:pgboss_schedule_changelist"), name=f"{info[0]}_{info[1]}_schedules"
            ),
            path(
                "schedules/add/", moved("admin:pgboss_schedule_add"), name=f"{info[0]}_{info[1]}_schedule_add"
            ),
            path(
                "schedules/delete/",
                moved("admin:pgboss_schedule_delete"),
                name=f"{info[0]}_{info[1]}_schedule_delete",
            ),
            path(
                "<path:object_id>/purge/<str:which>/",
                self.admin_site.admin_view(
                    lambda request, object_id, which: purge.purge_view(self, request, object_id, which)
                ),
                name=f"{info[0]}_{info[1]}_purge",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        extra = dict(extra_context or {})
        # The URL carries the name through the admin's quote() ("emails_dlq" as "emails_5Fdlq"),
        # and Django's own change view unquotes it before looking the object up: so must this.
        obj = self.get_object(request, unquote(object_id))
        if obj is not None and self.has_view_permission(request, obj):
            try:
                extra.update(throughput_views.queue_charts_context(request, obj.name))
            except PgBossError as exc:
                messages.warning(request, f"No throughput charts for this queue: {exc}")
            extra["queue_jobs_url"] = (
                reverse("admin:pgboss_job_changelist") + "?" + urlencode({"name": obj.name})
            )
            extra["purge_links"] = purge.purge_links(request, obj)
            extra.update(purge.blocked_keys_context(obj))
        return super().change_view(request, object_id, form_url, extra)


class QueueNameFilter(admin.SimpleListFilter):
    """Filter jobs by queue, listing the queues (not a scan of the job table for its names)."""

    title = "queue"
    parameter_name = "name"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in Queue.objects.values_list("name", flat=True)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(name=self.value()) if self.value() else queryset


class PolicyFilter(admin.SimpleListFilter):
    """Filter jobs by policy, listing the policies (not a scan of the job table for its values)."""

    title = "policy"
    parameter_name = "policy"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(policy.value, policy.value) for policy in QueuePolicy]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(policy=self.value()) if self.value() else queryset


JOB_ACTION_PERMISSIONS = {
    "retry": "retry_job",
    "cancel": "cancel_job",
    "resume": "resume_job",
    "redrive": "redrive_job",
    "remove": "delete_job",
}


@admin.register(Job)
class JobAdmin(JobKeyAdminMixin, job_display.JobDisplayMixin, ReadOnlyAdmin):
    """Jobs: filter, search, read payload and output, and act on them through Boss.

    A job is named by its queue and id (admin/job_keys.py): two queues may hold one id.
    """

    checks_job_fields = True

    # What an operator looks for first (state, why it failed, where it came from) comes first; the
    # policy is the queue's (the filter has it), so the list fits 1400 px without it.
    list_display = [
        "short_id",
        "name",
        "state",
        "retries",
        "output_summary",
        "came_from",
        "created",
        "finished",
    ]
    list_display_links = ["short_id"]
    list_filter = [QueueNameFilter, "state", PolicyFilter]
    search_fields = ["=id", "=singleton_key"]
    # The search hint is in this template, not search_help_text: axe-core reports the box Django
    # ties that to (aria-describedby) as having no visible label (label-title-only, serious).
    change_list_template = "admin/pgboss/job/change_list.html"
    # The job table can hold millions of rows: no date drill-down (it reads every row's date) and
    # no unfiltered total under the filtered count.
    show_full_result_count = False
    actions = ["retry_jobs", "cancel_jobs", "resume_jobs", "delete_jobs", "redrive_jobs"]
    change_form_template = "admin/pgboss/job/change_form.html"
    readonly_fields = [
        "pretty_data",
        "pretty_output",
        "pretty_source_output",
        "start_after_at",
        "created_at",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "keep_until_at",
        "source_created_at",
        "went_to",
    ]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id",
                    "name",
                    "state",
                    "policy",
                    "priority",
                    "singleton_key",
                    "group_id",
                    "group_tier",
                ]
            },
        ),
        ("Payload and output", {"fields": ["pretty_data", "pretty_output"]}),
        (
            "Retries and timing",
            {
                "fields": [
                    "retry_count",
                    "retry_limit",
                    "retry_delay",
                    "retry_backoff",
                    "retry_delay_max",
                    "start_after_at",
                    "created_at",
                    "started_at",
                    "finished_at",
                    "heartbeat_at",
                    "expire_seconds",
                    "keep_until_at",
                    "dead_letter",
                    "went_to",
                ]
            },
        ),
        (
            "Where it came from (dead letters and redrive)",
            {
                "fields": [
                    "source_name",
                    "source_id",
                    "source_root_id",
                    "source_created_at",
                    "source_retry_count",
                    "pretty_source_output",
                ]
            },
        ),
    ]

    class Media:
        css = {"all": ["pgboss/admin.css"]}

    @admin.display(description="came from", ordering="source_name")
    def came_from(self, obj: Job) -> str:
        return obj.source_name or "-"

    @admin.display(description="output")
    def output_summary(self, obj: Job) -> str:
        """The output's message (what a failure says), or the start of its JSON."""
        output = obj.output
        if output is None:
            return "-"
        text = output.get("message") if isinstance(output, dict) else None
        if not isinstance(text, str):
            text = json.dumps(output, ensure_ascii=False, default=str)
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description="data")
    def pretty_data(self, obj: Job) -> str:
        return job_display.output_block(obj.data)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple:
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            job_id = uuid.UUID(term)
        except ValueError:
            # Not an id, so only a singleton key can match (an id lookup would reject the text).
            return queryset.filter(singleton_key=term), False
        return queryset.filter(id=job_id) | queryset.filter(singleton_key=term), False

    # -- permissions for the Boss-backed actions -----------------------------------------------

    def _has(self, request: HttpRequest, verb: str) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.{JOB_ACTION_PERMISSIONS[verb]}")

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return self._has(request, "retry")

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return self._has(request, "cancel")

    def has_resume_permission(self, request: HttpRequest) -> bool:
        return self._has(request, "resume")

    def has_redrive_permission(self, request: HttpRequest) -> bool:
        return self._has(request, "redrive")

    def has_remove_permission(self, request: HttpRequest) -> bool:
        # Not has_delete_permission: that one would open Django's own delete views, which
        # delete through the ORM.
        return self._has(request, "remove")

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # Django drops an action the user may not run and answers "no action selected"; an
        # operator (or a script) posting one without the permission gets a plain 403 instead.
        if request.method == "POST" and request.POST.get("action"):
            action = request.POST["action"]
            if action in self.actions and action not in self.get_actions(request):
                raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def response_action(
        self, request: HttpRequest, queryset: QuerySet, *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        # *args, **kwargs: Django 6.1 passes where the action form was (action_location).
        response = super().response_action(request, queryset, *args, **kwargs)
        # An action run from a job's own page returns there, while the job still exists.
        back = parse_job_key(request.POST.get("_return_to_job", ""))
        if (
            isinstance(response, HttpResponseRedirect)
            and back is not None
            and back.name is not None
            and Job.objects.filter(back.as_q()).exists()
        ):
            return HttpResponseRedirect(reverse("admin:pgboss_job_change", args=[quote(str(back))]))
        return response

    def get_urls(self) -> list:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/lineage/",
                self.admin_site.admin_view(
                    lambda request, object_id: lineage.lineage_view(self, request, object_id)
                ),
                name=f"{info[0]}_{info[1]}_lineage",
            ),
            path(
                "<path:object_id>/flow/",
                self.admin_site.admin_view(
                    lambda request, object_id: flows.flow_view(self, request, object_id)
                ),
                name=f"{info[0]}_{info[1]}_flow",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        extra = dict(extra_context or {})
        # Unquoted as Django's own change view does (a queue name holds "_" or "/" quoted).
        obj = self.get_object(request, unquote(object_id))
        holders = self.queues_holding(request, unquote(object_id)) if obj is None else []
        if len(holders) > 1:
            job_id = unquote(object_id)
            messages.warning(
                request,
                f"Queues {', '.join(map(repr, holders))} each hold a job with id {job_id}: pick one.",
            )
            return HttpResponseRedirect(
                reverse("admin:pgboss_job_changelist") + "?" + urlencode({"q": job_id})
            )
        if obj is not None:
            extra["job_key"] = job_key(obj)
            extra["history_url"] = reverse("admin:pgboss_job_history", args=[quote(job_key(obj))])
            extra["lineage_url"] = reverse("admin:pgboss_job_lineage", args=[quote(job_key(obj))])
            extra.update(flows.job_flow_context(obj))
            extra["job_actions"] = [
                (name, label)
                for name, label, verb, states in (
                    ("retry_jobs", "Retry", "retry", {JobState.FAILED}),
                    ("cancel_jobs", "Cancel", "cancel", {JobState.CREATED, JobState.RETRY, JobState.ACTIVE}),
                    ("resume_jobs", "Resume", "resume", {JobState.CANCELLED}),
                    ("redrive_jobs", "Redrive…", "redrive", {JobState.CREATED, JobState.RETRY}),
                    ("delete_jobs", "Delete", "remove", set(JobState)),
                )
                if obj.state in states
                and self._has(request, verb)
                and (verb != "redrive" or obj.source_id is not None)
            ]
            extra["changelist_url"] = reverse("admin:pgboss_job_changelist")
        return super().change_view(request, object_id, form_url, extra)

    # -- actions -------------------------------------------------------------------------------

    @admin.action(description="Retry selected failed jobs", permissions=["retry"])
    def retry_jobs(self, request: HttpRequest, queryset: QuerySet) -> None:
        job_actions.run_job_verb(self, request, queryset, "retry")

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet) -> None:
        job_actions.run_job_verb(self, request, queryset, "cancel")

    @admin.action(description="Resume selected cancelled jobs", permissions=["resume"])
    def resume_jobs(self, request: HttpRequest, queryset: QuerySet) -> None:
        job_actions.run_job_verb(self, request, queryset, "resume")

    @admin.action(description="Delete selected jobs", permissions=["remove"])
    def delete_jobs(self, request: HttpRequest, queryset: QuerySet) -> None:
        job_actions.run_job_verb(self, request, queryset, "delete")

    @admin.action(description="Redrive selected dead-letter jobs…", permissions=["redrive"])
    def redrive_jobs(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        return redrive.redrive_view(self, request, queryset)
