"""The drift check (pgboss_doctor, the deploy check, adoption) against schemas that are and are not 46."""

from __future__ import annotations

import io
import json
import os

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings

from django_pgboss import boss
from django_pgboss.checks import check_schema_installed
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import SCHEMA_VERSION, QueuePolicy
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.schema.catalog import read_catalog
from django_pgboss.schema.citus import distributed_catalog
from django_pgboss.schema.manifest import MANIFEST_PATH, expected_catalog, manifest_from_catalog


@pytest.mark.django_db
def test_manifest_describes_the_schema_migrate_creates():
    context = DatabaseContext(schema=pgboss_settings.SCHEMA)
    document = manifest_from_catalog(read_catalog(context), SCHEMA_VERSION)
    if context.distributed:
        # Migration 0008 made the citus-distributed variant of the schema the manifest describes.
        variant = distributed_catalog(expected_catalog())
        assert document == manifest_from_catalog(variant, SCHEMA_VERSION)
        return
    if os.environ.get("PGBOSS_WRITE_MANIFEST") == "1":
        MANIFEST_PATH.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert json.loads(MANIFEST_PATH.read_text(encoding="utf-8")) == document
    assert expected_catalog().enum == ["created", "retry", "active", "completed", "cancelled", "failed"]


def doctor(**options) -> tuple[int, str]:
    """Run pgboss_doctor; return its exit status (0, or 1 for a CommandError) and its output."""
    out = io.StringIO()
    try:
        call_command("pgboss_doctor", stdout=out, **options)
    except CommandError as exc:
        return 1, out.getvalue() + f"CommandError: {exc}\n"
    return 0, out.getvalue()


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        if DatabaseContext().distributed:
            # Citus changes a distributed table's shards over parallel connections, after which
            # the transaction (the test's) may not touch the reference tables beside it: the
            # statements change the schema one connection at a time instead.
            cursor.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        for statement in statements:
            cursor.execute(statement)


def q() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


@pytest.mark.django_db
def test_doctor_passes_the_schema_migrate_created():
    status, output = doctor()
    assert status == 0, output
    assert (
        f"pg-boss schema \"{pgboss_settings.SCHEMA}\" in database 'default': version {SCHEMA_VERSION}"
        in output
    )
    assert output.strip().endswith("OK: no drift.")


@pytest.mark.django_db
def test_doctor_passes_a_queue_of_each_policy_with_its_own_table():
    boss.create_queue("dlq")
    for policy in QueuePolicy:
        boss.create_queue(f"own.{policy}", policy=policy, partition=True, dead_letter="dlq")
    status, output = doctor()
    assert status == 0, output
    assert f"{len(QueuePolicy)} queue(s) with a table of their own" in output


@pytest.mark.django_db
def test_doctor_reports_a_dropped_index_and_a_changed_column():
    execute(
        f"DROP INDEX {q()}.job_common_i11",
        f"ALTER TABLE {q()}.queue ALTER COLUMN retry_limit TYPE bigint",
        f"ALTER TABLE {q()}.warning ALTER COLUMN message DROP NOT NULL",
    )
    status, output = doctor()
    assert status == 1
    assert "  - index job_common_i11 on job_common is missing\n" in output
    assert "  - column queue.retry_limit is bigint, expected integer\n" in output
    assert "  - column warning.message is nullable, expected NOT NULL\n" in output
    assert f"CommandError: schema drift: 3 differences from schema {SCHEMA_VERSION}" in output


