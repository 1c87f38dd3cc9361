"""manage.py shop_demo: the job API end to end on this project's database.

It migrates, creates an order-email queue with a dead-letter queue, sends jobs inside a
transaction, works them (one fails until it is dead-lettered), and prints what happened and how to
see it in the admin.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.models import Version

QUEUE = "order-emails"
DEAD_LETTERS = "order-emails-dead"


class Command(BaseCommand):
    help = "Run the django_pgboss demo end to end on this project's database."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write("1. Migrating: pg-boss's schema ...")
        call_command("migrate", verbosity=0)
        version = Version.objects.get().version
        self.stdout.write(f"   schema {pgboss_settings.SCHEMA!r} is at pg-boss version {version}")

        self.stdout.write(f"2. Creating queues {QUEUE!r} (own partition, 2 retries) and {DEAD_LETTERS!r} ...")
        # A fresh start on every run: the demo's queues (and their jobs) from a previous run go first.
        boss.delete_queue(QUEUE)
        boss.delete_queue(DEAD_LETTERS)
        boss.create_queue(DEAD_LETTERS)
        boss.create_queue(QUEUE, partition=True, retry_limit=2, dead_letter=DEAD_LETTERS)

        self.stdout.write("3. Sending three order emails in one transaction ...")
        with transaction.atomic():
            sent = boss.insert(
                QUEUE,
                [
                    {"data": {"order": 1001, "to": "ada@example.com"}, "priority": 5},
                    {"data": {"order": 1002, "to": "grace@example.com"}},
                    {"data": {"order": 1003, "to": "not-an-address"}},
                ],
                return_ids=True,
            )
        self.stdout.write(f"   sent {len(sent)} jobs")

        self.stdout.write("4. Working the queue (the bad address fails, retries, and is dead-lettered) ...")
        completed = failed = 0
        while jobs := boss.fetch(QUEUE, batch_size=10, ignore_start_after=True):
            for job in jobs:
                if "@" in job.data["to"]:
                    completed += boss.complete(QUEUE, job, {"sent_to": job.data["to"]})
                else:
                    failed += boss.fail(QUEUE, job, ValueError(f"cannot email {job.data['to']!r}"))
        (dead,) = boss.find_jobs(DEAD_LETTERS)
        self.stdout.write(
            self.style.SUCCESS(
                f"Done: {completed} emails sent, {failed} failed attempts; job {dead.source_id} was "
                f"dead-lettered after {dead.source_retry_count + 1} attempts with "
                f"{dead.source_output['message']!r}."
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
            "  .venvs/demo/bin/python example_project/manage.py runserver   (same embedded database)\n"
            f"  open http://127.0.0.1:8000/admin/pgboss/job/ and log in as demo / {password}"
        )
