"""Flows: graphs of jobs in which a job waits for the jobs it depends on (pg-boss 12.35's flow()).

:class:`FlowStore` holds what Boss's flow methods do (Boss documents them): insert a flow, read a
job's parents and children, and resolve completed parents, which is the monitor's flow pass
(monitor/flows.py) run without its cadence gate. A flow is checked whole before anything is
written (:func:`check_flow`), then inserted in one transaction, a savepoint inside the caller's.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, transaction

from django_pgboss import signals
from django_pgboss.api.queues import require_dead_letter
from django_pgboss.arguments import integer, job_payload, page_after_row, page_limit, uuid_text
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.constants import QueuePolicy
from django_pgboss.db.context import DatabaseContext, sqlstate
from django_pgboss.db.identifiers import quote_job_table, schema_key
from django_pgboss.db.split_flows import split_resolve
from django_pgboss.exceptions import (
    DuplicateFlowRef,
    EmptyFlow,
    FlowCycle,
    FlowJobRefused,
    InvalidFlow,
    InvalidOption,
    QueueNotFound,
    UnknownFlowRef,
)
from django_pgboss.plans import flows as flow_plans
from django_pgboss.plans import jobs as job_plans
from django_pgboss.plans import maintenance as maintenance_plans
from django_pgboss.records import DependencyRef
from django_pgboss.wire import JsonText, encode_jobs, random_uuid_text

logger = logging.getLogger("django_pgboss.flows")

#: Queues resolved per statement (pg-boss resolves in chunks of 100 names, as supervise counts).
CHUNK_SIZE = 100
#: The most edges the admin's flow view reads.
GRAPH_EDGE_LIMIT = 2000
#: SQLSTATE of a table that is gone: a queue deleted while a pass ran.
UNDEFINED_TABLE = "42P01"


@dataclass(frozen=True)
class FlowJob:
    """One job of a flow: ``ref`` names it within the flow, ``name`` is its queue, ``data`` and
    ``options`` are send()'s (snake_case), ``depends_on`` the refs of the jobs it waits for."""

    ref: str
    name: str
    data: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    depends_on: Sequence[str] = ()


@dataclass(frozen=True)
class RelatedJob:
    """A job at the other end of a flow edge, with what the job table holds of it (state None
    once the job was deleted)."""

    name: str
    id: str
    state: str | None
    output: Any
    completed_on: dt.datetime | None


@dataclass(frozen=True)
class FlowGraph:
    """A flow as stored: its jobs (with their states, None for a job deleted since), the jobs still
    blocked, and its edges as (parent, child) pairs of DependencyRef; ``truncated`` when the flow
    had more edges than were read."""

    nodes: dict[DependencyRef, str | None]
    edges: list[tuple[DependencyRef, DependencyRef]]
    truncated: bool
    blocked: frozenset[DependencyRef] = frozenset()


_TRUE = JsonText("true")
_FLOW_JOB_KEYS = frozenset({"ref", "name", "data", "options", "depends_on"})


def _flow_job(index: int, item: Any) -> FlowJob:
    if isinstance(item, FlowJob):
        return item
    if not isinstance(item, Mapping):
        raise InvalidFlow(f"flow() job {index} must be a FlowJob or a dict, not {type(item).__name__}")
    unknown = sorted(set(item) - _FLOW_JOB_KEYS)
    if unknown:
        raise InvalidFlow(
            f"flow() job {index}: unknown key(s) {', '.join(map(repr, unknown))}; "
            "a flow job has ref, name, data, options and depends_on"
        )
    if "ref" not in item or "name" not in item:
        raise InvalidFlow(f"flow() job {index} needs a ref and a name")
    return FlowJob(
        ref=item["ref"],
        name=item["name"],
        data=item.get("data"),
        options=item.get("options") or {},
        depends_on=item.get("depends_on") or (),
    )


