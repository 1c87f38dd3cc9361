"""pg-boss 12.35.0 itself (Node) accepts the schema django_pgboss migrates, with no drift.

These tests run pg-boss's published package: scripts/test.sh installs it and sets
PGBOSS_NODE_DIR. They commit for real (pg-boss connects on its own), hence transaction=True.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import QueuePolicy
from django_pgboss.identifiers import quote_identifier
from tests.catalog import read_catalog

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

REFERENCE_SCHEMA = "pgboss_reference"


@pytest.fixture
def reference_schema(run_pgboss):
    """A schema pg-boss 12.35.0 installed itself, dropped after the test."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {REFERENCE_SCHEMA} CASCADE")
    run_pgboss("install", REFERENCE_SCHEMA)
    yield REFERENCE_SCHEMA
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {REFERENCE_SCHEMA} CASCADE")


def create_queue(schema: str, name: str, **options) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote_identifier(schema)}.create_queue(%s, %s::jsonb)", [name, json.dumps(options)]
        )


def assert_same_catalog(ours, theirs) -> None:
    # Compared part by part so a failure names the part that differs.
    assert ours.tables == theirs.tables
    assert ours.partitions == theirs.partitions
    assert ours.columns == theirs.columns
    assert ours.indexes == theirs.indexes
    assert ours.constraints == theirs.constraints
    assert ours.functions == theirs.functions
    assert ours.enum == theirs.enum


def test_catalog_matches_the_schema_pg_boss_installs_itself(reference_schema):
    assert_same_catalog(read_catalog(pgboss_settings.SCHEMA), read_catalog(reference_schema))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {quote_identifier(pgboss_settings.SCHEMA)}.version")
        ours = cursor.fetchall()
        cursor.execute(f"SELECT version FROM {reference_schema}.version")
        assert ours == cursor.fetchall() == [(43,)]


def test_partitions_from_our_create_queue_match_pg_boss(reference_schema):
    for schema in (pgboss_settings.SCHEMA, reference_schema):
        create_queue(schema, "dead-letters", policy="standard")
        for policy in QueuePolicy:
            create_queue(schema, f"p-{policy}", policy=policy, partition=True, deadLetter="dead-letters")
    assert_same_catalog(read_catalog(pgboss_settings.SCHEMA), read_catalog(reference_schema))


def test_pg_boss_finds_no_drift_after_migrate(run_pgboss):
    report = run_pgboss("drift", pgboss_settings.SCHEMA)["drift"]
    assert report["ok"], json.dumps(report, indent=2)


def test_pg_boss_finds_no_drift_with_a_queue_of_each_policy_partitioned(run_pgboss):
    queues = [{"name": "shared-dlq", "options": {"policy": "standard"}}] + [
        {
            "name": f"{policy}.partitioned",
            "options": {"policy": policy, "partition": True, "deadLetter": "shared-dlq"},
        }
        for policy in QueuePolicy
    ]
    report = run_pgboss("drift", pgboss_settings.SCHEMA, json.dumps(queues))["drift"]
    assert report["ok"], json.dumps(report, indent=2)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {quote_identifier(pgboss_settings.SCHEMA)}.queue WHERE partition"
        )
        assert cursor.fetchone() == (len(QueuePolicy),)
