"""Read-only models over pg-boss's tables, for ORM reads and the admin.

The tables are created by the SQL migrations (``managed = False``) and written only through
``Boss``: every write path on these models raises :class:`~django_pgboss.exceptions.ReadOnlyModelError`,
so a policy index, a partition or the attempt fence can never be bypassed by ``save()``.

Each model sits in the configured schema: ``db_table`` is ``'<schema>"."<table>'``, which Django's
quoting turns into ``"<schema>"."<table>"``. Composite keys are mirrored with
``CompositePrimaryKey``, except on ``job`` and ``queue_stats``, whose uuid ``id`` serves as the ORM
key so the admin can address a row by it (both tables' real keys lead with, or consist of, that
random uuid).
"""

from __future__ import annotations

from typing import Any, NoReturn

from django.core.exceptions import ImproperlyConfigured
from django.db import models

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import JobState, QueuePolicy
from django_pgboss.db.identifiers import schema_name_problem
from django_pgboss.exceptions import ReadOnlyModelError

# Where the models point when PGBOSS["SCHEMA"] is invalid. Raising here would turn the pgboss.E002
# check's message into an import-time traceback; pointing at this name instead keeps an unsafe
# setting out of SQL, and any query fails with a relation that names the cause.
INVALID_SCHEMA_PLACEHOLDER = "pgboss_invalid_schema_setting"


def schema_table(table: str) -> str:
    """The ``db_table`` for one of pg-boss's tables in the configured schema."""
    try:
        schema = pgboss_settings.SCHEMA
    except ImproperlyConfigured:  # reported by the pgboss.E004 check
        schema = INVALID_SCHEMA_PLACEHOLDER
    if schema_name_problem(schema) is not None:
        schema = INVALID_SCHEMA_PLACEHOLDER
    return f'{schema}"."{table}'


class ArrayColumn(models.Field):
    """A PostgreSQL array column, read as a Python list.

    psycopg already turns arrays into lists, and these models never write, so this needs none of
    django.contrib.postgres's ArrayField machinery, nor (on Django 6) ``django.contrib.postgres``
    in INSTALLED_APPS.
    """

    def __init__(self, element_type: str, *args: Any, **kwargs: Any) -> None:
        self.element_type = element_type
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[Any, ...]:
        name, path, args, kwargs = super().deconstruct()
        return name, path, [self.element_type, *args], kwargs

    def db_type(self, connection: Any) -> str:
        return f"{self.element_type}[]"


def _refuse(model: type[models.Model] | models.Model, action: str) -> NoReturn:
    label = model._meta.label
    raise ReadOnlyModelError(
        f"{label} is read-only: {action} would bypass pg-boss's SQL. Use django_pgboss's Boss API "
        "(send, create_queue, complete, ...) to change jobs and queues."
    )


class ReadOnlyQuerySet(models.QuerySet):
    """A QuerySet whose every write method raises ReadOnlyModelError."""

    def create(self, **kwargs: Any) -> NoReturn:
        _refuse(self.model, "create()")

    def get_or_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self.model, "get_or_create()")

    def update_or_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self.model, "update_or_create()")

    def bulk_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self.model, "bulk_create()")

    def bulk_update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self.model, "bulk_update()")

    def update(self, **kwargs: Any) -> NoReturn:
        _refuse(self.model, "update()")

    def delete(self) -> NoReturn:
        _refuse(self.model, "delete()")

    # Querysets reach these through update() and delete() too, but a raw call must not slip past.
    def _update(self, values: Any) -> NoReturn:
        _refuse(self.model, "update()")

    def _raw_delete(self, using: Any) -> NoReturn:
        _refuse(self.model, "delete()")


class ReadOnlyModel(models.Model):
    """Base of the pg-boss models: unmanaged, and refusing save() and delete()."""

    objects = ReadOnlyQuerySet.as_manager()

    class Meta:
        abstract = True
        managed = False

    def save(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "save()")

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "delete()")


