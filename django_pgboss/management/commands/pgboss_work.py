"""manage.py pgboss_work: run the @work handlers of every installed app's jobs.py, and the tasks
of the django.tasks backends that are PgBossBackends (settings.TASKS).

The command parses its arguments and prints progress and the outcome; which handlers run on which
database is django_pgboss.worker.launch's, the running itself django_pgboss.worker.engine's (and
the modules it assembles).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_pgboss import arguments
from django_pgboss import boss as default_boss
from django_pgboss.api.warnings import start_retry
from django_pgboss.exceptions import InvalidOption
from django_pgboss.management import metrics_port
from django_pgboss.management.console import configure_logging
from django_pgboss.management.schema_wait import until_installed
from django_pgboss.tasks.registrations import worker_tasks
from django_pgboss.version import version_text
from django_pgboss.worker.backoff import when_reachable
from django_pgboss.worker.engine import EXIT_ABANDONED_THREADS, MAX_GRACE_SECONDS, Worker
from django_pgboss.worker.launch import LaunchError, build_worker


class Command(BaseCommand):
    help = (
        "Work jobs: fetch from the queues that have @work handlers, and the queues of PgBossBackend "
        "tasks backends, and run them until stopped."
    )

    def get_version(self) -> str:
        """What --version prints: django_pgboss's version and the pg-boss release it ports."""
        return version_text()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue", action="append", dest="queues", metavar="Q", help="work only this queue (repeatable)"
        )
        parser.add_argument("--concurrency", type=int, help="handler threads per queue (overrides @work)")
        parser.add_argument("--batch-size", type=int, help="jobs per fetch (overrides @work)")
        parser.add_argument("--burst", action="store_true", help="drain the queues, then exit")
        parser.add_argument(
            "--tasks-backend",
            metavar="ALIAS",
            help="work only the queues of this TASKS backend, on its database and schema",
        )
        parser.add_argument("--max-jobs", type=int, help="stop after this many jobs")
        parser.add_argument(
            "--grace-seconds",
            type=float,
            default=30.0,
            help=(
                "on SIGTERM/SIGINT, how long running handlers may finish before their jobs go back "
                "to the queue (default 30)"
            ),
        )
        parser.add_argument(
            "--max-abandoned-threads",
            type=int,
            help=(
                "how many handler threads that ignore their job's cancellation signal (past its "
                "deadline) may go on running before the worker stops and exits with status "
                f"{EXIT_ABANDONED_THREADS} (default settings.PGBOSS['MAX_ABANDONED_THREADS'])"
            ),
        )
        metrics_port.add_arguments(parser, "this worker's jobs, handler durations and delays")

    def handle(self, *args: Any, **options: Any) -> None:
        for option in ("concurrency", "batch_size", "max_jobs"):
            value = options[option]
            if value is not None:
                flag = f"--{option.replace('_', '-')}"
                if value < 1:
                    raise CommandError(f"{flag} must be at least 1, not {value}")
                try:
                    arguments.integer(flag, value, minimum=1)
                except InvalidOption as exc:
                    raise CommandError(str(exc)) from None
        if options["max_abandoned_threads"] is not None and options["max_abandoned_threads"] < 0:
            raise CommandError(
                f"--max-abandoned-threads must be >= 0, not {options['max_abandoned_threads']}"
            )
        grace = options["grace_seconds"]
        if not 0 <= grace <= MAX_GRACE_SECONDS:  # NaN too
            raise CommandError(f"--grace-seconds must be from 0 to {MAX_GRACE_SECONDS}, not {grace}")
        metrics_port.check(options)
        configure_logging(options["verbosity"])
        # Installed before the worker exists, so that a stop while waiting for the database (a
        # worker started before its database, in a container or after a reboot) ends cleanly.
        waiting = threading.Event()
        holder: list[Worker] = []
        self._install_signal_handlers(holder, waiting)

        def build() -> Worker:
            return build_worker(
                queues=options["queues"],
                concurrency=options["concurrency"],
                batch_size=options["batch_size"],
                burst=options["burst"],
                tasks_backend=options["tasks_backend"],
                task_source=worker_tasks,
                max_jobs=options["max_jobs"],
                grace_seconds=options["grace_seconds"],
                max_abandoned_threads=options["max_abandoned_threads"],
            )

        retried: list[bool] = []

        def warn_start_retry(exc: BaseException) -> None:
            # Once per start, as pg-boss's start_retry: the schema wait may reach the database
            # several times.
            if not retried:
                retried.append(True)
                start_retry(default_boss.context, exc, doing="the worker", sender=Worker)

        def reach() -> Worker | None:
            return when_reachable(build, waiting, "the worker", on_first_failure=warn_start_retry)

        try:
            # A burst drains what is there: on a database not migrated yet, it stops with the one
            # line. A long-running worker waits for the migration instead (schema_wait.py).
            worker = reach() if options["burst"] else until_installed(reach, waiting, "the worker")
        except LaunchError as exc:
            raise CommandError(str(exc)) from exc
        if worker is None:
            self.stdout.write("stopped before the database answered: no job was fetched")
            return
        holder.append(worker)
        if waiting.is_set():
            # A signal came between the build and here, when there was no worker to stop yet.
            worker.stop()
        # The worker holds its metrics for the run (Django holds signal receivers weakly).
        worker.instruments = metrics_port.worker_metrics(options)
        metrics_port.start(options, queues=False)
        progress = None
        if options["burst"] and sys.stderr.isatty():
            progress = threading.Thread(target=self._progress, args=(worker,), daemon=True)
            progress.start()
        try:
            stats = worker.run()
        finally:
            metrics_port.process_exited()
        if progress is not None:
            sys.stderr.write("\n")
        self.stdout.write(
            f"worked {stats.completed + stats.failed} job(s): {stats.completed} completed, "
            f"{stats.failed} failed, {stats.lost} lost to another attempt"
        )
        if worker.aborted:
            raise CommandError("stopped at once by a second signal; running jobs were put back in the queue")
        if worker.exit_status:
            # Not a CommandError (status 1): the process supervisor may tell this stop apart.
            self.stderr.write(
                f"stopped: {stats.abandoned} handler thread(s) ignored their job's cancellation signal, "
                f"more than --max-abandoned-threads allows; exiting with status {worker.exit_status} "
                "for a fresh process to take over"
            )
            raise SystemExit(worker.exit_status)

    def _install_signal_handlers(self, holder: list[Worker], waiting: threading.Event) -> None:
        received: list[int] = []

        def on_signal(signum: int, frame: Any) -> None:
            received.append(signum)
            if not holder:
                waiting.set()
                return
            worker = holder[0]
            if len(received) == 1:
                logging.getLogger("django_pgboss.worker").info(
                    "%s: finishing running jobs (send it again to stop at once)", signal.Signals(signum).name
                )
                worker.stop()
            else:
                worker.stop(graceful=False)

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)

    def _progress(self, worker: Worker) -> None:
        while True:
            stats = worker.stats
            sys.stderr.write(
                f"\r{stats.completed} completed, {stats.failed} failed, {stats.rate:,.0f} jobs/s   "
            )
            sys.stderr.flush()
            if worker.stopping.wait(0.5):
                return