@pytest.mark.django_db
def test_doctor_reports_drift_in_a_queue_table_a_function_a_default_and_the_enum():
    boss.create_queue("fifo", policy="key_strict_fifo", partition=True)
    table = boss.get_queue("fifo").table_name
    execute(
        f"DROP INDEX {q()}.{table}_i10",
        f"CREATE OR REPLACE FUNCTION {q()}.job_now() RETURNS timestamptz AS $$ SELECT now() $$ LANGUAGE sql STABLE",
        f"ALTER TABLE {q()}.queue ALTER COLUMN retry_delay SET DEFAULT 5",
        f"ALTER TABLE {q()}.schedule DROP CONSTRAINT schedule_kind_check",
        f"ALTER TYPE {q()}.job_state ADD VALUE 'paused'",
    )
    status, output = doctor()
    assert status == 1, output
    assert f"  - index {table}_i10 on {table} is missing\n" in output
    assert "  - function job_now() has a body pg-boss did not write" in output
    assert "  - column queue.retry_delay defaults to 5, expected no default\n" in output
    assert "  - table schedule lacks the constraint CHECK ((kind IN ('cron', 'rrule')))\n" in output
    assert (
        "  - type job_state has the values (created, retry, active, completed, cancelled, failed, paused), "
        "expected (created, retry, active, completed, cancelled, failed) in this order\n" in output
    )


@pytest.mark.django_db
def test_an_index_of_the_users_own_is_a_note_not_drift():
    execute(f"CREATE INDEX my_reporting_idx ON {q()}.job_common (completed_on)")
    status, output = doctor()
    assert status == 0, output
    assert "  note: index my_reporting_idx on job_common is not pg-boss's" in output


@pytest.mark.django_db
def test_doctor_on_a_database_that_was_never_migrated_says_so_in_one_line():
    with override_settings(PGBOSS={"SCHEMA": "never_migrated"}):
        status, output = doctor()
    assert status == 1
    assert output == (
        "CommandError: the pgboss schema is not installed in database 'default': run manage.py migrate pgboss\n"
    )


def test_doctor_with_an_unknown_pgboss_key_says_so_in_one_line():
    # The doctor skips the system checks, so it must report the E004 error itself.
    with override_settings(PGBOSS={"SCHEME": "typo"}):
        status, output = doctor()
    assert status == 1
    assert output.startswith("CommandError: settings.PGBOSS has unknown key(s) SCHEME; known keys are ")
    assert output.endswith("(pgboss.E004)\n") and output.count("\n") == 1


@pytest.mark.django_db
def test_deploy_check_warns_on_drift_and_is_quiet_otherwise():
    assert check_schema_installed(databases=None) == []
    execute(f"DROP INDEX {q()}.job_common_i4")
    (warning,) = check_schema_installed(databases=None)
    assert warning.id == "pgboss.W001"
    assert "index job_common_i4 on job_common is missing" in warning.msg
    assert check_schema_installed.tags == (checks.Tags.database,)
    assert check_schema_installed in checks.registry.registry.get_checks(include_deployment_checks=True)
    assert check_schema_installed not in checks.registry.registry.get_checks(include_deployment_checks=False)


@pytest.mark.django_db
def test_deploy_check_reports_a_schema_that_is_not_installed():
    with override_settings(PGBOSS={"SCHEMA": "never_migrated"}):
        (error,) = check_schema_installed(databases=None)
    assert error.id == "pgboss.E006"
    assert (
        error.msg == "the pgboss schema is not installed in database 'default': run manage.py migrate pgboss"
    )


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_doctor_passes_the_schema_pg_boss_installs_itself(run_pgboss):
    reference = "pgboss_doctor_reference"
    execute(f"DROP SCHEMA IF EXISTS {reference} CASCADE")
    try:
        run_pgboss("install", reference)
        run_pgboss(
            "drift",
            reference,
            json.dumps(
                [{"name": f"node.{p}", "options": {"policy": p, "partition": True}} for p in QueuePolicy]
            ),
        )
        with override_settings(PGBOSS={"SCHEMA": reference}):
            status, output = doctor()
        assert status == 0, output
        assert f"{len(QueuePolicy)} queue(s) with a table of their own" in output
    finally:
        execute(f"DROP SCHEMA IF EXISTS {reference} CASCADE")
