"""pg-boss schema 45 (pg-boss 12.37): upsert_by_key and job_i13, which keep racing upserts of one key
on one waiting job (sql/upgrade/v44_to_v45.sql)."""

from django.db import migrations

from django_pgboss.operations import UpgradePgBossSchema


class Migration(migrations.Migration):
    dependencies = [("pgboss", "0005_schema_44")]

    operations = [UpgradePgBossSchema(45)]
