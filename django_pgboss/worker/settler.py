"""The worker's settler: one thread that writes every handler result, batched, isolating refusals.

Handler threads hand their results over a queue; the settler gathers what arrives within
SETTLE_DELAY_SECONDS and completes each queue's batch in one statement, each job fenced to the
attempt it was fetched as. A batch the database refuses (one output jsonb cannot hold, a trigger's
rule, anything that would fail the same way again) is split in halves until the job that holds the
refused value stands alone; that job is failed with a message saying why its output could not be
stored, and every other job of the batch completes. Trouble that says nothing about the values (a
lost connection, a deadlock) keeps the batch whole and retries it after a back-off.
"""

from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from django.db import connections

from django_pgboss.observability import tracing
from django_pgboss.records import Job
from django_pgboss.wire import storable_text
from django_pgboss.worker import job_logs, signalling
from django_pgboss.worker.messages import (
    Complete,
    CompleteEach,
    DeadLetter,
    Fail,
    Interrupt,
    Raised,
    Requeue,
    SettleRequest,
    StopSettling,
    Unclaim,
)
from django_pgboss.worker.outcomes import failure_output, is_refusal, unstorable_output
from django_pgboss.worker.ports import WorkerStore

logger = logging.getLogger("django_pgboss.worker")

#: A settle flush waits at most this long for more results to batch with.
SETTLE_DELAY_SECONDS = 0.02
#: ... and sends at most this many results in one statement.
SETTLE_BATCH = 500
#: While stopping, a statement that keeps failing for database trouble is given up after this many tries.
STOPPING_ATTEMPTS = 5


