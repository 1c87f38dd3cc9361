"""manage.py shop_demo: migrate, create a queue, send a job, fetch it, complete it, and show it.

Until django_pgboss's job API (Boss.send / fetch / complete) lands, the demo speaks to pg-boss's
schema the way pg-boss's own SQL does: create_queue() for the queue, an INSERT for the send, a
FOR UPDATE SKIP LOCKED claim for the fetch. Everything it writes shows up in the admin.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from django_pgboss.conf import pgboss_settings
from django_pgboss.identifiers import quote_schema
from django_pgboss.models import Job, Queue

QUEUE = "order-emails"


class Command(BaseCommand):
    help = "Run the django_pgboss demo end to end on this project's database."

    def handle(self, *args: Any, **options: Any) -> None:
        schema = quote_schema(pgboss_settings.SCHEMA)
        self.stdout.write("1. Migrating (creates pg-boss schema version 43) ...")
        call_command("migrate", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT version FROM {schema}.version")
            self.stdout.write(
                f"   schema {pgboss_settings.SCHEMA!r} is at pg-boss version {cursor.fetchone()[0]}"
            )

            self.stdout.write(f"2. Creating queue {QUEUE!r} (policy standard, its own partition) ...")
            cursor.execute(
                f"SELECT {schema}.create_queue(%s, %s::jsonb)",
                [QUEUE, json.dumps({"policy": "standard", "partition": True, "retryLimit": 3})],
            )

            self.stdout.write("3. Sending a job inside a transaction ...")
            with transaction.atomic():
                cursor.execute(
                    f"INSERT INTO {schema}.job (name, data, retry_limit, policy) "
                    f"SELECT name, %s, retry_limit, policy FROM {schema}.queue WHERE name = %s RETURNING id",
                    [json.dumps({"order": 1001, "to": "ada@example.com"}), QUEUE],
                )
                job_id = cursor.fetchone()[0]
            self.stdout.write(f"   sent job {job_id}")

            self.stdout.write("4. Fetching it as a worker would (FOR UPDATE SKIP LOCKED) ...")
            cursor.execute(
                f"""
                WITH next AS (
                  SELECT id FROM {schema}.job
                  WHERE name = %s AND state < 'active' AND start_after < {schema}.job_now()
                  ORDER BY priority DESC, created_on
                  LIMIT 1
                  FOR UPDATE SKIP LOCKED
                )
                UPDATE {schema}.job j
                SET state = 'active', started_on = {schema}.job_now()
                FROM next WHERE j.name = %s AND j.id = next.id
                RETURNING j.id, j.data
                """,
                [QUEUE, QUEUE],
            )
            fetched_id, data = cursor.fetchone()
            self.stdout.write(f"   fetched {fetched_id} with data {data}")

            self.stdout.write("5. Completing it with an output ...")
            cursor.execute(
                f"UPDATE {schema}.job SET state = 'completed', completed_on = {schema}.job_now(), output = %s "
                f"WHERE name = %s AND id = %s AND state = 'active'",
                [json.dumps({"sent": True}), QUEUE, fetched_id],
            )

        job = Job.objects.get(id=fetched_id)
        queue = Queue.objects.get(name=QUEUE)
        total = Job.objects.filter(name=QUEUE).count()
        self.stdout.write(
            self.style.SUCCESS(
                f"Done: job {job.id} is {job.state} with output {job.output}; "
                f"queue {queue.name!r} ({queue.policy}, table {queue.table_name}) holds {total} job(s)."
            )
        )
        self._print_admin_instructions()

    def _print_admin_instructions(self) -> None:
        password = secrets.token_urlsafe(9)
        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(username="demo", defaults={"email": "demo@example.com"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(
            "\nSee it in the admin:\n"
            "  python example_project/manage.py runserver   (same embedded database)\n"
            "  open http://127.0.0.1:8000/admin/pgboss/job/ and log in as demo / " + password
        )
