from __future__ import annotations

import json
import os
import threading

from django.apps import AppConfig

_lock = threading.Lock()


class SignalAppConfig(AppConfig):
    name = "tests.signalapp"
    label = "signalapp"

    def ready(self) -> None:
        from django_pgboss import signals

        path = os.environ["PGBOSS_TEST_SIGNAL_LOG"]

        def write(name: str):
            def receiver(sender, **kwargs):
                entry = {"signal": name, "pid": os.getpid(), "sender": sender.__name__}
                job = kwargs.get("job")
                if job is not None:
                    from tests.helpers import job_row

                    entry["job"] = job.id
                    entry["state"] = job_row(job.id, "state")[0]
                with _lock, open(path, "a") as f:
                    f.write(json.dumps(entry) + "\n")

            return receiver

        for name in ("worker_started", "job_started", "job_completed", "job_failed", "worker_stopped"):
            getattr(signals, name).connect(write(name), weak=False, dispatch_uid=f"signalapp.{name}")
