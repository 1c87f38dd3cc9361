"""Jobs once sent: fetching, settling (with the attempt fence) and reading them.

:class:`JobStore` holds the statements behind Boss's fetch, settle and read methods (Boss
documents them). The worker uses it directly for its hot path (fetch, complete_each, fail, touch),
over the same database context as the Boss it was given, so both share the queue-route cache.
"""

from __future__ import annotations

import functools
import json
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

from django.db import DatabaseError, IntegrityError, connections

from django_pgboss import arguments
from django_pgboss.api.queues import reduce_retained
from django_pgboss.arguments import JobReference, attempt_references, job_attempt
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import (
    ROUTE_RECHECK_SECONDS,
    DatabaseContext,
    QueueRoute,
    sqlstate,
)
from django_pgboss.db.split_fail import copy_to_dead_letters
from django_pgboss.exceptions import InvalidJobReference, InvalidOption
from django_pgboss.plans import jobs as job_plans
from django_pgboss.plans import settle as settle_plans
from django_pgboss.plans import transactions as transaction_plans
from django_pgboss.records import Job, jobs_from_table
from django_pgboss.wire import EncodedOutput, output_value, to_json

# The settles a transactional handler runs itself, by database alias, on this thread only (see
# recording_settles()). Thread-local because a handler thread's Django connection is its own: a
# settle on another thread cannot be inside this thread's transaction.
_recorders = threading.local()

#: The settles that end a job's attempt, which a transactional handler may run on its own jobs.
_ENDING_VERBS = frozenset({"complete", "fail", "cancel", "delete_job"})


@contextmanager
def recording_settles(using: str) -> Iterator[set[str]]:
    """Collect the ids of the jobs this thread completes, fails, cancels or deletes on ``using``.

    The worker's transactional handlers run inside one: a handler that settles one of its own jobs
    through Boss (on the worker's connection, so inside the handler's transaction) leaves the
    worker's own completion nothing to update, and the ids say that this was the handler's doing
    and not a claim that lapsed. A settle is recorded only when it settled every job it named; a
    partial one says nothing about which of them it reached (pg-boss reads it the same way).
    """
    recorders: dict[str, set[str]] = getattr(_recorders, "by_alias", None) or {}
    _recorders.by_alias = recorders
    previous = recorders.get(using)
    settled: set[str] = set()
    recorders[using] = settled
    try:
        yield settled
    finally:
        if previous is None:
            recorders.pop(using, None)
        else:
            recorders[using] = previous


#: What a statement run on a queue's route returns (see JobStore._routed()).
Result = TypeVar("Result")

#: The connections use_generic_plans() has set (a closed one is dropped with its last reference).
_GENERIC_PLANS: weakref.WeakSet[Any] = weakref.WeakSet()


