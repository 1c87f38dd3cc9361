"""Sending jobs: one (send and its throttled, debounced and delayed forms) or many (insert).

:class:`JobSender` holds the statements behind Boss's send methods (Boss documents them), and the
timekeeper's slotted insert. Its insert path copes with a queue-route cache that another process
made stale (the queue deleted, or re-created with another table or policy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import DatabaseError

from django_pgboss.api.queues import require_dead_letter
from django_pgboss.arguments import job_payload
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.constants import QueuePolicy
from django_pgboss.db.context import DatabaseContext, QueueRoute, sqlstate
from django_pgboss.db.cursors import ready_cursor_available
from django_pgboss.db.identifiers import quote_schema, schema_key
from django_pgboss.exceptions import InvalidOption, QueueNotFound
from django_pgboss.observability import tracing
from django_pgboss.plans import jobs as job_plans
from django_pgboss.wire import (
    encode_data_array,
    encode_jobs,
    random_uuid_text,
    single_job_params,
    to_json,
)

# The policies send()'s hot path tells apart, read once: each read of a member from its enum class
# is a Python-level lookup, a measurable part of a send.
_STANDARD = QueuePolicy.STANDARD
_KEY_STRICT_FIFO = QueuePolicy.KEY_STRICT_FIFO


class JobSender:
    """Send and insert jobs over one database context (see Boss for what each does)."""

    def __init__(self, context: DatabaseContext) -> None:
        self.context = context
        # Per queue name, the statements of a send of data alone (_DataSend), for the route and
        # schema they were made for.
        self._data_sends: dict[str, _DataSend] = {}

    def send(self, name: str, data: Any = None, **options: Any) -> str | None:
        """See Boss.send().

        A job with nothing but data and no span to record, the common send, is sent here, on one
        statement and as little Python as it takes (bench/send_client.py measures it against the
        statement alone on a bare cursor). It writes the row _send() writes for the same job, and
        leaves to _send() every other send and what it does not cover: a queue whose route is not
        cached yet, with notify or key_strict_fifo, and settings under which there is no reused
        cursor to run it on (db/cursors.ready_cursor_available()). A name that is not a string
        goes there too, to be refused; one that is can only be in the route cache if its queue was
        found by that name, so it needs no other check here.
        """
        if options or tracing.active():
            return self._send(name, data, options, upsert_by_key=False)
        context = self.context
        route = context.cached_route(name) if type(name) is str else None
        if route is None or route.notify or route.policy == _KEY_STRICT_FIFO or not ready_cursor_available():
            return self._send(name, data, {}, upsert_by_key=False)
        text = None if data is None else to_json(data, "job data")
        schema = context.schema
        statements = self._data_sends.get(name)
        if statements is None or statements.route is not route or statements.schema is not schema:
            statements = self._data_sends[name] = _DataSend(route, schema)
        connection = context.connection()
        # Inside the caller's transaction a refused row must not abort it, so there the statement
        # carries ON CONFLICT, as _insert()'s does; so does any policy with a unique index.
        in_transaction = connection.in_atomic_block
        on_conflict = in_transaction or route.policy != _STANDARD
        job_id = random_uuid_text()
        try:
            written = context.written_on_ready_cursor(
                statements.on_conflict if on_conflict else statements.plain,
                {"name": name, "id": job_id, "data": text, "options": None},
                connection,
                returning=on_conflict,
            )
        except DatabaseError as exc:
            stale = context.stale_route_sqlstates
            self._forget_stale_route(
                exc, name, stale if on_conflict else stale | {"23505"}, final=in_transaction
            )
            # Nothing was written: the insert goes again on the queue's route read afresh.
            ids = self._insert(name, [{"data": text}], returning=True, retried=True)
            return ids[0] if ids else None
        if written == 0:
            self._check_queue_exists(name)
            return None
        return job_id

    def send_upserted(self, name: str, data: Any, **options: Any) -> str | None:
        """Send the job an upsert() found missing: send() with the job marked upsert_by_key, so that
        job_i13 holds it to the one waiting job of its key (see api/editing.py)."""
        return self._send(name, data, options, upsert_by_key=True)

    def _send(self, name: str, data: Any, options: dict[str, Any], *, upsert_by_key: bool) -> str | None:
        validate_queue_name(name)
        job = job_payload(data, options)
        context = self.context
        route = context.route(name)
        if route.policy == QueuePolicy.KEY_STRICT_FIFO and not job.get("singleton_key"):
            raise InvalidOption(f"queue {name!r} is key_strict_fifo: every job needs a singleton_key")
        if job.get("dead_letter") is not None:
            require_dead_letter(context, job["dead_letter"])
        with tracing.send_span(name, "upsert" if upsert_by_key else "send") as span:
            # No span (no tracer provider, the usual case): nothing to store or record.
            trace_context = None if span is None else _stored_trace_context(span)
            job_id = self._insert(
                name, [job], returning=True, upsert_by_key=upsert_by_key, trace_context=trace_context
            )
            if not job_id and options.get("singleton_next_slot"):
                # The current slot is taken: a debounced job goes into the next one, starting
                # when it opens.
                (delay,) = context.one(
                    job_plans.debounce_delay(context.quoted_schema), {"seconds": job["singleton_seconds"]}
                )
                job = {**job, "start_after": f"{delay} seconds", "singleton_offset": job["singleton_seconds"]}
                job_id = self._insert(
                    name, [job], returning=True, upsert_by_key=upsert_by_key, trace_context=trace_context
                )
            if span is not None:
                tracing.sent(span, job_id, name, propagated=trace_context is not None)
        return job_id[0] if job_id else None

    def send_after(self, name: str, data: Any, after: Any, **options: Any) -> str | None:
        """See Boss.send_after()."""
        return self.send(name, data, **{**options, "start_after": after})

    def send_throttled(
        self, name: str, data: Any, seconds: int, key: str | None = None, **options: Any
    ) -> str | None:
        """See Boss.send_throttled()."""
        return self.send(
            name,
            data,
            **{**options, "singleton_seconds": seconds, "singleton_next_slot": False, "singleton_key": key},
        )

    def send_debounced(
        self, name: str, data: Any, seconds: int, key: str | None = None, **options: Any
    ) -> str | None:
        """See Boss.send_debounced()."""
        return self.send(
            name,
            data,
            **{**options, "singleton_seconds": seconds, "singleton_next_slot": True, "singleton_key": key},
        )

    def insert(
        self, name: str, jobs: Sequence[Mapping[str, Any]], *, return_ids: bool = False
    ) -> list[str] | None:
        """See Boss.insert()."""
        validate_queue_name(name)
        if isinstance(jobs, Mapping | str | bytes) or not isinstance(jobs, Sequence):
            raise InvalidOption("insert() takes a list of job dicts")
        data_array = _data_only_array(jobs)
        payload: list[dict[str, Any]] = []
        seen_ids: set[str] = set()
        for index, job in enumerate(jobs if data_array is None else ()):
            if not isinstance(job, Mapping):
                raise InvalidOption(f"insert() job {index} must be a dict, not {type(job).__name__}")
            options = dict(job)
            data = options.pop("data", None)
            item = job_payload(data, options, where=f"job {index}")
            if item.get("id") is not None:
                if item["id"] in seen_ids:
                    raise InvalidOption(f"insert() job {index} repeats id {item['id']}")
                seen_ids.add(item["id"])
            payload.append(item)
        context = self.context
        route = context.route(name)
        if route.policy == QueuePolicy.KEY_STRICT_FIFO and (
            data_array is not None or any(not j.get("singleton_key") for j in payload)
        ):
            raise InvalidOption(f"queue {name!r} is key_strict_fifo: every job needs a singleton_key")
        for dead_letter in {j["dead_letter"] for j in payload if j.get("dead_letter") is not None}:
            require_dead_letter(context, dead_letter)
        if not payload and data_array is None:
            return [] if return_ids else None
        with tracing.send_span(name, "insert", len(jobs)) as span:
            trace_context = _stored_trace_context(span)
            # A recorded span that stores no context links to each job's trace, so it needs the
            # ids even when the caller does not.
            ids = self._insert(
                name,
                payload,
                returning=return_ids or (trace_context is None and tracing.recording(span)),
                data_array=data_array,
                trace_context=trace_context,
            )
            tracing.sent(span, ids, name, propagated=trace_context is not None)
        return ids if return_ids else None

    def insert_slotted(self, name: str, jobs: list[dict[str, Any]]) -> int:
        """Insert jobs that name their throttle slot ("singleton_slot"); for the cron pass only.

        Returns how many were inserted: a slot already taken drops its job. Counted from the
        ids the insert returns rather than its row count, which Citus miscounts under ON
        CONFLICT DO NOTHING (it counts a dropped row as written); the cron pass files a few jobs
        a minute, so the ids cost nothing that shows.
        """
        context = self.context
        route = context.route(validate_queue_name(name))
        return len(
            context.all(
                job_plans.insert_jobs(context.quoted_schema, route.table, returning=True, slots=True),
                {"jobs": encode_jobs(jobs), "name": name},
            )
        )

    def _insert(
        self,
        name: str,
        payload: list[dict[str, Any]],
        *,
        returning: bool,
        data_array: str | None = None,
        upsert_by_key: bool = False,
        trace_context: str | None = None,
        retried: bool = False,
    ) -> list[str]:
        """Insert jobs into the queue's table; returns their ids when ``returning``.

        One job on a queue without notify goes through insert_job() (typed parameters, its id
        drawn here rather than returned, and no ON CONFLICT where no unique index can refuse the
        row); jobs of nothing but data
        (``data_array``, their data as one JSON array) through insert_data_jobs(), also without
        ON CONFLICT where no unique index can refuse a row; anything else through the batch
        statement, insert_jobs().

        The queue's table is cached, and another process may have deleted the queue, or deleted
        and created it again with or without a partition or with another policy, since. A
        missing table (42P01), a row that job_common's partition constraint refuses (23514; on
        the citus-distributed backend an internal error, XX000, which the shard's refusal becomes
        on the coordinator), or, without ON CONFLICT, a policy index that refuses it (23505)
        means the cache may be stale: it
        is dropped and, outside the caller's transaction, the insert is tried once more. An
        insert that wrote nothing is checked against the queue row, so a queue deleted under us
        raises QueueNotFound instead of passing for a job the policy dropped.

        ``upsert_by_key`` marks the jobs as upsert() inserted by key (only upsert() asks, with one
        job, inside its transaction, so always with ON CONFLICT: job_i13 refuses the second).
        ``trace_context`` (JSON text, or None for nothing to store) is written to every job's
        trace_context column: the statements carry the column only when it is given. ``retried``:
        a first attempt (send()'s hot path) already found the cached route stale, so this is the last.
        """
        context = self.context
        schema = context.quoted_schema
        connection = context.connection()
        in_transaction = connection.in_atomic_block
        stale_states = context.stale_route_sqlstates
        for attempt in (2,) if retried else (1, 2):
            route = context.route(name)
            # Inside the caller's transaction a refused row must not abort it, so there a statement
            # always carries ON CONFLICT; a stale cache cannot be retried there.
            conflict_possible = in_transaction or attempt == 2 or route.policy != QueuePolicy.STANDARD
            params: dict[str, Any]
            # The single-job statement returns nothing: its id is drawn before it runs.
            known_id: str | None = None
            traced = trace_context is not None
            if data_array is not None:
                params = {"data": data_array, "name": name}
                if route.notify:
                    params["schema_key"] = schema_key(context.schema)
                sql = job_plans.insert_data_jobs(
                    schema,
                    route.table,
                    on_conflict=conflict_possible,
                    returning=returning,
                    notify=route.notify,
                    trace_context=traced,
                )
                stale = stale_states if conflict_possible else stale_states | {"23505"}
                fetch_ids = returning or route.notify
            elif len(payload) == 1 and not route.notify:
                job = payload[0]
                on_conflict = (
                    conflict_possible or job.get("id") is not None or job.get("singleton_seconds") is not None
                )
                params = single_job_params(name, job)
                sql = job_plans.insert_job(
                    schema,
                    route.table,
                    on_conflict=on_conflict,
                    options=params["options"] is not None,
                    upsert_by_key=upsert_by_key,
                    trace_context=traced,
                )
                stale = stale_states if on_conflict else stale_states | {"23505"}
                known_id = params["id"]
                # With ON CONFLICT the statement returns the id it wrote (see insert_job()).
                fetch_ids = on_conflict
            else:
                params = {"jobs": encode_jobs(payload), "name": name}
                if route.notify:
                    params["schema_key"] = schema_key(context.schema)
                sql = job_plans.insert_jobs(
                    schema,
                    route.table,
                    returning=returning,
                    notify=route.notify,
                    upsert_by_key=upsert_by_key,
                    trace_context=traced,
                )
                stale = stale_states
                fetch_ids = returning or route.notify
            if traced:
                params["trace_context"] = trace_context
            try:
                if fetch_ids:
                    ids = [str(row[0]) for row in context.all(sql, params, connection=connection)]
                    written = len(ids)
                else:
                    written = context.rowcount(sql, params, connection=connection)
                    ids = [known_id] if known_id is not None and written else []
            except DatabaseError as exc:
                self._forget_stale_route(exc, name, stale, final=attempt == 2 or in_transaction)
                continue
            if written == 0:
                self._check_queue_exists(name)
            return ids if returning else []
        raise AssertionError("unreachable")  # the loop returns or raises

    def _forget_stale_route(
        self, error: DatabaseError, name: str, stale: frozenset[str], *, final: bool
    ) -> None:
        """After an insert into queue ``name`` failed with ``error``: drop the cached route when the
        error says it may be stale (a SQLSTATE of ``stale``), so the caller tries once more on a
        route read afresh; raise ``error`` for any other error, or when the attempt was ``final``
        (the second, or inside the caller's transaction, which the error aborted and which cannot
        be retried from here), then as QueueNotFound when the reason is that the queue is gone."""
        if sqlstate(error) not in stale:
            raise error
        self.context.forget_route(name)
        if final:
            if not self.context.queue_exists(name):
                raise QueueNotFound(f"queue {name!r} was deleted") from error
            raise error

    def _check_queue_exists(self, name: str) -> None:
        """After an insert that wrote nothing: raise QueueNotFound when queue ``name`` is gone, so a
        queue deleted under us is not passed off as a job its policy dropped."""
        if not self.context.queue_exists(name):
            self.context.forget_route(name)
            raise QueueNotFound(f"queue {name!r} does not exist (it was deleted)")


class _DataSend:
    """The two statements of send()'s hot path for one queue route and schema: insert_job() of a job
    with nothing but data, with and without ON CONFLICT. Made once per route rather than read from
    insert_job()'s cache on every send, whose keyword-argument lookup is a microsecond of it."""

    __slots__ = ("on_conflict", "plain", "route", "schema")

    def __init__(self, route: QueueRoute, schema: str) -> None:
        self.route = route
        self.schema = schema
        quoted = quote_schema(schema)
        self.plain = job_plans.insert_job(quoted, route.table, on_conflict=False, options=False)
        self.on_conflict = job_plans.insert_job(quoted, route.table, on_conflict=True, options=False)


def _stored_trace_context(span: Any) -> str | None:
    """What a send inside ``span`` writes to its jobs' trace_context column, as JSON text:
    tracing.carrier()'s trace context, or None (no span, nothing to store)."""
    stored = tracing.carrier(span)
    return None if stored is None else to_json(stored, "trace_context")


def _data_only_array(jobs: Sequence[Any]) -> str | None:
    """The data of two or more jobs that are dicts of nothing but data (the common insert()), as
    one JSON array encoded in one call (wire.encode_data_array); None for any other list, or when
    the array fails a check: such a list is validated and encoded job by job, which names the job
    at fault. A data-only job has no option to validate, and insert_data_jobs() writes the row
    insert_jobs() writes for it, so the two paths insert the same rows."""
    if len(jobs) < 2:
        return None
    for job in jobs:
        if type(job) is not dict or (job and (len(job) != 1 or "data" not in job)):
            return None
    return encode_data_array([job.get("data") for job in jobs])