def _find_cycle(edges: dict[str, list[str]], left: set[str]) -> list[str]:
    """One cycle among the refs ``left`` (those a topological sort could not place), as a path
    whose first and last refs are the same; edges map a ref to the refs it depends on."""
    start = min(left)
    path, seen = [start], {start: 0}
    while True:
        # Every ref left depends on at least one other ref left, so the walk always goes on.
        step = min(dep for dep in edges[path[-1]] if dep in left)
        if step in seen:
            return [*path[seen[step] :], step]
        seen[step] = len(path)
        path.append(step)


def check_flow(jobs: Any) -> list[FlowJob]:
    """Check a flow's shape, before any SQL: a list of at least two jobs with distinct non-empty
    refs and valid queue names, at least one depending on another, every depends_on naming a
    ref of the flow, and no cycle. Returns the jobs as FlowJobs, each depends_on without repeats
    (as pg-boss dedupes them). Raises an InvalidFlow subclass naming the ref at fault."""
    if isinstance(jobs, str | bytes | Mapping) or not isinstance(jobs, Sequence):
        raise InvalidFlow(f"flow() takes a list of jobs, not {type(jobs).__name__}")
    if not jobs:
        raise EmptyFlow("flow() was given no jobs")
    flow = [_flow_job(index, item) for index, item in enumerate(jobs)]
    first: dict[str, int] = {}
    for index, job in enumerate(flow):
        if not isinstance(job.ref, str) or not job.ref:
            raise InvalidFlow(f"flow() job {index}: ref must be a non-empty string, not {job.ref!r}")
        if job.ref in first:
            raise DuplicateFlowRef(f"flow(): ref {job.ref!r} is used by jobs {first[job.ref]} and {index}")
        first[job.ref] = index
        validate_queue_name(job.name, f"flow job {job.ref!r}: name")
        if not isinstance(job.options, Mapping):
            raise InvalidFlow(
                f"flow job {job.ref!r}: options must be a dict, not {type(job.options).__name__}"
            )
        if isinstance(job.depends_on, str | bytes) or not isinstance(job.depends_on, Sequence):
            raise InvalidFlow(
                f"flow job {job.ref!r}: depends_on must be a list of refs, not {job.depends_on!r}"
            )
    if len(flow) < 2:
        raise EmptyFlow(
            f"flow() needs at least 2 jobs, one depending on another (got only {flow[0].ref!r}); "
            "send() a single job"
        )
    edges: dict[str, list[str]] = {}
    for job in flow:
        # A dict keeps the refs' order and finds a repeat in constant time: a job may depend on
        # thousands of others (a fan-in).
        deps: dict[str, None] = {}
        for dep in job.depends_on:
            if not isinstance(dep, str) or not dep:
                raise InvalidFlow(
                    f"flow job {job.ref!r}: depends_on entries must be non-empty strings, not {dep!r}"
                )
            if dep == job.ref:
                raise FlowCycle(f"flow job {job.ref!r} depends on itself")
            if dep not in first:
                raise UnknownFlowRef(f"flow job {job.ref!r} depends on {dep!r}, which is no job of this flow")
            deps[dep] = None
        edges[job.ref] = list(deps)
    if not any(edges.values()):
        raise EmptyFlow("flow(): no job depends on another; insert() independent jobs instead")
    # Kahn's topological sort: whatever cannot be placed lies on a cycle or behind one.
    waiting = {ref: len(parents) for ref, parents in edges.items()}
    dependents: dict[str, list[str]] = {ref: [] for ref in edges}
    for ref, parents in edges.items():
        for dep in parents:
            dependents[dep].append(ref)
    ready = [ref for ref, count in waiting.items() if count == 0]
    placed = 0
    while ready:
        ref = ready.pop()
        placed += 1
        for child in dependents[ref]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if placed < len(flow):
        # A ref left waits on a dependency that was not placed either, so walking dependencies
        # from any of them stays among them and must come back to a ref it passed: a cycle.
        cycle = _find_cycle(edges, {ref for ref, count in waiting.items() if count > 0})
        raise FlowCycle(
            f"flow(): the dependencies form a cycle: {' -> '.join(map(repr, cycle))} (each depends on the next)"
        )
    return [
        FlowJob(
            ref=job.ref, name=job.name, data=job.data, options=job.options, depends_on=tuple(edges[job.ref])
        )
        for job in flow
    ]