class Settler:
    """Writes the requests handed to ``put()`` (worker/messages.py) until a StopSettling has been
    reached and flushed.

    ``settled(name, units)`` is called once a queue's results are written (or given up), with the
    number of handler units they came from; ``trouble(doing, exc, failures)`` waits out database
    trouble; ``labels`` names each queue's handler for the messages jobs are failed with.
    """

    def __init__(
        self,
        jobs: WorkerStore,
        stats: Any,
        *,
        labels: Mapping[str, str],
        settled: Callable[[str, int], None],
        trouble: Callable[[str, BaseException, int], None],
        is_stopping: Callable[[], bool],
        worker: Any = None,
    ) -> None:
        self.jobs = jobs
        #: The Worker whose results these are: the signals' ``worker`` (None sends none).
        self.worker = worker
        self.stats = stats
        self.labels = labels
        self._settled = settled
        self._trouble = trouble
        self._is_stopping = is_stopping
        # SimpleQueue: every job passes through its queue's work queue and this one, and the C
        # implementation costs a fraction of queue.Queue's Condition-based one per put and get.
        self.queue: queue_module.SimpleQueue[SettleRequest] = queue_module.SimpleQueue()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the settler thread (``pgboss-settler``)."""
        self.thread = threading.Thread(target=self.run, name="pgboss-settler", daemon=True)
        self.thread.start()

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def put(self, item: SettleRequest) -> None:
        """Hand ``item`` to the settler thread."""
        self.queue.put(item)

    def run(self) -> None:
        """The settler thread: settle until a StopSettling is flushed."""
        try:
            self._settle_until_stopped()
        finally:
            connections.close_all()

    def _settle_until_stopped(self) -> None:
        pending: dict[str, list[tuple[Job, Any]]] = {}
        counted: dict[str, int] = {}
        failures = 0
        stopping = False
        while True:
            try:
                item: SettleRequest | None = self.queue.get(timeout=0.5)
            except queue_module.Empty:
                item = None
            deadline = time.monotonic() + SETTLE_DELAY_SECONDS
            # Gather what else arrives within the flush delay, so one statement settles a batch.
            while item is not None:
                # The hot kinds first: a completion is nearly every request.
                if type(item) is Complete:
                    pending.setdefault(item.queue, []).extend((job, item.output) for job in item.jobs)
                    counted[item.queue] = counted.get(item.queue, 0) + 1
                elif type(item) is CompleteEach:
                    pending.setdefault(item.queue, []).extend(zip(item.jobs, item.outputs, strict=True))
                    counted[item.queue] = counted.get(item.queue, 0) + 1
                else:
                    stopping = self._settle_one(item) or stopping
                if stopping or sum(map(len, pending.values())) >= SETTLE_BATCH:
                    break
                try:
                    item = self.queue.get(timeout=max(deadline - time.monotonic(), 0))
                except queue_module.Empty:
                    item = None
            for name in list(pending):
                remaining, trouble = self._complete(name, pending[name])
                if trouble is None:
                    failures = 0
                    del pending[name]
                    self._settled(name, counted.pop(name, 0))
                    continue
                pending[name] = remaining
                failures += 1
                if stopping and failures > STOPPING_ATTEMPTS:
                    logger.error("giving up settling %d job(s) of %s: %s", len(remaining), name, trouble)
                    del pending[name]
                    self._settled(name, counted.pop(name, 0))
                    continue
                self._trouble(f"completing jobs of {name}", trouble, failures)
            if stopping and not pending and self.queue.empty():
                return

    def _settle_one(self, item: SettleRequest) -> bool:
        """Write any request but a completion at once; True for the StopSettling."""
        if isinstance(item, StopSettling):
            return True
        if isinstance(item, Requeue | Interrupt):
            self.requeue(item.queue, item.jobs, started=isinstance(item, Interrupt), output=item.output)
        elif isinstance(item, Unclaim):
            self.requeue(item.queue, item.jobs, started=False, output=item.output)
            self._settled(item.queue, 1)
        elif isinstance(item, Raised):
            self.fail(item.queue, item.jobs, item.error, raised=True)
            self._settled(item.queue, 1)
        elif isinstance(item, Fail | DeadLetter):
            self.fail(item.queue, item.jobs, item.output, terminal=isinstance(item, DeadLetter))
            self._settled(item.queue, 1)
        return False

    def _complete(
        self, name: str, results: list[tuple[Job, Any]]
    ) -> tuple[list[tuple[Job, Any]], BaseException | None]:
        """Complete ``results``, isolating any the database refuses; returns what is left to retry
        after database trouble (and the trouble), or ([], None) once every result is settled."""
        chunks = [results]
        while chunks:
            chunk = chunks.pop()
            try:
                with tracing.settle_span(name, "complete", [job for job, _output in chunk]):
                    settled = self.jobs.complete_each(name, chunk)
            except Exception as exc:
                # Any refusal is isolated to its job, never retried for ever.
                if not is_refusal(exc):
                    chunks.append(chunk)
                    return [result for part in reversed(chunks) for result in part], exc
                if len(chunk) > 1:
                    # Halves, the first one next: a single bad output costs about 2 log2(n)
                    # statements, and every other result of the batch is completed.
                    middle = len(chunk) // 2
                    chunks += [chunk[middle:], chunk[:middle]]
                    continue
                job = chunk[0][0]
                logger.error(
                    "job %s of %s: the database refused its output (%s: %s); failing it",
                    job.id,
                    name,
                    type(exc).__name__,
                    storable_text(str(exc).strip()),
                )
                self.fail(name, [job], unstorable_output(self.labels.get(name, name), exc))
                continue
            signalling.jobs_completed(self.worker, name, chunk, settled)
            lost = len(chunk) - len(settled)
            if lost:
                logger.warning(
                    "%d job(s) of %s were not completed: their claim lapsed and another attempt holds them",
                    lost,
                    name,
                )
            self.stats.add(completed=len(settled), lost=lost)
        return [], None

    def fail(
        self, name: str, jobs: list[Job], failure: Any, *, terminal: bool = False, raised: bool = False
    ) -> dict[str, str]:
        """Fail ``jobs`` with ``failure`` (an exception or an output dict), so they retry (with
        ``terminal``, for good at once: to the dead letter); returns the state each job failed
        went to ('retry' or 'failed'), by id. With ``raised`` (the handler raised ``failure``)
        the exception is logged at ERROR once the failure is written, saying whether the jobs
        retry; a job failed for good is logged at WARNING after it, with its copy's id when it
        went to its dead letter queue.

        The output is made storable first; if the database refuses it anyway, a shorter one is
        tried, then each job on its own, so one job's refusal never keeps another from failing.
        Database trouble is waited out (given up after a few tries once the worker is stopping:
        the monitor then expires the jobs).
        """
        output = failure_output(failure)
        attempts = 0
        while True:
            try:
                with tracing.settle_span(name, "fail", jobs):
                    failed, copies, states = self.jobs.fail_reporting(name, jobs, output, terminal=terminal)
                break
            except Exception as exc:
                if is_refusal(exc):
                    if len(jobs) > 1:
                        each: dict[str, str] = {}
                        for job in jobs:
                            each.update(self.fail(name, [job], output, terminal=terminal, raised=False))
                        if raised:
                            job_logs.raised(name, jobs, failure, each)
                        return each
                    shorter = _shorter(output, exc)
                    if shorter != output:
                        output = shorter
                        continue
                    logger.error(
                        "could not fail job %s of %s (%s); the monitor will expire it",
                        jobs[0].id,
                        name,
                        storable_text(str(exc).strip()),
                    )
                    if raised:
                        job_logs.raised(name, jobs, failure, {})
                    return {}
                attempts += 1
                if self._is_stopping() and attempts > STOPPING_ATTEMPTS:
                    logger.error(
                        "could not fail job(s) %s of %s; the monitor will expire them", _ids(jobs), name
                    )
                    if raised:
                        job_logs.raised(name, jobs, failure, {})
                    return {}
                self._trouble(f"failing jobs of {name}", exc, attempts)
        self.stats.add(failed=failed, lost=len(jobs) - failed)
        if raised:
            job_logs.raised(name, jobs, failure, states)
        job_logs.failed_for_good(name, jobs, states, copies, terminal=terminal)
        signalling.jobs_failed(self.worker, name, jobs, output, failure, states, copies)
        return states

    def requeue(self, name: str, jobs: list[Job], *, started: bool, output: Any) -> None:
        """Put the jobs of a stopping worker back in the queue without charging an attempt
        (JobStore.requeue); any it cannot put back are failed with ``output`` instead."""
        attempts = 0
        while True:
            try:
                back = set(self.jobs.requeue(name, jobs, started=started, output=failure_output(output)))
                break
            except Exception as exc:
                if is_refusal(exc):
                    logger.warning(
                        "could not put job(s) %s of %s back (%s); failing them instead",
                        _ids(jobs),
                        name,
                        storable_text(str(exc).strip()),
                    )
                    back = set()
                    break
                attempts += 1
                if attempts > STOPPING_ATTEMPTS:
                    logger.error(
                        "could not put job(s) %s of %s back; the monitor will expire them", _ids(jobs), name
                    )
                    return
                self._trouble(f"putting jobs of {name} back", exc, attempts)
        self.stats.add(requeued=len(back))
        # A job missing from the ids is either held by another attempt now (the fenced fail below
        # changes nothing and counts it lost) or of a stately key with a job waiting in each state.
        rest = [job for job in jobs if job.id not in back]
        if rest:
            self.fail(name, rest, output)


def _shorter(output: dict[str, Any] | None, exc: BaseException) -> dict[str, Any] | None:
    """The last resort for a failure output the database refused: its name and a message only."""
    output = output or {}
    name = str(output.get("name", "Error"))[:200]
    reason = storable_text(f"{type(exc).__name__}: {str(exc).strip()}")[:500]
    message = storable_text(str(output.get("message", "")))[:2000]
    return {"name": name, "message": f"{message} (the full failure report could not be stored: {reason})"}


def _ids(jobs: list[Job]) -> str:
    return ", ".join(job.id for job in jobs[:5]) + (" ..." if len(jobs) > 5 else "")
