"""manage.py shop_demo: the shop running on django_pgboss for half a minute, then what it did.

It migrates; creates the shop's queues (order emails with a dead-letter queue, a stately sales
report queue, a key_strict_fifo loyalty queue per customer, the warehouse queue of the Django
tasks backend); starts a worker and the monitor in this process; places orders through the
shop's own code (each order and its jobs in one transaction) while a flaky mail server drops
connections (retries) and two customers have addresses nothing can be sent to (dead letters);
fixes one address and redrives its dead letter; then prints a summary, the redriven job's
lineage, and how to look at all of it in the admin.
"""

from __future__ import annotations

import os
import random
import secrets
import sys
import threading
import time
from typing import Any
from urllib.parse import quote as quote_url

from django.conf import settings
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections, connection, transaction
from django.db.models import Max
from django.test.utils import override_settings
from django.urls import reverse
from django.utils import timezone
from factory.random import reseed_random

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.models import Job, Version
from django_pgboss.monitor import run_timekeeper
from django_pgboss.tasks.registrations import task_registrations
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import autodiscover, registrations
from example_project.embedded_pg import choose_port
from example_project.shop import queues
from example_project.shop.demo.counts import QueueCounts, queue_counts
from example_project.shop.demo.display import LiveProgress
from example_project.shop.factories import CustomerFactory
from example_project.shop.models import Customer, DailyReport, Order
from example_project.shop.services import place_order, request_sales_report
from example_project.shop.views import PRICES

DEMO_QUEUES = [queues.EMAILS, queues.EMAILS_DEAD, queues.LOYALTY, queues.REPORTS, queues.WAREHOUSE]
DEAD_LETTERS = {queues.EMAILS: queues.EMAILS_DEAD}
#: Seconds between monitor passes (pgboss_monitor's default is 60): the charts get a point every 2 s.
MONITOR_INTERVAL = 2.0
#: The monitor counts throughput up to 10 s behind its pass (pg-boss's lag for late commits), so
#: the demo waits that long after the last job before the history holds every job.
WINDOW_LAG = 10.0
#: The demo superuser's password on the example project's own server (see _admin_instructions).
DEMO_PASSWORD = "pgboss-demo"
BAD_ADDRESSES = {"Grace Hopper": "grace.hopper(at)example.com", "Alan Turing": "alan.turing@example"}


class PaymentDeclined(Exception):
    """The demo's declined card: the order's transaction rolls back, jobs included."""


