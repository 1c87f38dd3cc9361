"""pg-boss schema 46 (pg-boss 12.38): job_i14 to job_i17 and the queue's retained count
(sql/upgrade/v45_to_v46.sql). The index builds of a table that holds jobs go through bam, built
concurrently by the monitor after this migration commits."""

from django.db import migrations

from django_pgboss.operations import UpgradePgBossSchema


class Migration(migrations.Migration):
    dependencies = [("pgboss", "0006_schema_45")]

    operations = [UpgradePgBossSchema(46)]
