"""Async handlers: ``@work`` on an ``async def`` runs on one event loop of the worker's own.

Why one loop per worker process, on a thread of its own: a coroutine costs a little memory, not
a thread, so one loop carries every async queue's ``concurrency`` coroutines at once, as one ASGI
server loop carries every request of a process. A loop per queue would buy isolation only from a
handler that blocks its loop (a sync call where an ``await`` belongs), and that is a bug to fix in
the handler, not to be hidden by more loops; the sync API says so when it happens (Boss's calls
raise SynchronousOnlyOperation on a running loop, naming their twin). The main thread stays
free for the command's signal handlers, and the fetch loops, the settler and the heartbeat stay
the threads they are for sync queues: an async queue differs only in who runs its claimed units.

Each async queue has ``concurrency`` slots on the loop. A slot is a coroutine that takes one
claimed unit at a time (a job, or a list with ``batch=True``), awaits the handler, and hands the
outcome to the worker exactly as a handler thread does: the same batched settles, per-job
results, fences, stats and stop.

Cancellation is the threaded handlers' design (worker/deadlines.py), with what a coroutine allows
on top: it can be cancelled. At the unit's deadline (its claim plus the longest
``expire_in_seconds`` of its jobs) the worker fails the attempt (JobDeadlineExceeded, fenced),
frees the slot's place in the queue and sets the jobs' ``job.signal``; whenever a job's signal is
set (that deadline, a heartbeat that finds the claim gone, the end of a stop's grace period) its
coroutine is cancelled. Both are armed by a look at the queue's running units every LOOK_SECONDS,
so a unit that ends sooner pays for neither; a signal set before the look cancels the coroutine
at it. A coroutine that swallows the cancellation and runs on for longer than
ABANDON_GRACE_SECONDS is abandoned: left running, counted and logged, and a new slot takes the
next unit in place of the one left running it.

How a unit reaches a slot: a free slot takes the next unit from the queue's buffer itself, on the
loop (a non-blocking get), so a job crosses no thread on its way to its coroutine while the buffer
holds units, which at a batch size above the concurrency is nearly always. Only a slot that finds
the buffer empty waits, for the queue's bridge thread, which blocks on the buffer for it (one unit
per waiting slot) and hands the unit over to the loop. Either way a unit leaves the buffer only
for a slot that starts it, so units no slot has started stay in the buffer, where a stop puts them
back uncharged, as it does for threaded queues. A unit's job_started is sent on a plain thread,
where receivers may query (the bridge, or the queue's announcer thread for a unit a slot took
itself, a hop paid only while job_started has receivers).

The async ORM inside a handler: Django runs a coroutine's ORM calls through
``sync_to_async(thread_sensitive=True)``. Every job runs in a ``ThreadSensitiveContext``, as
Django's ASGI handler runs each request in one, so one job's queries run on one thread and
connection, never interleaved with another job's. Where asgiref lets a context be given its
executor (3.13 and later), each slot keeps one thread, in one context, for all its jobs, which
run one after another: its connection is reused as a handler thread's is (closed when obsolete,
after each job, as Django does after a request); with an older asgiref, each job gets a context
and a thread that end with it, its connection closed.

A stop gives running coroutines the grace period; those still running at its end are cancelled
(their jobs have gone back to the queue by then, as a threaded handler's do), and so are all of
them at once on a second signal.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import inspect
import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.db import close_old_connections, connections

from django_pgboss.records import Job
from django_pgboss.worker import job_logs
from django_pgboss.worker.messages import Errored, Outcome, Returned, Unit
from django_pgboss.worker.state import RUNNING_HANDLER

#: How long a coroutine cancelled at its deadline may go on before its slot leaves it running.
ABANDON_GRACE_SECONDS = 1.0
#: The longest a slot runs unit after unit without giving the loop a turn (see _take_units()).
SLOT_TURN_SECONDS = 0.01
#: How often an async queue looks at its running units to arm their deadlines and signals.
LOOK_SECONDS = 0.1


class AsyncHost(Protocol):
    """What a queue's slots need from the worker (worker/async_host.py)."""

    def finish(self, name: str, jobs: list[Job], outcome: Outcome | None) -> None:
        """A unit ended: settle ``outcome`` (None: nothing to settle) and free its place."""

    def deadline(self, jobs: list[Job]) -> float | None:
        """When the unit must be done by (time.monotonic(), which is the loop's clock), or None."""

    def expired(self, name: str, jobs: list[Job]) -> None:
        """The unit passed its deadline: fail its attempt, free its place, set its jobs' signals."""

    def abandoned(self, name: str, jobs: list[Job]) -> None:
        """A coroutine ignored its cancellation past ABANDON_GRACE_SECONDS: count and log it."""

    def abandoned_ended(self, name: str, jobs: list[Job]) -> None:
        """An abandoned coroutine ended after all."""

    def announces(self) -> bool:
        """Whether announce() has anything to do (job_started has receivers): a unit a slot took
        from the buffer itself crosses to a thread for it only then."""

    def announce(self, name: str, jobs: list[Job]) -> None:
        """A unit goes to a free slot: its job_started, sent on a plain thread (the queue's bridge
        or its announcer, where receivers may use the ORM), never on the loop."""

    def started(self, name: str) -> None:
        """The handler call starts (on the loop: what must not block, the instruments)."""

    def ended(self, name: str, seconds: float) -> None:
        """The handler call returned, raised or was cancelled after ``seconds``."""

    def span(self, name: str, jobs: list[Job]) -> contextlib.AbstractContextManager[Any]:
        """The process span around the handler call (observability/tracing.py)."""