class Command(BaseCommand):
    help = (
        "Run the shop on django_pgboss for half a minute: queues, workers, the monitor, retries, a redrive."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--seconds", type=float, default=20.0, help="how long orders come in (default 20)"
        )
        parser.add_argument("--rate", type=float, default=6.0, help="orders per second (default 6)")
        parser.add_argument(
            "--no-wait-for-history",
            action="store_true",
            help="end without waiting for the monitor to count the last jobs (the charts then miss them)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["seconds"] <= 0 or options["rate"] <= 0:
            raise CommandError("--seconds and --rate must be positive")
        self.tty = self.stdout.isatty()
        self.rng = random.Random(42)
        self.started = time.monotonic()
        self.run_started = timezone.now()
        self._prepare()
        with _mail_backend("example_project.shop.demo.mail.FlakyEmailBackend"):
            mail.outbox = []
            try:
                self._run(options)
            except KeyboardInterrupt:
                # The worker and the monitor were stopped on the way out; no traceback for a Ctrl-C.
                raise CommandError(
                    "interrupted; run it again to start from scratch", returncode=130
                ) from None
        self._summary()
        self._admin_instructions()

    # -- 1. schema, queues, customers -----------------------------------------------------------

    def _prepare(self) -> None:
        self._say("Migrating (pg-boss's schema and the shop's tables) ...")
        call_command("migrate", verbosity=0)
        self._say(
            f"   pg-boss schema {pgboss_settings.SCHEMA!r} is at version {Version.objects.get().version} "
            f"on {_server(connection.settings_dict)}"
        )
        self._say("Creating the shop's queues (a second run starts from scratch) ...")
        queues.teardown()
        Order.objects.all().delete()
        Customer.objects.all().delete()
        DailyReport.objects.all().delete()
        queues.setup()
        descriptions = {
            queues.EMAILS: f"standard, 2 retries 1 s apart, dead letters to {queues.EMAILS_DEAD}",
            queues.EMAILS_DEAD: "standard: the dead-letter queue, nobody works it",
            queues.LOYALTY: "key_strict_fifo: one customer's jobs one at a time, in order",
            queues.REPORTS: "stately: at most one report waiting and one running",
            queues.WAREHOUSE: "standard, worked through the Django tasks backend (@task)",
        }
        for name in DEMO_QUEUES:
            self._say(f"   {name:<19} {descriptions[name]}")
        schedule = next(s for s in boss.get_schedules(queues.REPORTS))
        self._say(
            f"   schedule: {queues.REPORTS} at {schedule.cron!r} ({schedule.timezone}), the nightly report"
        )
        reseed_random(7)  # Faker's names, seeded, so every run tells the same story
        self.customers = CustomerFactory.create_batch(10)
        self.bad_customers = [CustomerFactory(name=n, email=e) for n, e in BAD_ADDRESSES.items()]

    # -- 2. traffic, workers, monitor ----------------------------------------------------------

    def _run(self, options: dict[str, Any]) -> None:
        autodiscover()
        plans = [*registrations().values(), *task_registrations(boss).values()]
        self.worker = Worker(plans, grace_seconds=5.0)
        self.monitor_stop = threading.Event()
        self.monitor_passes = 0
        self.orders = self.reports_requested = self.reports_dropped = self.rolled_back = 0
        self.redrive: tuple[str, str] | None = None
        self.phase = "starting"
        self.crashed: BaseException | None = None
        self._say(
            f"Starting a worker ({len(plans)} queues, {sum(p.concurrency for p in plans)} handler threads) and "
            f"the monitor (a pass every {MONITOR_INTERVAL:g} s); placing about {options['rate']:g} orders/s "
            f"for {options['seconds']:g} s ...\n"
        )
        # Open every queue's throughput window now, before the first order: a queue's first count
        # only starts its window (10 s behind the pass), so a first pass of the monitor thread
        # coming more than 10 s after the first jobs (a loaded machine) would count them nowhere.
        boss.supervise(DEMO_QUEUES, interval_seconds=0)
        threads = [
            threading.Thread(target=self._work, name="demo-worker", daemon=True),
            threading.Thread(target=self._monitor, name="demo-monitor", daemon=True),
        ]
        for thread in threads:
            thread.start()
        self.progress = LiveProgress(
            self.stdout,
            lambda: queue_counts(DEMO_QUEUES, DEAD_LETTERS),
            self._status,
            tty=self.tty,
        )
        self.progress.start()
        try:
            self._traffic(options["seconds"], options["rate"])
            self.phase = "working off what is left"
            self._wait(self._drained, timeout=30, what="the queues to drain")
            if not options["no_wait_for_history"]:
                self._count_the_last_jobs()
        finally:
            self.worker.stop()
            self.monitor_stop.set()
            for thread in threads:
                thread.join(timeout=15)
            self.progress.stop()

    def _traffic(self, seconds: float, rate: float) -> None:
        self.phase = "orders coming in"
        today = timezone.localdate().isoformat()
        deadline = time.monotonic() + seconds
        tick = 0
        # For --seconds, and at least until the first declined card (the sixth order): on a slow
        # or loaded machine a short run would otherwise end before the story it tells.
        while time.monotonic() < deadline or not self.rolled_back:
            tick += 1
            if tick <= len(self.bad_customers):
                # The two customers whose address is broken order first: their emails fail, retry, dead-letter.
                customer = self.bad_customers[tick - 1]
            else:
                customer = self.rng.choice(self.customers)
            item = self.rng.choice(list(PRICES))
            if tick % 30 == 6:  # now and then a card is declined
                self._declined_order(customer, item)
            else:
                place_order(customer, item, self.rng.randint(1, 3), PRICES[item])
                self.orders += 1
            if tick % 3 == 0:
                # The back office asks for a fresh sales report far more often than one takes to run.
                self.reports_requested += 1
                self.reports_dropped += request_sales_report(today) is None
            if self.redrive is None:
                self._maybe_redrive()
            time.sleep(self.rng.expovariate(rate))
        if self.redrive is None:
            self._wait(self._maybe_redrive, timeout=30, what="a dead letter to redrive")

    def _declined_order(self, customer: Customer, item: str) -> None:
        try:
            with transaction.atomic():
                order = place_order(customer, item, 1, PRICES[item])
                raise PaymentDeclined(order.pk)
        except PaymentDeclined as declined:
            self.rolled_back += 1
            if self.rolled_back == 1:
                order_id = declined.args[0]
                left = Job.objects.filter(data__order_id=order_id).count()
                self.progress.event(
                    f"card declined for order {order_id}: its transaction rolled back with its 3 jobs "
                    f"({left} jobs of order {order_id} in pg-boss)"
                )

    def _maybe_redrive(self) -> bool:
        """Once a dead letter of the first broken address is waiting: fix the address, redrive it."""
        customer = self.bad_customers[0]
        copy = (
            Job.objects.filter(name=queues.EMAILS_DEAD, source_name=queues.EMAILS, state="created")
            .filter(data__order_id__in=list(customer.orders.values_list("pk", flat=True)))
            .order_by("created_on")
            .first()
        )
        if copy is None:
            return False
        self.progress.event(
            f"order {copy.data['order_id']}'s email was dead-lettered after {copy.source_retry_count + 1} "
            f"attempts: {copy.source_output.get('message')}"
        )
        customer.email = "grace.hopper@example.com"
        customer.save(update_fields=["email"])
        result = boss.redrive(queues.EMAILS_DEAD, ids=[str(copy.id)])
        (old_id, new_id) = result.moved_ids[0]
        self.redrive = (old_id, new_id)
        self.progress.event(
            f"support fixed the address to {customer.email!r} and redrove the email: "
            f"boss.redrive({queues.EMAILS_DEAD!r}, ids=[...]) moved {result.moved}, new job {new_id[:8]}..."
        )
        return True

    def _work(self) -> None:
        try:
            self.worker.run()
        except Exception as exc:
            self.crashed = exc
            raise
        finally:
            connection.close()

    def _monitor(self) -> None:
        """What pgboss_monitor --interval 2 does, in a thread: a supervise pass, and cron."""
        try:
            run_timekeeper(boss)
            while not self.monitor_stop.is_set():
                close_old_connections()
                boss.supervise(interval_seconds=MONITOR_INTERVAL)
                self.monitor_passes += 1
                self.monitor_stop.wait(MONITOR_INTERVAL / 2)
        except Exception as exc:
            self.crashed = exc
            raise
        finally:
            connection.close()

    def _status(self) -> str:
        """Two lines under the live table: what the demo is doing, and what the shop did so far."""
        return (
            f"{self.phase}\n{self.orders} orders ({self.rolled_back} declined), {len(mail.outbox)} emails sent, "
            f"{self.reports_dropped}/{self.reports_requested} reports dropped (stately), "
            f"{self.monitor_passes} monitor passes"
        )

    def _drained(self) -> bool:
        waiting = Job.objects.filter(name__in=DEMO_QUEUES, state__in=["created", "retry", "active"])
        return not waiting.exclude(name=queues.EMAILS_DEAD).exists() and self._redriven_job_done()

    def _redriven_job_done(self) -> bool:
        return self.redrive is not None and Job.objects.filter(id=self.redrive[1], state="completed").exists()

    def _history_complete(self) -> bool:
        """True once every queue's throughput window reaches past its last created or finished job."""
        last = {
            row["name"]: max(filter(None, (row["created"], row["finished"])))
            for row in Job.objects.filter(name__in=DEMO_QUEUES)
            .values("name")
            .annotate(created=Max("created_on"), finished=Max("completed_on"))
        }
        counted = {q.name: q.delta_on for q in boss.get_queues(DEMO_QUEUES)}
        return all(counted.get(name) is not None and counted[name] >= moment for name, moment in last.items())

    def _count_the_last_jobs(self) -> None:
        """Wait until the monitor's window reaches past the last job, then ask for a pass.

        The monitor counts throughput up to WINDOW_LAG seconds behind its pass (pg-boss's margin
        for late commits), so nothing can count the last jobs before then. One line says so; the
        pass is then run here at once (interval 0: every queue is due) instead of waiting for
        the monitor thread's next turn.
        """
        last = self._last_job_moment()
        remaining = 0.0 if last is None else (last - timezone.now()).total_seconds() + WINDOW_LAG
        self.phase = "counting the last jobs"
        self.progress.quiet = True
        if remaining > 0:
            self.progress.event(
                f"the monitor counts jobs {WINDOW_LAG:g} s after they finish: one pass in {remaining:.0f} s "
                "counts the last of them"
            )
            self._wait(lambda: False, timeout=remaining, what="", expire_quietly=True)
        deadline = time.monotonic() + 10
        while True:
            boss.supervise(DEMO_QUEUES, interval_seconds=0)
            if self._history_complete():
                return
            if time.monotonic() > deadline:
                raise CommandError("gave up after 10 s waiting for the monitor's history")
            time.sleep(0.5)

    def _last_job_moment(self) -> Any:
        moments = Job.objects.filter(name__in=DEMO_QUEUES).aggregate(
            created=Max("created_on"), finished=Max("completed_on")
        )
        return max(filter(None, moments.values()), default=None)

    def _wait(self, condition: Any, *, timeout: float, what: str, expire_quietly: bool = False) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.crashed is not None:
                raise CommandError(f"the demo's worker or monitor stopped: {self.crashed!r}")
            if time.monotonic() > deadline:
                if expire_quietly:
                    return
                raise CommandError(f"gave up after {timeout:g} s waiting for {what}")
            time.sleep(0.25)

    # -- 3. what happened ----------------------------------------------------------------------

    def _summary(self) -> None:
        counts = queue_counts(DEMO_QUEUES, DEAD_LETTERS)
        self._say(f"\nDone in {time.monotonic() - self.started:.0f} s. Per queue:")
        header = ("completed", "failed", "retried", "dead-lettered", "waiting", "redriven")
        self._say(f"   {'queue':<19}" + "".join(f"{h:>{len(h) + 2}}" for h in header))
        for name, c in counts.items():
            self._say(
                f"   {name:<19}" + "".join(f"{v:>{len(h) + 2}}" for v, h in zip(_row(c), header, strict=True))
            )
        waiting = Job.objects.filter(name=queues.EMAILS_DEAD, state="created").count()
        report = DailyReport.objects.order_by("-day").first()
        # Every snapshot that counted a window, however short: two passes a fraction of a second
        # apart (the monitor thread's and the one _count_the_last_jobs asks for) count a window
        # whose delta_seconds rounds to 0, and the last jobs may be in it. Only the snapshot
        # that opened the window (delta_seconds None) counted nothing.
        stats = [
            p
            for p in boss.get_queue_stats(queues.EMAILS, start=self.run_started)
            if p.delta_seconds is not None
        ]
        lines = [
            f"{self.orders} orders placed, {self.rolled_back} more declined (rolled back with their jobs)",
            f"{len(mail.outbox)} confirmation emails sent (Django's in-memory email backend)",
            f"{self.reports_dropped} of {self.reports_requested} report requests dropped by the stately policy"
            + (f"; the report: {report.orders} orders, {report.revenue} EUR" if report else ""),
            f"{waiting} dead letter{'s' if waiting != 1 else ''} still waiting in {queues.EMAILS_DEAD} "
            "(the other broken address)",
            f"{len(stats)} throughput snapshots of {queues.EMAILS} by the monitor: "
            f"{sum(p.created_delta or 0 for p in stats)} created, {sum(p.completed_delta or 0 for p in stats)} "
            f"completed in {sum(p.delta_seconds for p in stats)} s",
        ]
        self._say("\n".join(f"   {line}" for line in lines))
        self._say(
            "   (dead-lettered: copied into the dead-letter queue; waiting: of those, still there to be redriven)"
        )
        assert self.redrive is not None
        self._say(
            f"\nThe redriven email's lineage, boss.get_lineage({self.redrive[1][:8]}...), oldest first:"
        )
        for hop, job in enumerate(boss.get_lineage(self.redrive[1]), 1):
            output = job.output or {}
            detail = output.get("message") or (f"sent to {output['sent_to']}" if "sent_to" in output else "")
            attempts = job.retry_count + 1
            self._say(
                f"   {hop}. {job.id}  {job.name}  {job.state}, {attempts} attempt{'s' if attempts > 1 else ''}"
            )
            if detail:
                self._say(f"      {detail}")

    def _admin_instructions(self) -> None:
        embedded = not os.environ.get("DATABASE_URL")
        # The example project's own server takes local connections without a password (trust),
        # so a secret password adds nothing there: it stays the same on every run, and a browser
        # that saved it keeps working. On a server of your own (DATABASE_URL) it is new each run.
        password = DEMO_PASSWORD if embedded else secrets.token_urlsafe(9)
        user, _ = get_user_model().objects.get_or_create(
            username="demo", defaults={"email": "demo@example.com"}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        port = choose_port(8000)
        base = f"http://127.0.0.1:{port}"
        # Commands to paste as they are: the venv's python, so no venv needs activating.
        manage = f"{_relative(sys.executable)} {_relative(_manage_py())}"
        assert self.redrive is not None
        lineage = reverse("admin:pgboss_job_lineage", args=[quote(f"{queues.EMAILS}/{self.redrive[1]}")])
        charts = reverse("admin:pgboss_queue_change", args=[quote(queues.EMAILS)])
        lines = [
            "",
            "See it in the admin, on the same database:",
            f"   {manage} runserver 127.0.0.1:{port}",
            f"   log in at {base}/admin/ as demo / {password}"
            + (" (the same on every run)" if embedded else " (a new one on every run)"),
            f"   the email queue's charts:   {base}{charts}?range=15m",
            f"   the redriven job's lineage: {base}{lineage}",
            f"   dead letters still waiting: {base}{reverse('admin:pgboss_job_changelist')}?name={queues.EMAILS_DEAD}",
            f"   place an order yourself:    {base}{reverse('shop:order')}, with a worker and the monitor running:",
            f"   {manage} pgboss_work",
            f"   {manage} pgboss_monitor",
            f"Its database: DATABASE_URL={_database_url(connection.settings_dict)}",
        ]
        if embedded:
            lines.append(
                f"Stop the example project's PostgreSQL when done: {_relative(sys.executable)} "
                f"{_relative(_embedded_pg())} stop"
            )
        self._say("\n".join(lines))

    def _say(self, message: str) -> None:
        self.stdout.write(message)


def _mail_backend(path: str) -> override_settings:
    """Send this process's mail through ``path`` (Django 6.1 reads MAILERS, earlier ones EMAIL_BACKEND)."""
    if hasattr(settings, "MAILERS"):
        return override_settings(MAILERS={"default": {"BACKEND": path}})
    return override_settings(EMAIL_BACKEND=path)


def _server(database: dict[str, Any]) -> str:
    """Where the database is: a socket folder (the embedded server), or host:port."""
    host = database["HOST"] or "localhost"
    return host if host.startswith("/") else f"{host}:{database['PORT'] or 5432}"


def _row(c: QueueCounts) -> tuple[int, ...]:
    return (c.completed, c.failed, c.retried, c.dead_lettered, c.dead_letter_waiting, c.redriven)


def _database_url(database: dict[str, Any]) -> str:
    """The database as a URL libpq and the example project's settings read (no password shown)."""
    host = database["HOST"] or "localhost"
    if host.startswith("/"):
        host = quote_url(host, safe="")  # a socket folder: percent-encoded, as libpq reads it
    user = database.get("USER") or "postgres"
    return f"postgresql://{user}@{host}:{database['PORT'] or 5432}/{database['NAME']}"


def _manage_py() -> str:
    return os.path.join(os.path.dirname(__file__), "..", "..", "..", "manage.py")


def _embedded_pg() -> str:
    from example_project import embedded_pg

    return embedded_pg.__file__


def _relative(path: str) -> str:
    """``path`` relative to the current folder when it is inside it (shorter to copy)."""
    path = os.path.abspath(path)
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