class JobStore:
    """Fetch, settle and read jobs over one database context (see Boss for what each does)."""

    def __init__(self, context: DatabaseContext) -> None:
        self.context = context

    # -- fetching --------------------------------------------------------------------------------

    def fetch(
        self,
        name: str,
        *,
        batch_size: int = 1,
        include_metadata: bool = False,
        min_priority: int | None = None,
        max_priority: int | None = None,
        group_concurrency: int | Mapping[str, Any] | None = None,
        ignore_start_after: bool = False,
        ignore_groups: Sequence[str] | None = None,
        include_trace_context: bool = False,
    ) -> list[Job]:
        """See Boss.fetch(). ``include_trace_context`` (the worker's, while spans are recorded)
        fills each Job's trace_context, as pg-boss 12.38's worker fetch reads it."""
        validate_queue_name(name)
        arguments.limit("batch_size", batch_size)
        arguments.boolean("include_metadata", include_metadata)
        arguments.boolean("ignore_start_after", ignore_start_after)
        params: dict[str, Any] = {"name": name, "batch_size": batch_size}
        for option, value in (("min_priority", min_priority), ("max_priority", max_priority)):
            if value is not None:
                arguments.integer(option, value, minimum=arguments.INT4_MIN)
                params[option] = value
        if min_priority is not None and max_priority is not None and min_priority > max_priority:
            raise InvalidOption(f"min_priority {min_priority} is above max_priority {max_priority}")
        tiers = None
        single_group = False
        if group_concurrency is not None:
            limit, tiers = arguments.group_limits(group_concurrency)
            params["group_limit"] = limit
            single_group = limit == 1 and not tiers
            if tiers:
                params["group_tiers"] = to_json(tiers, "group_concurrency tiers")
        if ignore_groups is not None:
            if isinstance(ignore_groups, str) or not isinstance(ignore_groups, Sequence | set | frozenset):
                raise InvalidOption(
                    f"ignore_groups must be a list of group ids, not {type(ignore_groups).__name__}"
                )
            ignore_groups = [arguments.text("ignore_groups item", group) for group in ignore_groups]
            if ignore_groups:
                params["ignore_groups"] = ignore_groups
        context = self.context

        def claim(route: QueueRoute) -> list[Job]:
            sql = job_plans.fetch_jobs(
                context.quoted_schema,
                route.table,
                policy=route.policy,
                include_metadata=include_metadata,
                ignore_start_after=ignore_start_after,
                min_priority=min_priority is not None,
                max_priority=max_priority is not None,
                group_concurrency=group_concurrency is not None,
                group_tiers=bool(tiers),
                single_group=single_group,
                ignore_groups=bool(ignore_groups),
                include_trace_context=include_trace_context,
            )
            try:
                # Inside the caller's transaction, a savepoint, so that a lost race for a
                # singleton key undoes only this statement. In autocommit the statement is its
                # own transaction already, and wrapping it would cost two more round trips on the
                # hot path.
                guard = context.atomic() if context.in_atomic_block else nullcontext()
                with guard:
                    return jobs_from_table(context.table(sql, params))
            except IntegrityError:
                # Two fetchers picked different jobs of the same singleton/stately key at once;
                # the unique index let one through. The loser claims nothing this time, as in
                # pg-boss.
                return []

        # An empty claim is every poll of an idle queue, so its route is checked at most once per
        # ROUTE_RECHECK_SECONDS; the claim has its own savepoint inside a transaction, so a
        # dropped table can be retried there too. The policy is part of the claim's statement,
        # so a route with another policy is claimed from again (the empty claim took nothing).
        return self._routed(
            name,
            claim,
            found=bool,
            recheck_every=ROUTE_RECHECK_SECONDS,
            savepoint=True,
            on_policy=True,
        )

    def use_generic_plans(self) -> None:
        """Have this thread's connection run the claim with its generic plan, planned once per
        connection instead of on every fetch (plans.jobs.use_generic_plans says why). The worker's
        fetch loop calls it before each fetch, on its own connection, which runs nothing else; a
        new connection (after a reconnect) is set again. With PREPARED_STATEMENTS off nothing is
        prepared, and nothing is set: behind a transaction pooler a session setting would reach
        other clients' sessions. Nor on the citus-distributed backend (see below)."""
        if not pgboss_settings.PREPARED_STATEMENTS or self.context.distributed:
            # Citus routes a statement by the queue name it is bound to, which a generic plan
            # leaves unbound: every claim would then fail to plan.
            return
        raw = connections[self.context.using].connection
        if raw is not None and raw in _GENERIC_PLANS:
            return
        self.context.execute(job_plans.use_generic_plans())
        _GENERIC_PLANS.add(connections[self.context.using].connection)

    # -- settling --------------------------------------------------------------------------------

    def complete(
        self, name: str, jobs: JobReference, output: Any = None, *, include_queued: bool = False
    ) -> int:
        """See Boss.complete()."""
        arguments.boolean("include_queued", include_queued)
        plan = functools.partial(settle_plans.complete_jobs, include_queued=include_queued)
        return self._settle(name, jobs, "complete", plan, output=output)

    def fail(self, name: str, jobs: JobReference, output: Any = None) -> int:
        """See Boss.fail()."""
        return self._settle(name, jobs, "fail", settle_plans.fail_jobs, output=output)

    def fail_reporting(
        self, name: str, jobs: Sequence[Job], output: Any = None, *, terminal: bool = False
    ) -> tuple[int, list[tuple[str, str, str]], dict[str, str]]:
        """Fail these attempts (fenced) as fail() does, or with ``terminal`` for good whatever
        their attempts left; returns how many were failed, the dead-letter copies made, as
        (source id, dead-letter queue, copy id), and the state each failed job went to ('retry'
        or 'failed'), by id. The worker's fail, which logs the copies and sends job_failed."""
        validate_queue_name(name)
        ids, attempts = attempt_references(list(jobs), "fail")
        if attempts is None:
            raise InvalidJobReference("fail_reporting() needs jobs or {id, retry_count} pairs, not bare ids")
        params = {
            "name": name,
            "ids": ids,
            "attempts": attempts,
            "output": to_json(output_value(output), "output"),
        }
        context = self.context
        split = context.distributed

        def fail(route: QueueRoute) -> tuple[int, Any, Any]:
            sql = settle_plans.fail_jobs(
                context.quoted_schema, route.table, fenced=True, terminal=terminal, report=True, split=split
            )
            if split:
                with context.atomic():
                    failed, states, dead = context.one(sql, params)
                    return failed, copy_to_dead_letters(context, dead), states
            failed, copies, states = context.one(sql, params)
            return failed, copies, states

        failed, copies, states = self._routed(name, fail, found=lambda result: result[0] == len(ids))
        if isinstance(copies, str):
            copies = json.loads(copies)
        if isinstance(states, str):
            states = json.loads(states)
        return (
            failed,
            [(str(source), str(queue), str(copy)) for source, queue, copy in copies or []],
            {str(job_id): str(state) for job_id, state in states or []},
        )

    def retries_waiting(self, name: str) -> tuple[int, Any]:
        """How many jobs of ``name`` wait to retry, and the start_after of the first (or None)."""
        validate_queue_name(name)
        context = self.context
        count, first = context.one(
            job_plans.retries_waiting(context.quoted_schema, context.route(name).table), {"name": name}
        )
        return count, first

    def cancel(self, name: str, jobs: JobReference) -> int:
        """See Boss.cancel()."""
        return self._settle(name, jobs, "cancel", settle_plans.cancel_jobs)

    def delete_job(self, name: str, jobs: JobReference) -> int:
        """See Boss.delete_job()."""
        return self._settle(name, jobs, "delete_job", settle_plans.delete_jobs)

    def touch(self, name: str, jobs: JobReference) -> int:
        """See Boss.touch()."""
        return self._settle(name, jobs, "touch", settle_plans.touch_jobs)

    def touch_attempts(self, name: str, jobs: Sequence[Job]) -> list[str]:
        """Refresh the heartbeat of these attempts; returns the ids refreshed, so that the worker
        knows which claims it still holds (pg-boss's touch() result, ``settled``)."""
        validate_queue_name(name)
        ids, attempts = attempt_references(list(jobs), "touch")
        if attempts is None:
            raise InvalidJobReference("touch_attempts() needs jobs or {id, retry_count} pairs, not bare ids")
        context = self.context
        params = {"name": name, "ids": ids, "attempts": attempts}

        def touch(route: QueueRoute) -> list[str]:
            sql = settle_plans.touch_attempts(context.quoted_schema, route.table)
            return [str(row[0]) for row in context.all(sql, params)]

        return self._routed(name, touch, found=lambda touched: len(touched) == len(ids))

    def resume(self, name: str, ids: str | Sequence[str]) -> int:
        """See Boss.resume()."""
        return self._settle_unfenced(name, ids, "resume", settle_plans.resume_jobs)

    def retry(self, name: str, ids: str | Sequence[str]) -> int:
        """See Boss.retry()."""
        return self._settle_unfenced(name, ids, "retry", settle_plans.retry_jobs)

    def complete_each(self, name: str, results: Sequence[tuple[Job | Mapping[str, Any], Any]]) -> list[str]:
        """Complete a batch of jobs, each with its own output, each fenced to its attempt.

        ``results`` is a list of (job, output) pairs; returns the ids completed (a job whose
        attempt is no longer active is left alone and missing from the list). An output may be
        an ``EncodedOutput``, JSON text its caller already encoded, which is stored as it is.
        The worker's settler completes its batches through this.
        """
        validate_queue_name(name)
        if not results:
            return []
        ids, records = [], []
        for job, output in results:
            job_id, retry_count = job_attempt(job, "complete_each")
            if retry_count is None:
                raise InvalidJobReference(
                    "complete_each() needs jobs or {id, retry_count} pairs, not bare ids"
                )
            encoded = output if isinstance(output, EncodedOutput) else to_json(output_value(output), "output")
            ids.append(job_id)
            # Spliced as text: the outputs are JSON already, and the id is a canonical uuid, as
            # PostgreSQL spells it (the statement looks each row's own 'id:retry_count' up).
            records.append(f'"{job_id}:{retry_count}":{encoded or "null"}')
        context = self.context
        # The ids go as one array literal, which the statement casts to uuid[]: canonical uuids
        # need no quoting in it, and psycopg then dumps one string where a list of them cost it
        # about 2 us an id (bench/README.md). They come back as text likewise.
        params = {"records": "{" + ",".join(records) + "}", "name": name, "ids": "{" + ",".join(ids) + "}"}

        def complete(route: QueueRoute) -> list[str]:
            sql = settle_plans.complete_jobs_with_outputs(context.quoted_schema, route.table)
            return [row[0] for row in context.all(sql, params)]

        return self._routed(name, complete, found=lambda completed: len(completed) == len(ids))

    def requeue(self, name: str, jobs: Sequence[Job], *, started: bool, output: Any = None) -> list[str]:
        """Put active jobs back in the queue without charging an attempt; returns the ids put back.

        The worker's, for the jobs it holds when it stops: ``started=False`` for jobs it claimed
        but never began (their next claim does not count an attempt), ``started=True`` for jobs
        a shutdown cut short (their limit grows by one instead, and ``output`` records why).
        Fenced to each job's attempt; see plans.settle.requeue_jobs for what the columns get.
        """
        validate_queue_name(name)
        ids, attempts = attempt_references(list(jobs), "requeue")
        if attempts is None:
            raise InvalidJobReference("requeue() needs jobs or {id, retry_count} pairs, not bare ids")
        params: dict[str, Any] = {"name": name, "ids": ids, "attempts": attempts}
        if started:
            params["output"] = to_json(output_value(output), "output")
        context = self.context

        def requeue(route: QueueRoute) -> list[str]:
            sql = settle_plans.requeue_jobs(context.quoted_schema, route.table, started=started)
            return [str(row[0]) for row in context.all(sql, params)]

        return self._routed(name, requeue, found=lambda requeued: len(requeued) == len(ids))

    # -- transactions ----------------------------------------------------------------------------

    def bound_transaction(self, seconds: float) -> dict[str, str]:
        """Bound the caller's open transaction to ``seconds``, enforced by PostgreSQL.

        Must run inside ``transaction.atomic()`` on this context's database: the limits are set
        for that transaction only (see plans.transactions.bound_transaction for which settings a
        server gets). Returns each setting changed with the value it now has, in milliseconds.
        """
        if not self.context.in_atomic_block:
            raise InvalidOption("bound_transaction() needs an open transaction (transaction.atomic())")
        # PostgreSQL's timeouts are int4 milliseconds; a longer bound is the longest it enforces.
        milliseconds = min(max(int(seconds * 1000), 1), arguments.INT4_MAX)
        rows = self.context.all(transaction_plans.bound_transaction(), {"milliseconds": milliseconds})
        return {str(name): str(value) for name, value in rows}

    def _settle(self, name: str, jobs: JobReference, verb: str, plan: Any, **output: Any) -> int:
        validate_queue_name(name)
        ids, attempts = attempt_references(jobs, verb)
        params: dict[str, Any] = {"name": name, "ids": ids}
        if output:
            params["output"] = to_json(output_value(output["output"]), "output")
        if attempts is not None:
            params["attempts"] = attempts
        context = self.context

        def settle(route: QueueRoute) -> list[Any]:
            if verb == "fail" and context.distributed:
                with context.atomic():
                    count, _states, dead = context.one(
                        plan(context.quoted_schema, route.table, fenced=attempts is not None, split=True),
                        params,
                    )
                    copy_to_dead_letters(context, dead)
                return [count]
            return list(
                context.one(plan(context.quoted_schema, route.table, fenced=attempts is not None), params)
            )

        count, *retained = self._routed(name, settle, found=lambda result: result[0] == len(ids))
        if verb == "delete_job":
            self._reduce_retained(name, retained[0], deleted=True)
        recorders = getattr(_recorders, "by_alias", None)
        if recorders and verb in _ENDING_VERBS and count == len(ids):
            recorder = recorders.get(context.using)
            if recorder is not None:
                recorder.update(ids)
        return count

    def _settle_unfenced(self, name: str, ids: str | Sequence[str], verb: str, plan: Any) -> int:
        validate_queue_name(name)
        # Jobs are accepted too; resume and retry act on finished jobs, so there is no attempt to fence.
        id_list, _ = attempt_references(ids, verb)
        context = self.context
        params = {"name": name, "ids": id_list}
        count, *retained = self._routed(
            name,
            lambda route: list(context.one(plan(context.quoted_schema, route.table), params)),
            found=lambda result: result[0] == len(id_list),
        )
        if verb == "resume":
            self._reduce_retained(name, retained[0], deleted=False)
        return count

    def _routed(
        self,
        name: str,
        run: Callable[[QueueRoute], Result],
        *,
        found: Callable[[Result], bool],
        recheck_every: float | None = None,
        savepoint: bool = False,
        on_policy: bool = False,
    ) -> Result:
        """``run`` (a statement on queue ``name``'s job table) on the cached route, noticing a route
        that another process made stale.

        Another process may delete the queue and create it again with the other partitioning,
        which moves its jobs to another table. A statement on the stale route then fails (the
        queue's own table was dropped: 42P01) or finds nothing (job_common no longer holds the
        queue's jobs). So when ``run`` fails so, or when ``found(result)`` says it found less
        than it was asked for, the route is read again (``DatabaseContext.recheck_route()``, at
        most once per ``recheck_every`` seconds when given) and, when its table (or, with
        ``on_policy``, its policy) changed, ``run`` runs once more on the new route. Running it
        again is safe: the first run reached a table that holds none of the queue's jobs. A fresh
        route costs nothing more than the statement itself: the check follows only a short result.

        Inside the caller's transaction a failed statement has aborted it, unless ``run`` has a
        savepoint of its own (``savepoint``): the error is then the caller's, and the route is
        checked by the next call made outside it.
        """
        context = self.context
        route = context.route(name)
        try:
            result = run(route)
        except DatabaseError as exc:
            if sqlstate(exc) not in context.stale_route_sqlstates or (
                context.in_atomic_block and not savepoint
            ):
                raise
            fresh = context.recheck_route(name, route)
            if fresh is None or fresh.table == route.table:
                raise
            return run(fresh)
        if not found(result):
            fresh = context.recheck_route(name, route, at_most_every=recheck_every)
            if fresh is not None and (
                fresh.table != route.table or (on_policy and fresh.policy != route.policy)
            ):
                return run(fresh)
        return result

    def _reduce_retained(self, name: str, retained: int, *, deleted: bool) -> None:
        """delete_job() and resume() take the completed and cancelled jobs they moved out of the
        queue's retained_count off it (and a deleted one off total_count; a resumed one stays in
        it, live), as pg-boss 12.38 does. Not inside a caller's transaction: the update would hold
        the queue row until the caller commits, against the monitor and the caller's other queues,
        so there the next maintenance pass corrects the count, as it does for pg-boss's ``db``."""
        if retained and not self.context.in_atomic_block:
            reduce_retained(self.context, name, retained=retained, removed=retained if deleted else 0)

    # -- reading ---------------------------------------------------------------------------------

    def get_job_by_id(self, name: str, job_id: str) -> Job | None:
        """See Boss.get_job_by_id()."""
        validate_queue_name(name)
        (job_id,), _ = attempt_references(job_id, "get_job_by_id")
        context = self.context
        params = {"name": name, "id": job_id}
        jobs = self._routed(
            name,
            lambda route: jobs_from_table(
                context.table(job_plans.get_job(context.quoted_schema, route.table), params)
            ),
            found=bool,
        )
        return jobs[0] if jobs else None

    def find_jobs(
        self,
        name: str,
        *,
        id: str | None = None,
        key: str | None = None,
        data: Any = None,
        queued: bool = False,
        limit: int | None = None,
        after: str | uuid.UUID | Job | None = None,
    ) -> list[Job]:
        """See Boss.find_jobs()."""
        validate_queue_name(name)
        params: dict[str, Any] = {"name": name, "limit": arguments.page_limit("find_jobs()", limit)}
        after_id = arguments.page_after("find_jobs()", after, uuid_cursor=True)
        if id is not None:
            (params["id"],), _ = attempt_references(id, "find_jobs")
        if key is not None:
            params["key"] = arguments.text("key", key)
        if data is not None:
            params["data"] = arguments.data_filter(data)
        context = self.context

        def find(route: QueueRoute) -> list[Job] | None:
            sql = job_plans.find_jobs(
                context.quoted_schema,
                route.table,
                by_id=id is not None,
                by_key=key is not None,
                by_data=data is not None,
                queued=bool(queued),
                after=after_id is not None,
            )
            if after_id is not None:
                # The job the page continues after is read first: one deleted since the previous
                # page would otherwise end the list early without saying so (pg-boss 12.38
                # refuses it the same way). None, for the route to be checked before saying so.
                anchor = context.one_or_none(
                    job_plans.find_jobs_anchor(context.quoted_schema, route.table),
                    {"name": name, "id": after_id},
                )
                if anchor is None:
                    return None
                params["after_created_on"], params["after_id"] = anchor[0], after_id
            return jobs_from_table(context.table(sql, params))

        jobs = self._routed(name, find, found=bool)
        if jobs is None:
            raise InvalidOption(
                f"find_jobs(): after names job {after_id}, which queue {name!r} no longer holds"
            )
        return jobs