class Version(ReadOnlyModel):
    """The single row recording the schema version, plus the background passes' claim stamps."""

    version = models.IntegerField(primary_key=True)
    cron_on = models.DateTimeField(null=True)
    bam_on = models.DateTimeField(null=True)
    flow_on = models.DateTimeField(null=True)
    reindex_on = models.DateTimeField(null=True)
    monitor_backoff_on = models.DateTimeField(null=True)

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("version")

    def __str__(self) -> str:
        return f"pg-boss schema {self.version}"


class Queue(ReadOnlyModel):
    """A queue: its policy and retry/expiry/retention config, cached gauges and throughput window."""

    name = models.TextField(primary_key=True)
    policy = models.TextField(choices=QueuePolicy.choices)
    retry_limit = models.IntegerField()
    retry_delay = models.IntegerField()
    retry_backoff = models.BooleanField()
    retry_delay_max = models.IntegerField(null=True)
    expire_seconds = models.IntegerField()
    retention_seconds = models.IntegerField()
    deletion_seconds = models.IntegerField()
    dead_letter = models.ForeignKey(
        "self",
        db_column="dead_letter",
        null=True,
        on_delete=models.DO_NOTHING,
        related_name="dead_letter_for",
        db_constraint=False,
    )
    partition = models.BooleanField()
    table_name = models.TextField()
    deferred_count = models.IntegerField(default=0)
    queued_count = models.IntegerField(default=0)
    ready_count = models.IntegerField(default=0)
    warning_queued = models.IntegerField(default=0)
    active_count = models.IntegerField(default=0)
    failed_count = models.IntegerField(default=0)
    total_count = models.IntegerField(default=0)
    created_delta = models.IntegerField(default=0)
    completed_delta = models.IntegerField(default=0)
    failed_delta = models.IntegerField(default=0)
    delta_on = models.DateTimeField(null=True)
    delta_seconds = models.IntegerField(null=True)
    ready_history = ArrayColumn("integer", default=list)
    heartbeat_seconds = models.IntegerField(null=True)
    notify = models.BooleanField(default=False)
    singletons_active = ArrayColumn("text", null=True)
    monitor_claim_on = models.DateTimeField(null=True)
    monitor_on = models.DateTimeField(null=True)
    maintain_on = models.DateTimeField(null=True)
    created_on = models.DateTimeField()
    updated_on = models.DateTimeField()
    # Schema 44: the flow-blocked waiting jobs (no longer in ready_count), the wait and run time
    # histograms of the last counted window and the oldest ready job's wait.
    blocked_count = models.IntegerField(default=0)
    wait_bins = ArrayColumn("integer", null=True)
    run_bins = ArrayColumn("integer", null=True)
    ready_oldest_seconds = models.IntegerField(null=True)
    # Schema 46: the completed and cancelled jobs the queue holds, counted up to retained_on.
    retained_count = models.IntegerField(null=True)
    retained_on = models.DateTimeField(null=True)

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("queue")
        ordering = ["name"]
        # The admin's purge actions, one permission each (see admin/views/purge.py).
        permissions = [
            ("purge_queued_jobs", "Can delete a queue's queued jobs"),
            ("purge_stored_jobs", "Can delete a queue's finished jobs"),
            ("purge_all_jobs", "Can delete all of a queue's jobs"),
        ]

    def __str__(self) -> str:
        return self.name


