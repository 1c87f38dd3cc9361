"""pg-boss schema 44 (pg-boss 12.36): the instance registry, the latency histograms and blocked count
on the queue row and the stats history, the job's trace context (sql/upgrade/v43_to_v44.sql), and
the read-only model of the instance table."""

from django.db import migrations, models

from django_pgboss.models import schema_table
from django_pgboss.operations import UpgradePgBossSchema


class Migration(migrations.Migration):
    dependencies = [("pgboss", "0004_schedules_admin_entry")]

    operations = [
        UpgradePgBossSchema(44),
        migrations.CreateModel(
            name="Instance",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("name", models.TextField(null=True)),
                ("host", models.TextField()),
                ("pid", models.IntegerField()),
                ("version", models.TextField()),
                ("node_version", models.TextField()),
                ("application_name", models.TextField(null=True)),
                ("heartbeat_seconds", models.IntegerField()),
                ("supervise", models.BooleanField()),
                ("schedule", models.BooleanField()),
                ("migrate", models.BooleanField()),
                ("persist_queue_stats", models.BooleanField()),
                ("persist_warnings", models.BooleanField()),
                ("pool_max", models.IntegerField(null=True)),
                ("pool_total", models.IntegerField(null=True)),
                ("pool_idle", models.IntegerField(null=True)),
                ("pool_waiting", models.IntegerField(null=True)),
                ("workers", models.JSONField(default=list)),
                ("metrics", models.JSONField(null=True)),
                ("config", models.JSONField(default=dict)),
                ("crash_restarts", models.IntegerField(default=0)),
                ("crash_restarts_since", models.DateTimeField(null=True)),
                ("started_on", models.DateTimeField()),
                ("heartbeat_on", models.DateTimeField()),
                ("stopped_on", models.DateTimeField(null=True)),
            ],
            options={
                "db_table": schema_table("instance"),
                "ordering": ["started_on", "id"],
                "abstract": False,
                "managed": False,
            },
        ),
    ]
