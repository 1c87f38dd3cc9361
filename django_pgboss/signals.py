"""pg-boss's events as Django signals.

pg-boss's objects are event emitters (``boss.on('warning', ...)``, ``'error'``, ``'wip'``,
``'stopped'``, ``'bam'``, ``'flow'``); in Django the same news travels as signals. Each signal
below is sent from the process that saw the event (a worker's events from that worker's process,
a monitor's warnings from that monitor's), after the fact it reports is stored, so a receiver that
reads the database sees what the signal says. Connect receivers as with any Django signal, typically in an
``AppConfig.ready()``:

    from django.dispatch import receiver
    from django_pgboss import signals

    @receiver(signals.job_failed)
    def on_failed(sender, job, will_retry, **kwargs):
        if not will_retry:
            alert(f"job {job.id} of {job.name} failed for good")

Every receiver must accept ``**kwargs``: arguments may be added. The ``sender`` of each signal is
the class of the component that saw the event (``Worker``, ``Monitor``, ``Timekeeper``, ``Boss``);
the instance comes as an argument where there is one. Receivers run on the thread that sent the
signal (a worker's handler or settler thread, the monitor's loop): keep them short, since the
worker waits for them.

An exception in a receiver is logged on the ``django_pgboss.signals`` logger (with its traceback)
and goes no further: the job, the worker and the monitor carry on as if no receiver were
connected. Nothing is built for a signal nobody listens to (see ``send()``), so a worker without
receivers pays one attribute test per event (bench/README.md, "Signals").
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("django_pgboss.signals")

__all__ = [
    "bam_status_changed",
    "error_raised",
    "flow_resolved",
    "has_receivers",
    "job_cancelled",
    "job_completed",
    "job_dead_lettered",
    "job_failed",
    "job_started",
    "listener_reconnected",
    "send",
    "warning_raised",
    "worker_started",
    "worker_stopped",
]

job_started = Signal()
"""A handler is about to run a job. Sent from the handler thread that will run it, once per job (a
``batch=True`` handler's call sends it for each job of the batch, before the call).
Arguments: ``worker`` (the Worker), ``queue`` (the queue's name), ``job`` (the Job).
"""

job_completed = Signal()
"""A job's completion is stored. Sent from the worker's settler thread once the completion has
committed, only for jobs this attempt completed (a job whose claim was lost to another attempt
sends nothing). Arguments: ``worker``, ``queue``, ``job``, ``output`` (the output stored, as
JSON gives it back: None, a dict, a list, a string or a number).
"""

job_failed = Signal()
"""A job's failure is stored. Sent from the settler thread after the failure committed.
Arguments: ``worker``, ``queue``, ``job``, ``output`` (the failure document stored, a dict:
``name``, ``message``, ``traceback`` for an exception), ``exception`` (what the handler raised,
or None when the worker failed the job itself: a shutdown, a handler thread that died, an output
the database would not store) and ``will_retry`` (True when the job went back to the retry
state, False when it failed for good; a job failed for good with a dead-letter queue also sends
``job_dead_lettered``).
"""

job_dead_lettered = Signal()
"""A job that failed for good was copied to its dead-letter queue. Sent after ``job_failed``, from
the same thread. Arguments: ``worker``, ``queue``, ``job`` (the failed job), ``dead_letter``
(the dead-letter queue's name) and ``dead_letter_id`` (the id of the copy there).
"""

job_cancelled = Signal()
"""The worker set a running job's cancellation signal (``job.signal``): the job is past its
deadline (``expire_in_seconds``), its claim was found gone by a heartbeat, or the worker's stop
grace period ended. Sent from the worker thread that set the signal, after it did. Arguments:
``worker``, ``queue``, ``job`` and ``reason``: ``"deadline"``, ``"claim_lost"`` or
``"shutdown"``.
"""

worker_started = Signal()
"""A worker has started: its queues are checked, its threads running. Sent from the thread that
called ``Worker.run()``. Arguments: ``worker`` and ``queues`` (the names it works, in order).
"""

worker_stopped = Signal()
"""A worker has stopped: its threads are done and its results written. Sent from the thread that
called ``Worker.run()``, just before it returns. Arguments: ``worker`` and ``stats`` (its
WorkerStats: fetched, completed, failed, lost, requeued).
"""

warning_raised = Signal()
"""A warning was raised: one of the monitor's (``queue_backlog``, ``monitor_backoff``,
``slow_query``, ``index_bloat``, ``xmin_horizon``, ``autovacuum_disabled``), the timekeeper's
(``invalid_schedule``), the worker listener's (``listen_notify_unavailable``) or the worker's
(``handler_overrun``, and ``start_retry``, the monitor's too), with the types and data pg-boss's
``warning`` event carries. Sent after the warning is logged and, with PERSIST_WARNINGS, stored
(the listener's and ``start_retry`` are not stored: pg-boss does not store them either).
``sender``: Monitor (its passes and health checks, start_retry), Timekeeper, NotifyListener (the
worker's LISTEN connection), Worker (handler_overrun, start_retry), Boss for a pass run by
``Boss.supervise()``, None when the ``supervise()`` function is called on its own. Arguments: ``type`` (the warning's type, as
stored), ``message`` (its text), ``data`` (its details, a dict, as stored), ``using`` (the
database alias) and ``schema`` (the pg-boss schema).
"""

error_raised = Signal()
"""An error the worker or the monitor survived: a database error that interrupted a fetch, a
settle, a heartbeat or a monitor pass (each retried after a back-off), a handler thread that
died, the worker's LISTEN connection lost (sent as often as it is logged, while it reconnects).
Not a handler's own exception: that is the job's failure (``job_failed``). ``sender``: Worker,
Monitor or NotifyListener. Arguments: ``error`` (the exception), ``doing`` (what was
interrupted, e.g. ``"fetching from emails"``, ``"listening on <channel>"``) and ``instance``
(the Worker, Monitor or NotifyListener).
"""

listener_reconnected = Signal()
"""The worker's LISTEN connection is back after it was lost (closed, or silent past
NOTIFY_HEARTBEAT_TIMEOUT_SECONDS): it LISTENs again and has woken every notify queue, since
notifications sent meanwhile reached nobody. Sent once per reconnection, from the listener's
thread (the loss itself is an ``error_raised``). ``sender``: NotifyListener. Arguments:
``instance`` (the NotifyListener), ``channel`` (the LISTEN channel), ``reason`` (why the last
connection was given up, one line), ``lost_for_seconds`` (how long the worker went without
LISTEN), ``using`` and ``schema``.
"""

bam_status_changed = Signal()
"""A command of the ``bam`` table (an index build a pg-boss migration queued, monitor/bam.py) changed
status in this monitor's bam pass: pg-boss's ``bam`` event. Sent from the monitor's thread:
``"in_progress"`` once the command is claimed, before it runs (a command handed back at a stop
sends nothing); ``"completed"`` once that mark has committed; ``"failed"`` after its failure was
recorded (or could not be, when the failure took the connection: the row then stays
in_progress and the next claim takes it back), after the ``error_raised`` for the same error.
``sender``: Monitor. Arguments: ``id`` (the row's id), ``name`` (the command's name), ``status``,
``queue`` (the queue the command is for; None for one on a shared table), ``table`` (the job
table it builds on), ``error`` (the failure's text; None unless failed), ``instance`` (the
Monitor), ``using`` (the database alias) and ``schema`` (the pg-boss schema).
"""

flow_resolved = Signal()
"""The monitor's flow pass resolved completed parents of one job table: pg-boss's ``flow`` event.
Sent from the monitor's thread after each batch that resolved any (up to FLOW_BATCH_SIZE
parents, each batch its own transaction) has committed, so a pass over a large backlog sends
several. ``sender``: Monitor. Arguments: ``table`` (the job table, as ``queue.table_name`` names
it: ``job_common`` or a partitioned queue's own), ``resolved`` (how many completed parents the
batch resolved, each unblocking its children whose other parents are done), ``instance`` (the
Monitor), ``using`` and ``schema``.
"""


def has_receivers(signal: Signal) -> bool:
    """True when any receiver is connected to ``signal``, whatever its sender.

    The test is one attribute read, so callers use it to skip building a signal's arguments (a
    decoded output, a snapshot) when nobody listens.
    """
    return bool(signal.receivers)


def send(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """Send ``signal`` robustly: every receiver runs, and one that raises is logged, never raised.

    With no receiver connected this returns at once. Django's ``send_robust()`` catches the
    exception; the log line here names the receiver and the signal, with the traceback, so a broken
    receiver is seen without ever stopping a worker or a monitor.
    """
    if not signal.receivers:
        return
    for receiver, result in signal.send_robust(sender, **kwargs):
        if isinstance(result, BaseException):
            logger.error(
                "receiver %s of django_pgboss signal %s raised %s: %s",
                getattr(receiver, "__qualname__", repr(receiver)),
                _name(signal),
                type(result).__name__,
                result,
                exc_info=(type(result), result, result.__traceback__),
            )


def _name(signal: Signal) -> str:
    for name in __all__:
        if globals().get(name) is signal:
            return name
    return repr(signal)
