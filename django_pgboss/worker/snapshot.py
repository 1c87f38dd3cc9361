"""Worker.snapshot(): what a worker is running, as pg-boss's ``getWipData()`` reports it.

pg-boss keeps, for each of its workers (one per queue a ``work()`` call serves), its state, how
many jobs it holds, when it last fetched, when its last job started and ended, and its last error,
and emits them as the ``wip`` event. The same readings here, per queue, plus the jobs each handler
thread is running and since when. A snapshot is a copy taken under the worker's lock, which it
holds for a few dictionary reads; the snapshot itself holds nothing of the worker's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django_pgboss.worker.handlers import HandlerPool
from django_pgboss.worker.state import Board


def _moment(seconds: float | None) -> dt.datetime | None:
    return None if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC)


@dataclass(frozen=True)
class RunningJob:
    """A job a handler thread is running: its id, queue, attempt (retry_count), when its handler
    call started, and the thread's name."""

    id: str
    queue: str
    retry_count: int
    started_at: dt.datetime | None
    thread: str


@dataclass(frozen=True)
class QueueSnapshot:
    """One queue of a worker (pg-boss's wip entry for one worker).

    ``state`` is ``"active"``, or ``"stopping"`` once the worker stops fetching. ``claimed`` counts
    the jobs claimed and not yet settled (running, or waiting in the buffer for a thread);
    ``running`` lists the ones a handler thread has started. ``free`` is the units the queue may
    still claim. The ``last_*`` moments are None until they happen; ``last_error`` is the last
    exception a handler of the queue raised or a database error of its fetch loop.
    """

    name: str
    handler: str
    concurrency: int
    batch_size: int
    batch: bool
    state: str
    claimed: int
    free: int
    running: list[RunningJob]
    last_fetched_at: dt.datetime | None
    last_job_started_at: dt.datetime | None
    last_job_ended_at: dt.datetime | None
    last_error: BaseException | None
    last_error_at: dt.datetime | None


@dataclass(frozen=True)
class WorkerSnapshot:
    """A worker at one moment: when it was made, whether it is stopping, its counters (fetched,
    completed, failed, lost, requeued) and each of its queues."""

    created_at: dt.datetime
    stopping: bool
    stats: dict[str, int]
    queues: list[QueueSnapshot] = field(default_factory=list)

    @property
    def running(self) -> list[RunningJob]:
        """Every job running on the worker, whichever queue."""
        return [job for queue in self.queues for job in queue.running]


def take(board: Board, pool: HandlerPool, created_at: float) -> WorkerSnapshot:
    """The snapshot of a worker made of ``board`` and ``pool``, under the board's lock."""
    with board.lock:
        running: dict[str, list[RunningJob]] = {}
        for thread, unit in pool.running_units():
            since = _moment(pool.current_since.get(thread))
            running.setdefault(unit.queue, []).extend(
                RunningJob(
                    id=job.id,
                    queue=unit.queue,
                    retry_count=job.retry_count,
                    started_at=since,
                    thread=thread.name,
                )
                for job in unit.jobs
            )
        state = "stopping" if board.stopping.is_set() else "active"
        queues = [
            QueueSnapshot(
                name=name,
                handler=queue.registration.label,
                concurrency=queue.registration.concurrency,
                batch_size=queue.registration.batch_size,
                batch=queue.registration.batch,
                state=state,
                claimed=len(queue.in_flight),
                free=queue.free,
                running=running.get(name, []),
                last_fetched_at=_moment(queue.last_fetched_at),
                last_job_started_at=_moment(queue.last_job_started_at),
                last_job_ended_at=_moment(queue.last_job_ended_at),
                last_error=queue.last_error,
                last_error_at=_moment(queue.last_error_at),
            )
            for name, queue in board.queues.items()
        ]
    stats = board.stats
    with stats.lock:
        counters = {
            key: getattr(stats, key) for key in ("fetched", "completed", "failed", "lost", "requeued")
        }
    return WorkerSnapshot(
        created_at=_moment(created_at) or dt.datetime.now(dt.UTC),
        stopping=board.stopping.is_set(),
        stats=counters,
        queues=queues,
    )
