"""pg-boss schema version 43: the SQL in sql/0001_initial.sql (or the schema pg-boss already
installed, adopted), and the read-only models over it."""

from django.db import migrations, models

import django_pgboss.models
from django_pgboss.models import schema_table
from django_pgboss.operations import InstallPgBossSchema


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        InstallPgBossSchema("0001_initial.sql", reverse_filename="0001_initial.down.sql"),
        migrations.CreateModel(
            name="Job",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("name", models.TextField()),
                ("priority", models.IntegerField(default=0)),
                ("data", models.JSONField(null=True)),
                (
                    "state",
                    models.TextField(
                        choices=[
                            ("created", "Created"),
                            ("retry", "Retry"),
                            ("active", "Active"),
                            ("completed", "Completed"),
                            ("cancelled", "Cancelled"),
                            ("failed", "Failed"),
                        ]
                    ),
                ),
                ("retry_limit", models.IntegerField()),
                ("retry_count", models.IntegerField()),
                ("retry_delay", models.IntegerField()),
                ("retry_backoff", models.BooleanField()),
                ("retry_delay_max", models.IntegerField(null=True)),
                ("expire_seconds", models.IntegerField()),
                ("deletion_seconds", models.IntegerField()),
                ("singleton_key", models.TextField(null=True)),
                ("singleton_on", models.DateTimeField(null=True)),
                ("group_id", models.TextField(null=True)),
                ("group_tier", models.TextField(null=True)),
                ("start_after", models.DateTimeField()),
                ("created_on", models.DateTimeField()),
                ("started_on", models.DateTimeField(null=True)),
                ("completed_on", models.DateTimeField(null=True)),
                ("keep_until", models.DateTimeField()),
                ("output", models.JSONField(null=True)),
                ("dead_letter", models.TextField(null=True)),
                ("policy", models.TextField(null=True)),
                ("heartbeat_on", models.DateTimeField(null=True)),
                ("heartbeat_seconds", models.IntegerField(null=True)),
                ("blocked", models.BooleanField(default=False)),
                ("blocking", models.BooleanField(default=False)),
                ("pending_dependencies", models.IntegerField(default=0)),
                ("source_name", models.TextField(null=True)),
                ("source_id", models.UUIDField(null=True)),
                ("source_created_on", models.DateTimeField(null=True)),
                ("source_retry_count", models.IntegerField(null=True)),
                ("source_output", models.JSONField(null=True)),
                ("source_root_id", models.UUIDField(null=True)),
            ],
            options={
                "db_table": schema_table("job"),
                "ordering": ["-created_on"],
                "abstract": False,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="JobDependency",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "child_name",
                        "child_id",
                        "parent_name",
                        "parent_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("child_name", models.TextField()),
                ("child_id", models.UUIDField()),
                ("parent_name", models.TextField()),
                ("parent_id", models.UUIDField()),
            ],
            options={
                "verbose_name_plural": "job dependencies",
                "db_table": schema_table("job_dependency"),
                "abstract": False,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Queue",
            fields=[
                ("name", models.TextField(primary_key=True, serialize=False)),
                (
                    "policy",
                    models.TextField(
                        choices=[
                            ("standard", "Standard"),
                            ("short", "Short"),
                            ("singleton", "Singleton"),
                            ("stately", "Stately"),
                            ("exclusive", "Exclusive"),
                            ("key_strict_fifo", "Key Strict Fifo"),
                        ]
                    ),
                ),
                ("retry_limit", models.IntegerField()),
                ("retry_delay", models.IntegerField()),
                ("retry_backoff", models.BooleanField()),
                ("retry_delay_max", models.IntegerField(null=True)),
                ("expire_seconds", models.IntegerField()),
                ("retention_seconds", models.IntegerField()),
                ("deletion_seconds", models.IntegerField()),
                ("partition", models.BooleanField()),
                ("table_name", models.TextField()),
                ("deferred_count", models.IntegerField(default=0)),
                ("queued_count", models.IntegerField(default=0)),
                ("ready_count", models.IntegerField(default=0)),
                ("warning_queued", models.IntegerField(default=0)),
                ("active_count", models.IntegerField(default=0)),
                ("failed_count", models.IntegerField(default=0)),
                ("total_count", models.IntegerField(default=0)),
                ("created_delta", models.IntegerField(default=0)),
                ("completed_delta", models.IntegerField(default=0)),
                ("failed_delta", models.IntegerField(default=0)),
                ("delta_on", models.DateTimeField(null=True)),
                ("delta_seconds", models.IntegerField(null=True)),
                (
                    "ready_history",
                    django_pgboss.models.ArrayColumn("integer", default=list),
                ),
                ("heartbeat_seconds", models.IntegerField(null=True)),
                ("notify", models.BooleanField(default=False)),
                (
                    "singletons_active",
                    django_pgboss.models.ArrayColumn("text", null=True),
                ),
                ("monitor_claim_on", models.DateTimeField(null=True)),
                ("monitor_on", models.DateTimeField(null=True)),
                ("maintain_on", models.DateTimeField(null=True)),
                ("created_on", models.DateTimeField()),
                ("updated_on", models.DateTimeField()),
            ],
            options={
                "db_table": schema_table("queue"),
                "ordering": ["name"],
                "abstract": False,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="QueueStats",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("name", models.TextField()),
                ("deferred_count", models.IntegerField(default=0)),
                ("queued_count", models.IntegerField(default=0)),
                ("ready_count", models.IntegerField(default=0)),
                ("active_count", models.IntegerField(default=0)),
                ("failed_count", models.IntegerField(default=0)),
                ("total_count", models.IntegerField(default=0)),
                ("created_delta", models.IntegerField(null=True)),
                ("completed_delta", models.IntegerField(null=True)),
                ("failed_delta", models.IntegerField(null=True)),
                ("delta_seconds", models.IntegerField(null=True)),
                ("delta_on", models.DateTimeField(null=True)),
                ("captured_on", models.DateTimeField()),
            ],
            options={
                "verbose_name_plural": "queue stats",
                "db_table": schema_table("queue_stats"),
                "ordering": ["-captured_on"],
                "abstract": False,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Schedule",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "name", "key", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("name", models.TextField()),
                ("key", models.TextField(default="")),
                ("kind", models.TextField(default="cron")),
                ("cron", models.TextField()),
                ("timezone", models.TextField(default="UTC", null=True)),
                ("data", models.JSONField(null=True)),
                ("options", models.JSONField(null=True)),
                ("created_on", models.DateTimeField()),
                ("updated_on", models.DateTimeField()),
                ("last_job_id", models.UUIDField(null=True)),
            ],
            options={
                "db_table": schema_table("schedule"),
                "abstract": False,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Subscription",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "event", "name", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("event", models.TextField()),
                ("name", models.TextField()),
                ("created_on", models.DateTimeField()),
                ("updated_on", models.DateTimeField()),
            ],
            options={
                "db_table": schema_table("subscription"),
                "abstract": False,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Version",
            fields=[
                ("version", models.IntegerField(primary_key=True, serialize=False)),
                ("cron_on", models.DateTimeField(null=True)),
                ("bam_on", models.DateTimeField(null=True)),
                ("flow_on", models.DateTimeField(null=True)),
                ("reindex_on", models.DateTimeField(null=True)),
                ("monitor_backoff_on", models.DateTimeField(null=True)),
            ],
            options={
                "db_table": schema_table("version"),
                "abstract": False,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Warning",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("type", models.TextField()),
                ("message", models.TextField()),
                ("data", models.JSONField(null=True)),
                ("created_on", models.DateTimeField()),
            ],
            options={
                "db_table": schema_table("warning"),
                "ordering": ["-created_on"],
                "abstract": False,
                "managed": False,
            },
        ),
    ]
