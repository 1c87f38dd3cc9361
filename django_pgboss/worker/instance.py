"""The worker's row in the instance registry: its registrar, and the queues it works in pg-boss's
shape (one ``workers`` entry per queue, as pg-boss writes one per ``work()`` call).

The registration itself is api/instances.py's; the worker only builds one (``registrar()``) and
starts and stops it in its run (worker/engine.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from django_pgboss.api.instances import InstanceRegistrar, InstanceRole
from django_pgboss.records import InstanceWorker
from django_pgboss.wire import RECORDED_WORK_OPTIONS

# The defaults a registration's options are left out at, so two workers on the same defaults
# record the same options (pg-boss records only the options a work() call set).
_DEFAULTS: dict[str, Any] = {
    "include_metadata": False,
    "per_job_results": False,
    "transactional": False,
}


def registrar(worker: Any) -> InstanceRegistrar:
    """The registrar of ``worker`` (a Worker): no flags, its queues read from its snapshot."""
    ids: dict[str, str] = {}

    def entries() -> list[InstanceWorker]:
        snapshot = worker.snapshot()
        registrations = {r.queue: r for r in worker.registrations}
        result = []
        for queue in snapshot.queues:
            registration = registrations.get(queue.name)
            if registration is None:
                continue  # off_work() is ending it
            # The id Worker.work() returned for the queue, kept while the queue is worked, as a
            # work() call keeps its id.
            work_id = worker.work_ids.get(queue.name) or ids.setdefault(queue.name, str(uuid.uuid4()))
            options = {
                wire: value
                for option, wire in RECORDED_WORK_OPTIONS.items()
                if (value := getattr(registration, option, None)) is not None
                and value != _DEFAULTS.get(option)
            }
            result.append(
                InstanceWorker(
                    id=work_id,
                    queue=queue.name,
                    local_concurrency=queue.concurrency,
                    batch_size=queue.batch_size,
                    polling_interval_seconds=registration.polling_interval_seconds,
                    active=queue.claimed,
                    last_fetched_on=queue.last_fetched_at,
                    last_job_ended_on=queue.last_job_ended_at,
                    last_error_on=queue.last_error_at,
                    options=options,
                )
            )
        return result

    return InstanceRegistrar(
        worker.boss.context, role=InstanceRole(), workers=entries, sender=type(worker), owner=worker
    )
