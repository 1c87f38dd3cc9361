"""The read-only models read pg-boss's tables and refuse every write."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import SCHEMA_VERSION, JobState
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import ReadOnlyModelError
from django_pgboss.models import (
    Job,
    JobDependency,
    Queue,
    QueueStats,
    Schedule,
    Subscription,
    Version,
    Warning,
)

pytestmark = pytest.mark.django_db

ALL_MODELS = [Version, Queue, Job, Schedule, Subscription, Warning, QueueStats, JobDependency]


def q() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


def execute(sql: str, params=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.fixture
def queue_with_job():
    execute(f"SELECT {q()}.create_queue('dead', '{{\"policy\": \"standard\"}}'::jsonb)")
    execute(
        f"SELECT {q()}.create_queue('emails', %s::jsonb)",
        [json.dumps({"policy": "standard", "deadLetter": "dead", "partition": True})],
    )
    job_id = uuid.uuid4()
    execute(
        f"INSERT INTO {q()}.job (id, name, data, singleton_key) VALUES (%s, 'emails', %s, 'k1')",
        [job_id, json.dumps({"to": "ada@example.com"})],
    )
    return job_id


def test_every_model_is_unmanaged_and_schema_qualified():
    for model in ALL_MODELS:
        assert model._meta.managed is False
        assert model._meta.db_table.startswith(f'{pgboss_settings.SCHEMA}".')
        assert model._meta.app_label == "pgboss"


def test_version_reads_43():
    assert list(Version.objects.values_list("version", flat=True)) == [SCHEMA_VERSION]


def test_queue_and_job_read_through_the_orm(queue_with_job):
    queue = Queue.objects.get(name="emails")
    assert queue.policy == "standard"
    assert queue.partition is True
    assert queue.dead_letter.name == "dead"
    assert queue.ready_history == []
    job = Job.objects.get(id=queue_with_job)
    assert job.name == "emails"
    assert job.state == JobState.CREATED
    assert job.data == {"to": "ada@example.com"}
    assert job.singleton_key == "k1"
    assert job.retry_limit == 2
    assert Job.objects.filter(state=JobState.CREATED, name="emails").count() == 1
    assert str(job) == f"emails/{queue_with_job}"


def test_composite_key_models_read(queue_with_job):
    execute(f"INSERT INTO {q()}.schedule (name, key, cron) VALUES ('emails', 'nightly', '0 3 * * *')")
    execute(f"INSERT INTO {q()}.subscription (event, name) VALUES ('order.paid', 'emails')")
    schedule = Schedule.objects.get()
    assert (schedule.name, schedule.key, schedule.cron, schedule.kind, schedule.timezone) == (
        "emails",
        "nightly",
        "0 3 * * *",
        "cron",
        "UTC",
    )
    assert Subscription.objects.get().pk == ("order.paid", "emails")


@pytest.mark.parametrize(
    "write",
    [
        lambda m: m.objects.create(),
        lambda m: m.objects.get_or_create(),
        lambda m: m.objects.update_or_create(),
        lambda m: m.objects.bulk_create([m()]),
        lambda m: m.objects.bulk_update([m()], ["pk"]),
        lambda m: m.objects.all().update(),
        lambda m: m.objects.all().delete(),
        lambda m: m().save(),
        lambda m: m().delete(),
    ],
    ids=[
        "create",
        "get_or_create",
        "update_or_create",
        "bulk_create",
        "bulk_update",
        "update",
        "qs_delete",
        "save",
        "delete",
    ],
)
@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_writes_raise_a_clear_error(model, write):
    with pytest.raises(ReadOnlyModelError, match=rf"pgboss\.{model.__name__} is read-only"):
        write(model)


def test_a_read_job_cannot_be_saved_or_deleted(queue_with_job):
    job = Job.objects.get(id=queue_with_job)
    job.state = JobState.COMPLETED
    with pytest.raises(ReadOnlyModelError, match="Boss API"):
        job.save()
    with pytest.raises(ReadOnlyModelError):
        job.delete()
    assert Job.objects.get(id=queue_with_job).state == JobState.CREATED


def test_deleting_a_related_django_row_does_not_touch_pg_boss(queue_with_job):
    # Django's own tables are untouched by the read-only models: nothing cascades into them.
    user = User.objects.create(username="ops")
    user.delete()
    assert Job.objects.filter(id=queue_with_job).exists()
