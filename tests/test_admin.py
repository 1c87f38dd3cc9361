"""The admin lists pg-boss's tables read-only."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection
from django.urls import reverse

from django_pgboss.conf import pgboss_settings
from django_pgboss.identifiers import quote_identifier

pytestmark = pytest.mark.django_db


@pytest.fixture
def job_id():
    q = quote_identifier(pgboss_settings.SCHEMA)
    job_id = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q}.create_queue('invoices', %s::jsonb)", [json.dumps({"policy": "standard"})]
        )
        cursor.execute(
            f"INSERT INTO {q}.job (id, name, data) VALUES (%s, 'invoices', '{{\"n\": 7}}')", [job_id]
        )
    return job_id


@pytest.mark.parametrize("model", ["queue", "job", "queuestats", "warning"])
def test_changelists_render(admin_client, job_id, model):
    response = admin_client.get(reverse(f"admin:pgboss_{model}_changelist"))
    assert response.status_code == 200


def test_job_list_and_detail_show_the_job(admin_client, job_id):
    listing = admin_client.get(reverse("admin:pgboss_job_changelist"), {"state__exact": "created"})
    assert str(job_id) in listing.content.decode()
    detail = admin_client.get(reverse("admin:pgboss_job_change", args=[job_id]))
    assert detail.status_code == 200
    assert "invoices" in detail.content.decode()


def test_nothing_can_be_added_changed_or_deleted(admin_client, job_id):
    assert admin_client.get(reverse("admin:pgboss_job_add")).status_code == 403
    assert admin_client.get(reverse("admin:pgboss_job_delete", args=[job_id])).status_code == 403
    response = admin_client.post(reverse("admin:pgboss_job_change", args=[job_id]), {"state": "completed"})
    assert response.status_code == 403
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT state FROM {quote_identifier(pgboss_settings.SCHEMA)}.job WHERE id = %s", [job_id]
        )
        assert cursor.fetchone() == ("created",)
