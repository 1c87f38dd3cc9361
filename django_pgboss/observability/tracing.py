"""OpenTelemetry spans for sending, fetching, running and settling jobs, and for monitor passes.

Only the OpenTelemetry API is used (the ``otel`` extra); the SDK, its sampler and its exporters are
the project's to configure. Without the API installed, or before a tracer provider is set, every
helper here returns one shared context manager that does nothing, so the cost is a function call
(bench/README.md, "Observability").

Spans follow OpenTelemetry's messaging semantic conventions: ``messaging.system`` is "pgboss", the
destination is the queue, the message id the job id, and the operation one of send (a PRODUCER
span), receive (the fetch, a CLIENT span), process (the handler, a CONSUMER span) and settle.

How a job's handler span is joined to the request that sent it: as pg-boss 12.38 does with
``propagateContext``, a send inside a span stores that span's context on each job it inserts (its
``trace_context`` column, what the global propagator injects: carrier()), and the worker's
process span of the job is a child of that stored context (a batch's span links to each), so
the job is worked inside its sender's trace whichever language sent it. PROPAGATE_TRACE_CONTEXT
off stores none.

A job that stores no context keeps a trace of its own whose trace id is the job's id, the 128
bits of its uuid. The send span, in the caller's trace, carries a span link to that trace; every
handler span of the job (each attempt) is a child of it. A backend can open such a job's trace
from the job id alone, and the link leads from the sending request to it. docs/observability.md
shows both.

That trace's root is a ``create <queue>`` span (OpenTelemetry's "create" operation, one per
message), recorded by the traced send with the ids job_span_context() gives, so the handler spans'
parent is a span the exporter has. The API cannot choose a root's ids: with the SDK's tracer (which
draws a span's ids from its ``id_generator``) the root is recorded through a tracer of its own,
scope ``django_pgboss.observability.tracing`` (this module), whose generator hands out the job's
ids while a root starts; with another API implementation no root is recorded and the parent
stays a remote one.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from django_pgboss.conf import pgboss_settings

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate as otel_propagate
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - the trace tests run with the extra installed
    otel_context = None  # type: ignore[assignment]
    otel_propagate = None  # type: ignore[assignment]
    otel_trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from django_pgboss.records import Job

#: True when the OpenTelemetry API is importable; the span helpers do nothing otherwise.
ENABLED = otel_trace is not None
#: The value of messaging.system on every span.
MESSAGING_SYSTEM = "pgboss"
#: The instrumentation scope's name.
TRACER_NAME = "django_pgboss"
#: The scope of the job traces' root spans (a tracer of its own: see the module docstring).
ROOT_TRACER_NAME = "django_pgboss.observability.tracing"
#: Links a batch span carries at most (the SDK keeps 128 by default).
MAX_LINKS = 128

_NOTHING: AbstractContextManager[Any] = contextlib.nullcontext()


_tracers: list[Any] = []


def _tracer() -> Any:
    # Made once, on first use: before a provider is set, get_tracer() gives a proxy that follows
    # the provider set later (Django settings often set it after this module was imported).
    if not _tracers:
        _tracers.append(otel_trace.get_tracer(TRACER_NAME, _version()))
    return _tracers[0]


_provider_seen: list[bool] = []
#: Holds True once the API's lookup found no provider, its environment variable included.
_lookup_found_none: list[bool] = []
_NO_SUCH_GLOBAL = object()


def active() -> bool:
    """True when the OpenTelemetry API is installed and a tracer provider is set: the helpers
    record spans. The worker reads it once per fetch and hands it to process_span(), and every
    send asks it. Until a provider is set the API's spans are no-ops, and skipping them, with the
    attributes and contexts built for them, leaves an installed but unconfigured API one call
    per helper (bench/README.md, "Observability").

    The API's global provider is set once for good, so once one is found it is remembered. Until
    then the public lookup, get_tracer_provider(), reads the environment for a provider to load
    on every call (about 1.4 us, bench/worker_overheads.py, a raised KeyError each time). Once it
    has found none, the API's own global is read instead, which set_tracer_provider() (and that
    lookup, loading OTEL_PYTHON_TRACER_PROVIDER) fills; without that private global (another
    version of the API) every call takes the public lookup.
    """
    if otel_trace is None:
        return False
    if _provider_seen:
        return True
    if _lookup_found_none and getattr(otel_trace, "_TRACER_PROVIDER", _NO_SUCH_GLOBAL) is None:
        return False
    if isinstance(
        otel_trace.get_tracer_provider(), (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)
    ):
        if not _lookup_found_none:
            _lookup_found_none.append(True)
        return False
    _provider_seen.append(True)
    return True


def _version() -> str | None:
    # The installed distribution's version: the package root, which holds __version__, imports
    # the API, which imports this module.
    try:
        return importlib.metadata.version("django-pgboss")
    except importlib.metadata.PackageNotFoundError:
        return None


def job_span_context(job_id: str) -> Any:
    """The span context of a job's own trace: trace id = the job's uuid, span id = its low 64 bits.

    Remote and sampled, so that a ParentBased sampler records the handler spans under it (set
    ``remote_parent_sampled`` to sample them otherwise). None for an id that is no uuid, or the nil
    uuid, which no trace can have.
    """
    if otel_trace is None:
        return None
    try:
        value = uuid.UUID(str(job_id)).int
    except ValueError:
        return None
    if not value:
        return None
    return otel_trace.SpanContext(
        trace_id=value,
        span_id=(value & 0xFFFF_FFFF_FFFF_FFFF) or 1,
        is_remote=True,
        trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
    )


def _attributes(queue: str, operation_type: str, operation: str, count: int | None = None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": operation_type,
        "messaging.operation.name": operation,
    }
    if count is not None and count != 1:
        attributes["messaging.batch.message_count"] = count
    return attributes


def send_span(queue: str, operation: str = "send", count: int = 1) -> AbstractContextManager[Any]:
    """A PRODUCER span around a send (``operation`` "send") or an insert of ``count`` jobs."""
    if not active():
        return _NOTHING
    return _tracer().start_as_current_span(
        f"{operation} {queue}",
        kind=otel_trace.SpanKind.PRODUCER,
        attributes=_attributes(queue, "send", operation, count),
    )


class _JobIds:
    """The id generator of the root spans' SDK tracer: while ``ids()`` holds a job's span context
    on this thread it hands out that context's trace and span ids, and otherwise defers to the
    generator it replaced (so nothing else that tracer might start is changed)."""

    def __init__(self, fallback: Any) -> None:
        self._fallback = fallback
        self._pending = threading.local()

    @contextlib.contextmanager
    def ids(self, context: Any) -> Any:
        self._pending.context = context
        try:
            yield
        finally:
            self._pending.context = None

    def _context(self) -> Any:
        return getattr(self._pending, "context", None)

    def generate_trace_id(self) -> int:
        context = self._context()
        return int(context.trace_id) if context is not None else int(self._fallback.generate_trace_id())

    def generate_span_id(self) -> int:
        context = self._context()
        return int(context.span_id) if context is not None else int(self._fallback.generate_span_id())

    def is_trace_id_random(self) -> bool:
        # A job's uuid is not the random trace id W3C's "random" flag promises.
        if self._context() is not None:
            return False
        return bool(getattr(self._fallback, "is_trace_id_random", lambda: False)())


# (provider, tracer, generator) of the roots, made once per tracer provider; tracer None where the
# provider's tracers draw no ids from an id_generator (not the SDK's).
_roots: list[tuple[Any, Any, _JobIds | None]] = []
_roots_lock = threading.Lock()


def _root_tracer() -> tuple[Any, _JobIds | None]:
    provider = otel_trace.get_tracer_provider()
    for known, tracer, generator in _roots:
        if known is provider:
            return tracer, generator
    with _roots_lock:
        tracer = provider.get_tracer(ROOT_TRACER_NAME, _version())
        generator = getattr(tracer, "id_generator", None)
        if isinstance(generator, _JobIds):
            pass
        elif generator is not None and callable(getattr(generator, "generate_span_id", None)):
            generator = _JobIds(generator)
            tracer.id_generator = generator  # type: ignore[attr-defined]  # the SDK tracer's, checked above
        else:
            tracer, generator = None, None
        _roots.append((provider, tracer, generator))
    return tracer, generator


def _record_roots(queue: str, ids: Sequence[str], send: Any) -> None:
    """Record the root span of each job's trace: a PRODUCER "create" span with the ids of
    job_span_context(), no parent, linked to the send span ``send``."""
    tracer, generator = _root_tracer()
    if tracer is None or generator is None:
        return
    sender = send.get_span_context()
    links = [otel_trace.Link(sender)] if sender.is_valid else []
    empty = otel_context.Context()  # no current span: each root starts a trace
    attributes = _attributes(queue, "create", "create")
    for job_id in ids:
        context = job_span_context(job_id)
        if context is None:
            continue
        with generator.ids(context):
            root = tracer.start_span(
                f"create {queue}",
                context=empty,
                kind=otel_trace.SpanKind.PRODUCER,
                attributes={**attributes, "messaging.message.id": job_id},
                links=links,
            )
        root.end()


def carrier(span: Any) -> dict[str, str] | None:
    """The trace context a send inside ``span`` (what send_span() gave) stores on each job it
    inserts, as pg-boss 12.38's propagateContext does: what the global propagator injects for the
    span (W3C's ``traceparent``, with ``tracestate`` and ``baggage`` when there are any), or None
    when there is nothing to store: no span (no API, no tracer provider), an invalid one, or
    PGBOSS["PROPAGATE_TRACE_CONTEXT"] off.

    Without a tracer provider send_span() gave None, so the untraced send pays one ``is None``
    test here and its statement carries no trace_context column at all.
    """
    if span is None or not pgboss_settings.PROPAGATE_TRACE_CONTEXT:
        return None
    if not span.get_span_context().is_valid:
        return None
    injected: dict[str, str] = {}
    otel_propagate.inject(injected, context=otel_trace.set_span_in_context(span))
    return injected or None


def _stored_context(job: Job) -> Any:
    """The OpenTelemetry context a job's stored trace_context names (extracted from an empty
    context, so baggage sent with the job reaches the handler too, and the worker's own current
    context plays no part, as in pg-boss 12.38), or None when it names no valid span."""
    stored = job.trace_context
    if not isinstance(stored, dict) or not stored:
        return None
    try:
        extracted = otel_propagate.extract(stored, context=otel_context.Context())
    except Exception:  # A carrier another sender wrote must never fail a job's run.
        return None
    if not otel_trace.get_current_span(extracted).get_span_context().is_valid:
        return None
    return extracted


def recording(span: Any) -> bool:
    """True when ``span`` (what a span helper's context manager gave) is a span being recorded."""
    return span is not None and span.is_recording()


def sent(span: Any, ids: Sequence[str | None], queue: str, *, propagated: bool = False) -> None:
    """Record the ids a send span's statement wrote. With ``propagated`` (the jobs store the send
    span's context: carrier() gave one) that is all: their process spans will be the span's
    children. Otherwise each id gets a link to the job's own trace, whose root span is recorded."""
    if span is None or not span.is_recording():
        return
    written = [job_id for job_id in ids if job_id]
    if len(written) == 1:
        span.set_attribute("messaging.message.id", written[0])
    if propagated:
        return
    _record_roots(queue, written, span)
    for job_id in written[:MAX_LINKS]:
        context = job_span_context(job_id)
        if context is not None:
            span.add_link(context, {"messaging.message.id": job_id})


def now() -> int:
    """The time a span that is recorded after the fact starts at (0 without the API)."""
    return time.time_ns() if active() else 0


def record_fetch(queue: str, started: int, count: int) -> None:
    """A CLIENT span (OpenTelemetry's "receive") for a fetch that began at ``started`` (now())
    and claimed ``count`` jobs, ended now."""
    if not active():
        return
    span = _tracer().start_span(
        f"fetch {queue}",
        kind=otel_trace.SpanKind.CLIENT,
        attributes={**_attributes(queue, "receive", "fetch"), "messaging.batch.message_count": count},
        start_time=started,
    )
    span.end()


def _job_parent(jobs: Sequence[Job], attributes: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The parent context and links of a span about ``jobs``.

    One job's span is a child of the context the job was sent with (its stored trace_context,
    whichever language wrote it), and of the job's own trace (trace id = job id) when it stores
    none. A span about several links to each job's stored context, or to its own trace, instead.
    The parent is always chosen here, never the thread's current context, as pg-boss 12.38
    chooses it: the worker's threads carry no trace a job belongs to.
    """
    if len(jobs) == 1:
        job = jobs[0]
        attributes["messaging.message.id"] = job.id
        attributes["pgboss.job.retry_count"] = job.retry_count
        stored = _stored_context(job) if job.trace_context else None
        if stored is not None:
            return stored, []
        context = job_span_context(job.id)
        if context is None:
            return None, []
        return otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(context)), []
    links = []
    for job in jobs[:MAX_LINKS]:
        stored = _stored_context(job) if job.trace_context else None
        context = (
            otel_trace.get_current_span(stored).get_span_context()
            if stored is not None
            else job_span_context(job.id)
        )
        if context is not None:
            links.append(otel_trace.Link(context, {"messaging.message.id": job.id}))
    return None, links


def process_span(
    queue: str, jobs: Sequence[Job], *, traced: bool | None = None
) -> AbstractContextManager[Any]:
    """A CONSUMER span around one handler call with ``jobs`` (one job, or a batch).

    A handler that raises leaves its exception recorded on the span, and the span's status an error.
    ``traced`` is active() as the caller read it (the worker, when it fetched the jobs); None
    reads it now.
    """
    if traced is None:
        traced = active()
    if not traced:
        return _NOTHING
    attributes = _attributes(queue, "process", "process", len(jobs))
    parent, links = _job_parent(jobs, attributes)
    return _tracer().start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=otel_trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
    )


def settle_span(queue: str, operation: str, jobs: Sequence[Job]) -> AbstractContextManager[Any]:
    """A CLIENT span around one settle statement (``operation``: complete, fail) of ``jobs``."""
    if not active():
        return _NOTHING
    attributes = _attributes(queue, "settle", operation, len(jobs))
    parent, links = _job_parent(jobs, attributes)
    return _tracer().start_as_current_span(
        f"{operation} {queue}",
        context=parent,
        kind=otel_trace.SpanKind.CLIENT,
        attributes=attributes,
        links=links,
    )


def monitor_span() -> AbstractContextManager[Any]:
    """An INTERNAL span around one monitor pass."""
    if not active():
        return _NOTHING
    return _tracer().start_as_current_span(
        "pgboss monitor pass",
        kind=otel_trace.SpanKind.INTERNAL,
        attributes={"messaging.system": MESSAGING_SYSTEM},
    )


def monitored(span: Any, report: Any) -> None:
    """Record what a monitor pass did (a PassReport) on its span."""
    if span is None or not span.is_recording():
        return
    span.set_attributes(
        {
            "pgboss.monitor.counted": len(report.counted),
            "pgboss.monitor.expired": report.expired,
            "pgboss.monitor.stalled": report.stalled,
            "pgboss.monitor.deleted": report.deleted,
            "pgboss.monitor.warnings": len(report.warnings),
            "pgboss.monitor.failed_queues": len(report.failed),
        }
    )
