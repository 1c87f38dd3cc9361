"""Each pg-boss release the suite installs works on schema 46 rolled back to its version by
manage.py pgboss_rollback (it sends, fetches and completes jobs, ours among them), and migrate
brings the schema back to 46, drift-free.

The releases are installed by scripts/test.sh under .venvs/ (PGBOSS_LEGACY_NODE_DIRS).
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from tests.test_rollback import jobs, rollback, version_of
from tests.test_upgrade import RELEASES, legacy, schema_for

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def restored():
    """Whatever the test leaves, the suite's schema is back at 46 afterwards."""
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {quote_identifier(pgboss_settings.SCHEMA)} CASCADE")
    MigrationRecorder(connection).migration_qs.filter(app="pgboss").delete()
    call_command("migrate", "pgboss", verbosity=0)


@pytest.mark.parametrize("release", list(RELEASES))
def test_a_release_works_on_the_schema_rolled_back_to_its_version_and_migrate_restores_46(restored, release):
    version = RELEASES[release]
    with schema_for(release):
        # schema_for may name another schema, which this django_pgboss installs at 46 first.
        MigrationRecorder(connection).migration_qs.filter(app="pgboss").delete()
        call_command("migrate", "pgboss", verbosity=0)
        boss.create_queue("rb-work", partition=True)
        ours = boss.send("rb-work", {"n": 1, "text": "héllo"})

        out = rollback("--to", str(version))
        assert f"from version 46 to {version}." in out
        worked = legacy(
            release, pgboss_settings.SCHEMA, [], [{"name": "rb-work", "data": {"n": 2}}], "rb-work"
        )
        assert worked["release"] == release and version_of(pgboss_settings.SCHEMA) == [(version,)]
        assert sorted(worked["completed"]) == sorted([ours, *worked["ids"]])

        out = io.StringIO()
        call_command("migrate", "pgboss", stdout=out)
        if version < 43:
            assert f"from version {version} to 43 (catalog checked)" in out.getvalue()
        assert "Applying pgboss.0007_schema_46... OK" in out.getvalue()
        doctor = io.StringIO()
        call_command("pgboss_doctor", stdout=doctor)
        assert "OK: no drift." in doctor.getvalue()
        assert {job_id: state for job_id, (_, state, _) in jobs().items()} == dict.fromkeys(
            [ours, *worked["ids"]], "completed"
        )
        assert boss.send("rb-work", {"n": 3}) and boss.fetch("rb-work")[0].data == {"n": 3}
