"""The admin's queue purge permissions (queued, finished, all jobs); no SQL changes."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("pgboss", "0002_job_admin_permissions")]

    operations = [
        migrations.AlterModelOptions(
            name="queue",
            options={
                "managed": False,
                "ordering": ["name"],
                "permissions": [
                    ("purge_queued_jobs", "Can delete a queue's queued jobs"),
                    ("purge_stored_jobs", "Can delete a queue's finished jobs"),
                    ("purge_all_jobs", "Can delete all of a queue's jobs"),
                ],
            },
        ),
    ]