class Job(ReadOnlyModel):
    """A job, read from the partitioned job table (every partition at once).

    The table's primary key is (name, id); ``id`` alone is the ORM key, which holds because ids are
    random uuids.
    """

    id = models.UUIDField(primary_key=True)
    name = models.TextField()
    priority = models.IntegerField(default=0)
    data = models.JSONField(null=True)
    state = models.TextField(choices=JobState.choices)
    retry_limit = models.IntegerField()
    retry_count = models.IntegerField()
    retry_delay = models.IntegerField()
    retry_backoff = models.BooleanField()
    retry_delay_max = models.IntegerField(null=True)
    expire_seconds = models.IntegerField()
    deletion_seconds = models.IntegerField()
    singleton_key = models.TextField(null=True)
    # timestamp WITHOUT time zone in pg-boss's schema: a throttle slot, not an instant.
    singleton_on = models.DateTimeField(null=True)
    group_id = models.TextField(null=True)
    group_tier = models.TextField(null=True)
    start_after = models.DateTimeField()
    created_on = models.DateTimeField()
    started_on = models.DateTimeField(null=True)
    completed_on = models.DateTimeField(null=True)
    keep_until = models.DateTimeField()
    output = models.JSONField(null=True)
    dead_letter = models.TextField(null=True)
    policy = models.TextField(null=True)
    heartbeat_on = models.DateTimeField(null=True)
    heartbeat_seconds = models.IntegerField(null=True)
    blocked = models.BooleanField(default=False)
    blocking = models.BooleanField(default=False)
    pending_dependencies = models.IntegerField(default=0)
    source_name = models.TextField(null=True)
    source_id = models.UUIDField(null=True)
    source_created_on = models.DateTimeField(null=True)
    source_retry_count = models.IntegerField(null=True)
    source_output = models.JSONField(null=True)
    source_root_id = models.UUIDField(null=True)
    # Schema 44: the sender's trace context ({"traceparent": ...}), continued by the worker's span.
    trace_context = models.JSONField(null=True)
    # Schema 45: written by upsert() on a job it keyed, which job_i13 keeps unique while it waits.
    upsert_by_key = models.BooleanField(null=True)

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("job")
        ordering = ["-created_on"]
        # The admin's job actions, each run through Boss (deleting uses the default delete_job).
        permissions = [
            ("retry_job", "Can retry failed jobs"),
            ("cancel_job", "Can cancel jobs"),
            ("resume_job", "Can resume cancelled jobs"),
            ("redrive_job", "Can redrive dead-letter jobs"),
        ]

    def __str__(self) -> str:
        return f"{self.name}/{self.id}"


class Schedule(ReadOnlyModel):
    """A cron (or RFC 5545 rule) schedule that sends a job to a queue on each occurrence."""

    pk = models.CompositePrimaryKey("name", "key")
    name = models.TextField()
    key = models.TextField(default="")
    kind = models.TextField(default="cron")
    cron = models.TextField()
    timezone = models.TextField(null=True, default="UTC")
    data = models.JSONField(null=True)
    options = models.JSONField(null=True)
    created_on = models.DateTimeField()
    updated_on = models.DateTimeField()
    last_job_id = models.UUIDField(null=True)

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("schedule")

    def __str__(self) -> str:
        return f"{self.name} {self.key}".rstrip()


