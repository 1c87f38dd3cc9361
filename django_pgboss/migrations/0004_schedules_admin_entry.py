"""The admin index's stand-in model for schedules (models.Schedules); no table, no SQL."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("pgboss", "0003_queue_purge_permissions")]

    operations = [
        migrations.CreateModel(
            name="Schedules",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "schedule",
                "verbose_name_plural": "schedules",
                "db_table": "pgboss_admin_schedules_has_no_table",
                "managed": False,
                "default_permissions": (),
            },
        ),
    ]