logger = logging.getLogger("django_pgboss.worker")


# asgiref 3.13 lets a ThreadSensitiveContext run on an executor the caller keeps (one per slot).
_CONTEXT_TAKES_EXECUTOR = "executor" in inspect.signature(ThreadSensitiveContext.__init__).parameters


#: How long the loop may go without running a callback before the watchdog warns: a coroutine
#: that blocks (time.sleep(), sync I/O, a CPU loop with no await) stalls every async queue.
LOOP_STALL_WARNING_SECONDS = 1.0
#: How often the loop notes that it runs, and the watchdog looks.
_LOOP_TICK_SECONDS = 0.1


class EventLoopThread:
    """The worker's event loop, run forever on a thread of its own until stop(), and its watchdog.

    A coroutine that blocks the loop cannot be cancelled (a cancellation is delivered at an
    ``await``), and while it blocks no other coroutine of any async queue runs and no deadline
    timer fires; heartbeats, fetches and settles go on (they are threads). So that it is never
    silent, a watchdog thread warns once the loop has run no callback for
    LOOP_STALL_WARNING_SECONDS, naming the task that holds it (the job's queue and id), and again
    when it runs again; ``stalls`` counts them.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="pgboss-asyncio", daemon=True)
        self._watchdog = threading.Thread(target=self._watch, name="pgboss-asyncio-watchdog", daemon=True)
        self._ended = threading.Event()
        self._beat = time.monotonic()
        #: How many times the loop was blocked past LOOP_STALL_WARNING_SECONDS.
        self.stalls = 0

    def start(self) -> None:
        self._thread.start()
        self.loop.call_soon_threadsafe(self._tick)
        self._watchdog.start()

    def _tick(self) -> None:
        self._beat = time.monotonic()
        self.loop.call_later(_LOOP_TICK_SECONDS, self._tick)

    def _watch(self) -> None:
        blocked_since: float | None = None
        while not self._ended.wait(_LOOP_TICK_SECONDS):
            beat = self._beat
            late = time.monotonic() - beat - _LOOP_TICK_SECONDS
            if late >= LOOP_STALL_WARNING_SECONDS and blocked_since is None:
                blocked_since = beat
                self.stalls += 1
                # Read from this thread: the task whose step the loop is in, the one that blocks.
                holder = asyncio.current_task(self.loop)
                logger.warning(
                    "the async handlers' event loop has been blocked for %.1fs by %s: a blocking "
                    "call in a coroutine (time.sleep(), sync I/O, a loop with no await) stalls every "
                    "async queue, and deadlines are kept only once it returns; await instead, or "
                    "run the call in a thread (sync_to_async, asyncio.to_thread)",
                    late,
                    holder.get_name() if holder is not None else "a callback",
                )
            elif blocked_since is not None and late < _LOOP_TICK_SECONDS:
                logger.warning(
                    "the async handlers' event loop runs again, after %.1fs blocked",
                    time.monotonic() - blocked_since,
                )
                blocked_since = None
        # The loop can run again and be stopped within one look (a burst worker whose last job
        # follows the one that blocked ends at once): its last beat still tells that it ran.
        if blocked_since is not None and self._beat > blocked_since:
            logger.warning(
                "the async handlers' event loop runs again, after %.1fs blocked", self._beat - blocked_since
            )

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                # Bounded: a coroutine that swallows its cancellation must not hold the exit.
                self.loop.run_until_complete(asyncio.wait(pending, timeout=2))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        """Run ``coroutine`` on the loop; returns a future the calling thread may wait on."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, callback: Callable[..., Any], *args: Any) -> None:
        self.loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout: float = 10.0) -> None:
        self._ended.set()
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)


