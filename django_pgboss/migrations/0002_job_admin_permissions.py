"""The admin's job action permissions (retry, cancel, resume, redrive); no SQL changes."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("pgboss", "0001_initial")]

    operations = [
        migrations.AlterModelOptions(
            name="job",
            options={
                "managed": False,
                "ordering": ["-created_on"],
                "permissions": [
                    ("retry_job", "Can retry failed jobs"),
                    ("cancel_job", "Can cancel jobs"),
                    ("resume_job", "Can resume cancelled jobs"),
                    ("redrive_job", "Can redrive dead-letter jobs"),
                ],
            },
        ),
    ]
