"""The citus-distributed backend's schema variant (sql/citus/distribute.sql): with
PGBOSS["BACKEND"] = "citus-distributed", the job table distributed over the Citus cluster by queue
name; in any other backend, nothing."""

from django.db import migrations

from django_pgboss.operations import DistributePgBossSchema


class Migration(migrations.Migration):
    dependencies = [("pgboss", "0007_schema_46")]

    operations = [DistributePgBossSchema()]