class EventLoopSlots:
    """The worker's one event loop, started when the first async queue opens its slots, and each
    async queue's slots on it: what the async host (worker/async_host.py) is handed to run them."""

    def __init__(self) -> None:
        self.loop: EventLoopThread | None = None

    def open(self, state: Any, host: AsyncHost) -> AsyncQueue:
        """``state``'s queue's slots on the loop, not started yet (their ``start()`` does)."""
        if self.loop is None:
            self.loop = EventLoopThread()
            self.loop.start()
        return AsyncQueue(state, self.loop, host)

    def close(self) -> None:
        """End the loop, once every queue's slots ended; nothing when no async queue opened."""
        if self.loop is not None:
            self.loop.stop()


#: A watched unit's deadline timer (None: it has no deadline) and its signals' callback removers.
_Armed = tuple[asyncio.TimerHandle | None, list[Callable[[], None]]]


class AsyncQueue:
    """One async queue's ``concurrency`` slots on the worker's loop, each taking the next unit
    from the queue's buffer once free (see the module docstring)."""

    def __init__(self, state: Any, loop: EventLoopThread, host: AsyncHost) -> None:
        self.state = state
        self.registration = state.registration
        self.loop = loop
        self.host = host
        self.concurrency = self.registration.concurrency
        # Slots that found the buffer empty, waiting for the bridge (on the loop only), and how
        # many units the bridge may take for them: it never takes one no slot waits for.
        self._waiters: collections.deque[asyncio.Future[Unit | None]] = collections.deque()
        # One token a waiting slot: a C queue, where a Python semaphore's condition variable cost
        # an async job's hand-over several microseconds at batch size 1.
        self._wanted: queue_module.SimpleQueue[bool] = queue_module.SimpleQueue()
        self._closing = False
        self._slots: list[asyncio.Task[None]] = []
        self._opened = 0
        # Everything below is keyed by the slot's task, which runs its unit's coroutine itself.
        # The unit each slot is running now.
        self._running: dict[asyncio.Task[None], Unit] = {}
        # The running units a look found (see _look()): their deadline timers (None: no
        # deadline) and their signals' callbacks to remove when they end.
        self._watched: dict[asyncio.Task[None], _Armed] = {}
        self._look_timer: asyncio.TimerHandle | None = None
        # How many cancel() requests the worker made of a slot for its running unit (each undone
        # once the unit ends), and the units failed at their deadline, whose end is no longer
        # theirs to settle.
        self._cancels: dict[asyncio.Task[None], int] = {}
        self._expired: set[asyncio.Task[None]] = set()
        # Slots left running a unit that ignored its cancellation (see _give_up()): each ends
        # once that unit does, and another slot has taken its place.
        self._left: set[asyncio.Task[None]] = set()
        queue = self.registration.queue
        self._bridge = threading.Thread(target=self._bridge_loop, name=f"pgboss-async-{queue}", daemon=True)
        # job_started for the units the slots take themselves, while it has receivers.
        self._announcer = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"pgboss-async-{queue}-announce"
        )

    # -- lifecycle (called from the worker's threads) ------------------------------------------

    def start(self) -> None:
        self.loop.submit(self._start_slots()).result()
        self._bridge.start()

    async def _start_slots(self) -> None:
        for _ in range(self.concurrency):
            self._open_slot()

    def _open_slot(self) -> None:
        """Start one more slot (on the loop), numbered after every slot the queue had."""
        name = f"pgboss-async-{self.registration.queue}-{self._opened}"
        self._opened += 1
        self._slots.append(asyncio.get_running_loop().create_task(self._slot(name), name=name))

    def cancel_running(self) -> int:
        """Cancel every unit still running (a stop past its grace period); returns how many."""
        return self.loop.submit(self._cancel_running()).result(timeout=10)

    async def _cancel_running(self) -> int:
        running = list(self._running.items())
        for slot, unit in running:
            self._cancel_unit(slot, unit)
        return len(running)

    def join(self, timeout: float) -> None:
        """Wait for the slots to end (after the buffer's stop markers or a cancel)."""
        # The slots take no unit any more. The bridge may be waiting for a slot to want one, or
        # on the buffer (whose stop markers the slots may have taken): both end it.
        self._closing = True
        self._wanted.put(True)
        self.state.work.put(None)
        self._bridge.join(timeout)
        future = self.loop.submit(self._wait_slots(timeout))
        try:
            future.result(timeout + 1)
        except (concurrent.futures.TimeoutError, TimeoutError):
            logger.warning("async handlers of %s did not end within %.0fs", self.registration.queue, timeout)
        self._announcer.submit(connections.close_all)
        self._announcer.shutdown(wait=False)

    async def _wait_slots(self, timeout: float) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        _done, pending = await asyncio.wait(self._slots, timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1)

    # -- the bridge: buffer -> loop, one unit per slot waiting for one ---------------------------

    def _bridge_loop(self) -> None:
        work = self.state.work
        try:
            while True:
                self._wanted.get()
                if self._closing:
                    return
                units = [work.get()]
                # The other slots waiting get what the fetch queued with it, in the same hand-over:
                # the loop is woken once for them all, where a wake a unit (a thread switch each)
                # cost most of an async job's CPU at batch size 1, whose fetches claim a unit for
                # each free slot at once.
                while True:
                    try:
                        self._wanted.get_nowait()
                    except queue_module.Empty:
                        break
                    if self._closing:
                        # Perhaps join()'s own token: given back for the get above to see.
                        self._wanted.put(True)
                        break
                    try:
                        units.append(work.get_nowait())
                    except queue_module.Empty:
                        self._wanted.put(True)
                        break
                for unit in units:
                    if unit is not None:
                        # job_started here, where the unit crosses to the loop anyway: a plain
                        # thread, so a receiver may query as on a handler thread.
                        self.host.announce(unit.queue, unit.jobs)
                self.loop.call(self._deliver_all, units)
        finally:
            connections.close_all()

    def _deliver_all(self, units: list[Unit | None]) -> None:
        for unit in units:
            self._deliver(unit)

    def _deliver(self, unit: Unit | None) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(unit)
                return
        if unit is not None:
            # Its slot is gone (cancelled by a stop): the unit goes back where a stop finds it.
            self.state.work.put(unit)

    async def _wait_for_unit(self, loop: asyncio.AbstractEventLoop) -> Unit | None:
        """The unit the bridge hands a slot that found the buffer empty, its job_started sent
        already (None: the slot ends)."""
        if self._closing:
            return None
        waiter: asyncio.Future[Unit | None] = loop.create_future()
        self._waiters.append(waiter)
        self._wanted.put(True)
        return await waiter

    # -- the slots (on the loop) ---------------------------------------------------------------

    async def _slot(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        executor = self._executor(name)
        if executor is None:
            # An older asgiref: each job enters a context of its own in _run(), with a thread
            # that ends with it.
            await self._take_units(loop, None)
            return
        left = False
        try:
            # One context for every job the slot runs on this executor, entered here: the jobs
            # run one after another on the slot's one thread, as they did with a context
            # entered for each job, which cost a fifth of the loop's time a job
            # (bench/README.md, the async drain).
            async with ThreadSensitiveContext(executor=executor):
                left = await self._take_units(loop, executor)
        finally:
            if not left:
                # The slot's thread keeps its Django connection between jobs; it closes it now.
                executor.submit(connections.close_all)
            executor.shutdown(wait=False)
        # A slot left behind (see _give_up()) leaves its thread (and its connection) to the
        # abandoned coroutine, whose own thread-sensitive calls now raise RuntimeError, their
        # context having ended; the slot that took its place has a thread of its own.

    async def _take_units(self, loop: asyncio.AbstractEventLoop, executor: _SlotExecutor | None) -> bool:
        """Run the slot's units one after another until it ends; True when it ends left behind
        by an abandoned unit (see _give_up()), False on a stop."""
        slot = asyncio.current_task()
        assert slot is not None
        work = self.state.work
        monotonic = time.monotonic  # the loop's clock, without the loop's method around it
        turn = monotonic()
        while True:
            if self._closing:
                return False
            try:
                # The buffer's next unit, taken here while it has one (no coroutine to await);
                # None is a stop marker.
                unit = work.get_nowait()
            except queue_module.Empty:
                unit = await self._wait_for_unit(loop)
            else:
                if unit is not None and self.host.announces():
                    await loop.run_in_executor(self._announcer, self.host.announce, unit.queue, unit.jobs)
            if unit is None:
                return False
            if await self._one_unit(loop, unit, executor, slot):
                return True
            # A unit that ended without waiting gave the loop no turn, nor does the next one taken
            # from a full buffer: the slot hands one back at least every SLOT_TURN_SECONDS, so
            # that deadlines, cancellations, a stop and the other slots are not held up by a row
            # of handlers that each run a while without waiting.
            if monotonic() - turn >= SLOT_TURN_SECONDS:
                await asyncio.sleep(0)
                turn = monotonic()

    @staticmethod
    def _executor(name: str) -> _SlotExecutor | None:
        """The slot's one thread for its jobs' thread-sensitive calls (asgiref 3.13 and later)."""
        if not _CONTEXT_TAKES_EXECUTOR:
            return None
        return _SlotExecutor(max_workers=1, thread_name_prefix=name)

    async def _one_unit(
        self, loop: asyncio.AbstractEventLoop, unit: Unit, executor: Any, slot: asyncio.Task[None]
    ) -> bool:
        """Run one unit to its end in the slot's own task; True when the slot was left behind
        meanwhile (_give_up()).

        The slot runs the unit's coroutine itself, as a handler thread calls its handler: a task a
        unit, and the loop's passes to start it and to wake the slot when it ended, were most of
        what an async job cost over a threaded one (bench/README.md, the async drain). So the
        coroutine's current task is its slot's: a cancellation (asyncio.timeout(), a TaskGroup)
        it starts is its own and undone by it, as asyncio's structured cancellation undoes it;
        the worker's own cancel() requests are counted and undone once the unit ends. As on a
        handler thread, a context variable a handler sets and does not reset is still set for
        the slot's next job.
        """
        name, jobs = unit.queue, unit.jobs
        # Named for the watchdog's warning by its first job's id (a batch's with " ..."): a join of
        # up to five ids, as log lines spell them, took a tenth of the loop's time a job.
        more = " ..." if len(jobs) > 1 else ""
        slot_name = slot.get_name()
        slot.set_name(f"pgboss-job {name} {jobs[0].id}{more}")
        self._running[slot] = unit
        if self._look_timer is None:
            self._look_timer = loop.call_later(LOOK_SECONDS, self._look)
        try:
            # Raises only a stop's cancellation of the slot itself (see _run()).
            await self._run(unit, executor, slot)
        finally:
            self._forget(slot)
            self._expired.discard(slot)
            slot.set_name(slot_name)
        if slot.cancelling() and not self._closing:
            # The coroutine cancelled its own task and caught it, or returned before it was
            # delivered: the cancellation is taken here, so the slot's next unit starts clean.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)
            while slot.uncancel():
                pass
        return slot in self._left

    def _look(self) -> None:
        """Every LOOK_SECONDS while units run: each running unit not seen before gets its deadline
        timer and its jobs' signal callbacks.

        A unit that ends before a look finds it (most of them, at batch sizes above one) costs
        neither: a timer and a callback a job were a fifth of an async job's time on the loop.
        The price is at most LOOK_SECONDS before a unit's cancellation is armed: a signal set
        before then (a lost claim, a stop) cancels the coroutine at the look, and a deadline
        already passed fires at once.
        """
        loop = self.loop.loop
        for slot, unit in list(self._running.items()):
            if slot in self._watched:
                continue
            removers = [job.signal.add_callback(partial(self._signalled, slot, unit)) for job in unit.jobs]
            deadline = self.host.deadline(unit.jobs)
            timer = None if deadline is None else loop.call_at(deadline, self._deadline_passed, slot, unit)
            self._watched[slot] = (timer, removers)
        self._look_timer = loop.call_later(LOOK_SECONDS, self._look) if self._running else None

    def _forget(self, slot: asyncio.Task[None]) -> None:
        """The slot's unit ended, or was abandoned: its timer and callbacks go."""
        watched = self._watched.pop(slot, None)
        if watched is not None:
            timer, removers = watched
            if timer is not None:
                timer.cancel()
            for remove in removers:
                remove()
        self._running.pop(slot, None)

    def _signalled(self, slot: asyncio.Task[None], unit: Unit, reason: str) -> None:
        # Runs in the thread that set the signal.
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self.loop.call(self._cancel_unit, slot, unit)

    def _cancel_unit(self, slot: asyncio.Task[None], unit: Unit) -> None:
        """Cancel ``unit``'s coroutine, if its slot is still running it (on the loop)."""
        if self._running.get(slot) is unit:
            self._cancels[slot] = self._cancels.get(slot, 0) + 1
            slot.cancel()

    def _deadline_passed(self, slot: asyncio.Task[None], unit: Unit) -> None:
        if self._running.get(slot) is not unit:
            return
        self._expired.add(slot)
        self.host.expired(unit.queue, unit.jobs)  # fails the attempt, frees its place, sets the jobs' signals
        self._cancel_unit(slot, unit)
        asyncio.get_running_loop().call_later(ABANDON_GRACE_SECONDS, self._give_up, slot, unit)

    def _give_up(self, slot: asyncio.Task[None], unit: Unit) -> None:
        """A unit cancelled at its deadline is still running: leave its slot running it, and open
        a slot in its place (the one left behind ends when the unit does)."""
        if self._running.get(slot) is not unit:
            return
        name, jobs = unit.queue, unit.jobs
        self.host.abandoned(name, jobs)
        slot.add_done_callback(lambda _slot: self.host.abandoned_ended(name, jobs))
        self._forget(slot)
        self._left.add(slot)
        slot.add_done_callback(self._left.discard)
        # A slot running a unit is one of the queue's slots: only this leaves one behind.
        self._slots.remove(slot)
        if not self._closing:
            self._open_slot()

    async def _run(self, unit: Unit, executor: Any, slot: asyncio.Task[None]) -> None:
        name, jobs = unit.queue, unit.jobs
        outcome: Outcome | None = None
        try:
            if executor is not None:
                # In the slot's context (see _slot()). Django's request_finished habit: the
                # slot's thread drops an obsolete connection after a job. Only a job that ran
                # anything on that thread can have touched one: the others skip the hop (a
                # thread switch a job, most of an async job's overhead).
                calls_before = executor.calls
                try:
                    value = await self._call(name, jobs)
                finally:
                    if executor.calls != calls_before:
                        await asyncio.shield(sync_to_async(_quietly(close_old_connections))())
            else:
                context = ThreadSensitiveContext()
                async with context:
                    try:
                        value = await self._call(name, jobs)
                    finally:
                        # With a thread a job, every connection it opened is closed with it.
                        if _used_a_thread(context):
                            await asyncio.shield(sync_to_async(_quietly(connections.close_all))())
            outcome = Returned(value)
        except asyncio.CancelledError as exc:
            # Cancelled through a job's signal or by a stop: nothing of it is settled here (at
            # the deadline the worker failed the attempt; a lost claim or a stop put the job
            # back). With no request of the worker's, the handler raised CancelledError itself
            # or cancelled its own task: that is its failure, or the job would stay active
            # until it expired; and a cancellation of the slot by a stop goes on to end it.
            if self._cancels.get(slot):
                outcome = None
            elif self._closing and slot.cancelling():
                raise
            else:
                outcome = Errored(exc)
        except BaseException as exc:
            # As for a handler thread: however a handler ends, it is the job's failure.
            outcome = Errored(exc)
        finally:
            # The worker's own requests are undone whether the coroutine let them through or
            # caught them and went on to return: the slot's next unit starts uncancelled.
            for _ in range(self._cancels.pop(slot, 0)):
                slot.uncancel()
            if slot not in self._expired:
                self.host.finish(name, jobs, outcome)

    async def _call(self, name: str, jobs: list[Job]) -> Any:
        """The handler call itself, timed and inside its process span, as a handler thread's is
        (worker/handlers.py): the span is current inside the coroutine (and, through contextvars,
        in what it runs on threads), and records what the coroutine raised as it passes."""
        registration = self.registration
        self.host.started(name)
        job_logs.started(name, jobs)
        began = time.perf_counter()
        raised: BaseException | None = None
        # Set for the unit's run only, and seen by what the coroutine runs through sync_to_async,
        # so that off_work() called from the handler knows whose it is (state.RUNNING_HANDLER).
        inside = RUNNING_HANDLER.set(self.state)
        try:
            with self.host.span(name, jobs):
                return await registration.handler(jobs if registration.batch else jobs[0])
        except BaseException as exc:
            raised = exc
            raise
        finally:
            RUNNING_HANDLER.reset(inside)
            seconds = time.perf_counter() - began
            self.host.ended(name, seconds)
            job_logs.ended(name, jobs, seconds, raised)


class _SlotExecutor(concurrent.futures.ThreadPoolExecutor):
    """A slot's one-thread executor that counts the calls it was given (see AsyncQueue._run)."""

    calls = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.calls += 1
        return super().submit(fn, *args, **kwargs)


def _used_a_thread(context: ThreadSensitiveContext) -> bool:
    """Whether a per-job context (asgiref before 3.13) started its thread; True when unknown."""
    executors = getattr(SyncToAsync, "context_to_thread_executor", None)
    return executors is None or context in executors


def _quietly(close: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            close()
        except Exception:
            logger.warning("closing an old database connection failed", exc_info=True)

    return run