class FlowStore:
    """Boss's flow methods over one database context (see Boss for what each does)."""

    def __init__(self, context: DatabaseContext) -> None:
        self.context = context

    # -- inserting ------------------------------------------------------------------------------

    def flow(self, jobs: Any) -> dict[str, str]:
        """See Boss.flow()."""
        flow = check_flow(jobs)
        payloads: dict[str, dict[str, Any]] = {}
        ids: dict[str, str] = {}
        for job in flow:
            if job.options.get("singleton_next_slot"):
                raise InvalidOption(
                    f"flow job {job.ref!r}: singleton_next_slot is not available in a flow "
                    "(a debounced job's next slot would be a second insert)"
                )
            payload = job_payload(job.data, job.options, where=f"flow job {job.ref!r}")
            ids[job.ref] = payload.get("id") or random_uuid_text()
            # The values this function makes itself (a canonical uuid, the flow columns) are JSON
            # already: written as JsonText, they skip the codec's checks, a fifth of a 10,000-job
            # flow's Python time.
            payload["id"] = JsonText(f'"{ids[job.ref]}"')
            payloads[job.ref] = payload
        taken: dict[tuple[str, str], str] = {}
        for job in flow:
            other = taken.setdefault((job.name, ids[job.ref]), job.ref)
            if other != job.ref:
                raise DuplicateFlowRef(
                    f"flow jobs {other!r} and {job.ref!r} have the same id {ids[job.ref]} in queue {job.name!r}"
                )
        parents = {dep for job in flow for dep in job.depends_on}
        for job in flow:
            payloads[job.ref].update(
                blocked=_TRUE if job.depends_on else None,
                blocking=_TRUE if job.ref in parents else None,
                pending_dependencies=JsonText(str(len(job.depends_on))) if job.depends_on else None,
            )
        by_ref = {job.ref: job for job in flow}
        edges = [
            {
                "child_name": job.name,
                "child_id": ids[job.ref],
                "parent_name": by_ref[dep].name,
                "parent_id": ids[dep],
            }
            for job in flow
            for dep in job.depends_on
        ]
        self._check_queues(flow, payloads)
        in_transaction = self.context.in_atomic_block
        for attempt in (1, 2):
            try:
                self._insert(flow, payloads, ids, edges)
            except DatabaseError as exc:
                if sqlstate(exc) not in {UNDEFINED_TABLE, "23514"}:
                    raise
                # A queue's cached table is out of date (the queue was deleted, or re-created with
                # or without a partition, by another process): the savepoint rolled the flow back.
                for name in {job.name for job in flow}:
                    self.context.forget_route(name)
                gone = sorted({job.name for job in flow if not self.context.queue_exists(job.name)})
                if gone:
                    raise QueueNotFound(
                        f"flow(): queue(s) {', '.join(map(repr, gone))} were deleted"
                    ) from exc
                if attempt == 2 or in_transaction:
                    raise
                continue
            return ids
        raise AssertionError("unreachable")  # the loop returns or raises

    def _check_queues(self, flow: list[FlowJob], payloads: dict[str, dict[str, Any]]) -> None:
        """Every queue and dead letter the flow names exists, and key_strict_fifo jobs have a key:
        read, before anything is written."""
        context = self.context
        for job in flow:
            try:
                route = context.route(job.name)
            except QueueNotFound:
                raise QueueNotFound(
                    f"flow job {job.ref!r}: queue {job.name!r} does not exist; create it with create_queue() first"
                ) from None
            if route.policy == QueuePolicy.KEY_STRICT_FIFO and not payloads[job.ref].get("singleton_key"):
                raise InvalidOption(
                    f"flow job {job.ref!r}: queue {job.name!r} is key_strict_fifo: every job needs a singleton_key"
                )
        dead_letters = sorted(
            {p["dead_letter"] for p in payloads.values() if p.get("dead_letter") is not None}
        )
        for dead_letter in dead_letters:
            require_dead_letter(context, dead_letter)

    def _insert(
        self,
        flow: list[FlowJob],
        payloads: dict[str, dict[str, Any]],
        ids: dict[str, str],
        edges: list[dict[str, str]],
    ) -> None:
        """The flow's jobs, one statement per queue, and its edges, in one transaction (a savepoint
        inside the caller's): a job its queue refuses rolls the whole flow back."""
        context = self.context
        schema = context.quoted_schema
        by_queue: dict[str, list[FlowJob]] = {}
        for job in flow:
            by_queue.setdefault(job.name, []).append(job)
        with context.atomic():
            for name, queue_jobs in by_queue.items():
                route = context.route(name)
                params: dict[str, Any] = {
                    "jobs": encode_jobs([payloads[job.ref] for job in queue_jobs]),
                    "name": name,
                }
                if route.notify:
                    params["schema_key"] = schema_key(context.schema)
                sql = job_plans.insert_jobs(
                    schema, route.table, returning=True, notify=route.notify, flow=True
                )
                inserted = {str(row[0]) for row in context.all(sql, params)}
                refused = [job.ref for job in queue_jobs if ids[job.ref] not in inserted]
                if refused:
                    raise FlowJobRefused(
                        f"flow(): queue {name!r} refused job(s) {', '.join(map(repr, refused))} (its policy, a "
                        "throttle slot or a taken id); nothing of the flow was written",
                        refused,
                    )
            # Queue names (checked against pg-boss's pattern: no quote, backslash or control
            # character) and uuids: plain json.dumps is exact for them.
            context.execute(flow_plans.insert_dependencies(schema), {"edges": json.dumps(edges)})

    # -- reading --------------------------------------------------------------------------------

    def _edges(self, method: str, name: str, job_id: Any, limit: Any, after: Any) -> list[DependencyRef]:
        params: dict[str, Any] = {"name": validate_queue_name(name), "id": uuid_text(job_id, "id")}
        params["limit"] = page_limit(method, limit)
        cursor_ref = page_after_row(method, after, ("name", "id"), "id")
        if cursor_ref:
            params["after_name"], params["after_id"] = cursor_ref
        schema = self.context.quoted_schema
        paged = bool(cursor_ref)
        if method == "get_dependencies()":
            plan = flow_plans.get_dependencies(schema, after=paged)
        else:
            plan = flow_plans.get_dependents(schema, after=paged)
        return [DependencyRef(row[0], str(row[1])) for row in self.context.all(plan, params)]

    def get_dependencies(
        self, name: str, job_id: Any, *, limit: int | None = None, after: DependencyRef | None = None
    ) -> list[DependencyRef]:
        """See Boss.get_dependencies()."""
        return self._edges("get_dependencies()", name, job_id, limit, after)

    def get_dependents(
        self, name: str, job_id: Any, *, limit: int | None = None, after: DependencyRef | None = None
    ) -> list[DependencyRef]:
        """See Boss.get_dependents()."""
        return self._edges("get_dependents()", name, job_id, limit, after)

    def related(self, name: str, job_id: Any, *, parents: bool, limit: int | None = None) -> list[RelatedJob]:
        """A job's parents (or children) with their states and outputs, the first ``limit`` of them
        in (name, id) order when given."""
        params: dict[str, Any] = {"name": validate_queue_name(name), "id": uuid_text(job_id, "id")}
        if limit is not None:
            params["limit"] = integer("limit", limit, minimum=0)
        plan = flow_plans.related_jobs(self.context.quoted_schema, parents=parents, limited=limit is not None)
        return [
            RelatedJob(
                row[0],
                str(row[1]),
                row[2],
                json.loads(row[3]) if isinstance(row[3], str) else row[3],
                row[4],
            )
            for row in self.context.all(plan, params)
        ]

    def get_parent_outputs(self, name: str, job_id: Any) -> dict[DependencyRef, Any]:
        """See Boss.get_parent_outputs()."""
        return {
            DependencyRef(job.name, job.id): job.output
            for job in self.related(name, job_id, parents=True)
            if job.state == "completed"
        }

    def graph(self, name: str, job_id: Any, *, limit: int = GRAPH_EDGE_LIMIT) -> FlowGraph:
        """The flow job (name, id) belongs to: every job reachable through its edges, both ways,
        walked breadth first, at most ``limit`` edges (``truncated`` beyond)."""
        start = DependencyRef(validate_queue_name(name), uuid_text(job_id, "id"))
        schema = self.context.quoted_schema
        seen = {start}
        frontier = [start]
        found: set[tuple[DependencyRef, DependencyRef]] = set()
        truncated = False
        while frontier:
            rows = self.context.all(
                flow_plans.edges_of(schema),
                {
                    "names": [k.name for k in frontier],
                    "ids": [k.id for k in frontier],
                    # Edges read before come back too (they touch the frontier's other end).
                    "limit": limit + 1,
                },
            )
            frontier = []
            for row in rows:
                parent, child = DependencyRef(row[2], str(row[3])), DependencyRef(row[0], str(row[1]))
                found.add((parent, child))
                for end in (parent, child):
                    if end not in seen:
                        seen.add(end)
                        frontier.append(end)
            if len(found) > limit:
                truncated = True
                break
        edges = sorted(found, key=lambda e: (e[0].name, e[0].id, e[1].name, e[1].id))[:limit]
        ordered = sorted(seen, key=lambda k: (k.name, k.id))
        rows = self.context.all(
            flow_plans.job_states(schema),
            {"names": [k.name for k in ordered], "ids": [k.id for k in ordered]},
        )
        states = {DependencyRef(row[0], str(row[1])): row[2] for row in rows}
        blocked = frozenset(DependencyRef(row[0], str(row[1])) for row in rows if row[3])
        return FlowGraph(
            nodes={k: states.get(k) for k in ordered}, edges=edges, truncated=truncated, blocked=blocked
        )

    # -- resolving ------------------------------------------------------------------------------

    def resolve(
        self, queues: Sequence[str] | None = None, *, sender: Any = None, instance: Any = None
    ) -> int:
        """See Boss.resolve_flow(). Returns how many completed parents were resolved.

        Each batch that resolved any sends signals.flow_resolved from ``sender`` with ``instance``
        (the Monitor's class and the Monitor for its pass, Boss for resolve_flow()) once it has
        committed (inside a caller's transaction: when that commits), as pg-boss's navigator emits
        its ``flow`` event per batch.
        """
        context = self.context
        schema = context.quoted_schema
        if queues is None:
            rows = context.all(maintenance_plans.queue_tables(schema, by_name=False))
        else:
            names = [validate_queue_name(q, "queue") for q in queues]
            rows = context.all(maintenance_plans.queue_tables(schema, by_name=True), {"names": names})
        tables = [(table, list(names)) for table, names in rows]
        resolved = 0
        for table_name, names in tables:
            table = quote_job_table(table_name)
            sql = flow_plans.resolve_flow_jobs(schema, table)
            for start in range(0, len(names), CHUNK_SIZE):
                chunk = names[start : start + CHUNK_SIZE]
                for _batch in range(flow_plans.MAX_BATCHES_PER_PASS):
                    try:
                        with context.atomic():
                            if context.distributed:
                                # Citus runs the batch only split, one queue at a time
                                # (db/split_flows.py).
                                count = sum(split_resolve(context, table, name) for name in chunk)
                            else:
                                (count,) = context.one(sql, {"names": chunk})
                    except DatabaseError as exc:
                        if sqlstate(exc) != UNDEFINED_TABLE or context.in_atomic_block:
                            raise
                        # The table went with a queue deleted since the list was read.
                        logger.info("flow pass: table %s was dropped during the pass; skipped", table)
                        break
                    resolved += count
                    if count:
                        # At once in autocommit; inside a caller's transaction, when it commits.
                        transaction.on_commit(
                            functools.partial(
                                signals.send,
                                signals.flow_resolved,
                                sender,
                                table=table_name,
                                resolved=count,
                                instance=instance,
                                using=context.using,
                                schema=context.schema,
                            ),
                            using=context.using,
                        )
                    if count < flow_plans.FLOW_BATCH_SIZE:
                        break
        return resolved