class _NoRows(models.Manager):
    """A manager whose every query is empty, without touching the database."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().none()


class Schedules(models.Model):
    """The admin index's "Schedules" row: a model the admin can register, holding no rows.

    Django's admin refuses to register a model with a composite primary key, as
    :class:`Schedule` (keyed by queue and key, as pg-boss's table is) must be. The schedule pages
    (admin/views/schedules.py) read and write schedules through ``Boss`` and replace every view
    Django's admin would build for a model, so the admin registers this stand-in instead, which
    names the index row, its URLs (``/admin/pgboss/schedules/``) and nothing else. It has no table
    (every query is empty, no SQL runs) and no permissions of its own: the pages check
    ``pgboss.view_schedule``, ``add_schedule``, ``change_schedule`` and ``delete_schedule``.
    """

    objects = _NoRows()

    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "schedule"
        verbose_name_plural = "schedules"
        db_table = "pgboss_admin_schedules_has_no_table"

    def __str__(self) -> str:
        return "schedules"

    def save(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "save()")

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "delete()")


class Subscription(ReadOnlyModel):
    """A queue subscribed to an event: publish(event) sends one job to each subscribed queue."""

    pk = models.CompositePrimaryKey("event", "name")
    event = models.TextField()
    name = models.TextField()
    created_on = models.DateTimeField()
    updated_on = models.DateTimeField()

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("subscription")

    def __str__(self) -> str:
        return f"{self.event} -> {self.name}"


class Warning(ReadOnlyModel):
    """A warning the monitor persisted (queue backlog over its limit, a slow query)."""

    id = models.UUIDField(primary_key=True)
    type = models.TextField()
    message = models.TextField()
    data = models.JSONField(null=True)
    created_on = models.DateTimeField()

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("warning")
        ordering = ["-created_on"]

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


class QueueStats(ReadOnlyModel):
    """One monitor snapshot of one queue: gauges at captured_on and the counted throughput window."""

    id = models.UUIDField(primary_key=True)
    name = models.TextField()
    deferred_count = models.IntegerField(default=0)
    queued_count = models.IntegerField(default=0)
    ready_count = models.IntegerField(default=0)
    active_count = models.IntegerField(default=0)
    failed_count = models.IntegerField(default=0)
    total_count = models.IntegerField(default=0)
    created_delta = models.IntegerField(null=True)
    completed_delta = models.IntegerField(null=True)
    failed_delta = models.IntegerField(null=True)
    delta_seconds = models.IntegerField(null=True)
    delta_on = models.DateTimeField(null=True)
    captured_on = models.DateTimeField()
    wait_bins = ArrayColumn("integer", null=True)
    run_bins = ArrayColumn("integer", null=True)
    ready_oldest_seconds = models.IntegerField(null=True)

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("queue_stats")
        ordering = ["-captured_on"]
        verbose_name_plural = "queue stats"

    def __str__(self) -> str:
        return f"{self.name} @ {self.captured_on:%Y-%m-%d %H:%M:%S}"


class Instance(ReadOnlyModel):
    """A process that registered in pg-boss's instance registry (schema 44): a pg-boss (Node)
    instance, or a django_pgboss worker or monitor, with its heartbeat and what it works.

    The columns are pg-boss's; docs/pg-boss.md says what django_pgboss writes into the ones that
    describe a Node process (``node_version``, the pool sizes).
    """

    id = models.UUIDField(primary_key=True)
    name = models.TextField(null=True)
    host = models.TextField()
    pid = models.IntegerField()
    version = models.TextField()
    node_version = models.TextField()
    application_name = models.TextField(null=True)
    heartbeat_seconds = models.IntegerField()
    supervise = models.BooleanField()
    schedule = models.BooleanField()
    migrate = models.BooleanField()
    persist_queue_stats = models.BooleanField()
    persist_warnings = models.BooleanField()
    pool_max = models.IntegerField(null=True)
    pool_total = models.IntegerField(null=True)
    pool_idle = models.IntegerField(null=True)
    pool_waiting = models.IntegerField(null=True)
    workers = models.JSONField(default=list)
    metrics = models.JSONField(null=True)
    config = models.JSONField(default=dict)
    crash_restarts = models.IntegerField(default=0)
    crash_restarts_since = models.DateTimeField(null=True)
    started_on = models.DateTimeField()
    heartbeat_on = models.DateTimeField()
    stopped_on = models.DateTimeField(null=True)

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("instance")
        ordering = ["started_on", "id"]

    def __str__(self) -> str:
        return f"{self.name or self.host} (pid {self.pid})"


class JobDependency(ReadOnlyModel):
    """A flow edge: the child job stays blocked until the parent job completes."""

    pk = models.CompositePrimaryKey("child_name", "child_id", "parent_name", "parent_id")
    child_name = models.TextField()
    child_id = models.UUIDField()
    parent_name = models.TextField()
    parent_id = models.UUIDField()

    class Meta(ReadOnlyModel.Meta):
        db_table = schema_table("job_dependency")
        verbose_name_plural = "job dependencies"

    def __str__(self) -> str:
        return f"{self.child_name}/{self.child_id} waits for {self.parent_name}/{self.parent_id}"
