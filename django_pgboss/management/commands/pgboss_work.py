"""manage.py pgboss_work: run the @work handlers of every installed app's jobs.py, and the tasks
of the django.tasks backends that are PgBossBackends (settings.TASKS)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_pgboss.api.boss import Boss
from django_pgboss.exceptions import PgBossError
from django_pgboss.management.console import configure_logging
from django_pgboss.version import version_text
from django_pgboss.worker.registry import Registration, autodiscover, registrations, task_registrations
from django_pgboss.worker.runner import Worker


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
            help="on SIGTERM/SIGINT, how long running handlers may finish before their jobs are failed (default 30)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for option in ("concurrency", "batch_size", "max_jobs"):
            value = options[option]
            if value is not None and value < 1:
                raise CommandError(f"--{option.replace('_', '-')} must be at least 1, not {value}")
        if options["grace_seconds"] < 0:
            raise CommandError(f"--grace-seconds must be >= 0, not {options['grace_seconds']}")
        try:
            autodiscover()
        except ImportError as exc:
            raise CommandError(f"could not import a jobs module: {exc}") from exc
        except PgBossError as exc:
            raise CommandError(f"invalid @work registration: {exc}") from exc
        boss = Boss()
        handlers = registrations()
        try:
            if options["tasks_backend"]:
                tasks, boss = self._tasks_backend(options["tasks_backend"])
                handlers = tasks
            else:
                tasks = task_registrations(boss)
                clash = sorted(set(tasks) & set(handlers))
                if clash:
                    raise CommandError(
                        f"queue(s) {', '.join(map(repr, clash))} have both an @work handler and a tasks "
                        f"backend ({tasks[clash[0]].label}); a queue is worked by one of them"
                    )
                handlers = {**handlers, **tasks}
            selected = self._select(handlers, options["queues"])
            # A tasks backend with CREATE_QUEUES creates its queues on first use; the worker is one.
            for runner in {r.handler for name, r in selected.items() if name in tasks}:
                runner.backend.ensure_queues()
        except (PgBossError, ImproperlyConfigured, ImportError) as exc:
            # ImportError: TASKS names a PgBossBackend, but Django's task framework is missing.
            raise CommandError(str(exc)) from exc
        existing = {q.name for q in boss.get_queues(list(selected))}
        missing = sorted(set(selected) - existing)
        if missing:
            raise CommandError(
                f"queue(s) {', '.join(map(repr, missing))} do not exist in schema {boss.schema!r}; "
                "create them with boss.create_queue() first"
            )
        try:
            plans = [
                r.replace(concurrency=options["concurrency"], batch_size=options["batch_size"])
                for r in selected.values()
            ]
        except PgBossError as exc:
            raise CommandError(str(exc)) from exc
        configure_logging(options["verbosity"])
        worker = Worker(
            plans,
            boss=boss,
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            grace_seconds=options["grace_seconds"],
        )
        self._install_signal_handlers(worker)
        progress = None
        if options["burst"] and sys.stderr.isatty():
            progress = threading.Thread(target=self._progress, args=(worker,), daemon=True)
            progress.start()
        stats = worker.run()
        if progress is not None:
            sys.stderr.write("\n")
        self.stdout.write(
            f"worked {stats.completed + stats.failed} job(s): {stats.completed} completed, "
            f"{stats.failed} failed, {stats.lost} lost to another attempt"
        )
        if worker.aborted:
            raise CommandError(
                "stopped at once by a second signal; running jobs were failed so they are retried"
            )

    def _tasks_backend(self, alias: str) -> tuple[dict[str, Registration], Boss]:
        from django_pgboss.tasks.backend import PgBossBackend
        from django_pgboss.tasks.compat import InvalidTaskBackend, task_backends

        try:
            backend = task_backends[alias]
        except InvalidTaskBackend as exc:
            raise CommandError(f"--tasks-backend {alias!r}: {exc}") from exc
        if not isinstance(backend, PgBossBackend):
            raise CommandError(
                f"--tasks-backend {alias!r} is a {type(backend).__name__}, not a PgBossBackend"
            )
        return {r.queue: r for r in backend.registrations()}, backend.boss

    def _select(self, registered: dict[str, Any], queues: list[str] | None) -> dict[str, Any]:
        if not registered:
            raise CommandError(
                "no @work handlers are registered: put them in an installed app's jobs.py "
                "(from django_pgboss import work), or configure a PgBossBackend in TASKS"
            )
        if not queues:
            return registered
        unknown = [q for q in queues if q not in registered]
        if unknown:
            raise CommandError(
                f"no @work handler for queue(s) {', '.join(map(repr, unknown))} (nor a tasks backend); "
                f"registered: {', '.join(sorted(registered))}"
            )
        return {q: registered[q] for q in queues}

    def _install_signal_handlers(self, worker: Worker) -> None:
        received: list[int] = []

        def on_signal(signum: int, frame: Any) -> None:
            received.append(signum)
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
