"""Chaining Django tasks through a flow: several task calls enqueued as one pg-boss flow, each
call run only once the calls it depends on have succeeded.

django.tasks has no notion of one task waiting for another, and this does not bend its API: a
flow is enqueued by :func:`enqueue_flow`, a function beside it, from the same Task objects and
arguments ``enqueue()`` takes, and hands back the same TaskResults. Each call becomes the job
``enqueue()`` would send (PgBossBackend.prepare()), and the jobs go in through boss.flow(): all of
them or none, in the caller's transaction. A task that wants its parents' return values takes its
context (``@task(takes_context=True)``) and calls :func:`parent_results`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from django_pgboss.api.flows import FlowJob, check_flow
from django_pgboss.records import DependencyRef
from django_pgboss.tasks.backend import PgBossBackend
from django_pgboss.tasks.compat import (
    InvalidTask,
    Task,
    TaskContext,
    TaskResult,
    task_backends,
    task_enqueued,
)


@dataclass(frozen=True)
class TaskStep:
    """One task call of a flow: ``ref`` names it within the flow, ``task`` is the task (with
    ``.using()`` applied, if any), ``args`` and ``kwargs`` its arguments, ``depends_on`` the refs
    of the calls it waits for."""

    ref: str
    task: Task
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    depends_on: Sequence[str] = ()


def _backend(steps: Sequence[TaskStep]) -> PgBossBackend:
    aliases = {step.task.backend for step in steps}
    if len(aliases) != 1:
        raise InvalidTask(f"enqueue_flow() needs every task on one backend, not {sorted(aliases)}")
    backend = task_backends[aliases.pop()]
    if not isinstance(backend, PgBossBackend):
        raise InvalidTask(f"enqueue_flow() needs a PgBossBackend, not {type(backend).__name__}")
    return backend


def enqueue_flow(steps: Sequence[TaskStep]) -> dict[str, TaskResult[Any, Any]]:
    """Enqueue task calls as one flow; returns each call's TaskResult by its ref.

    A call with ``depends_on`` runs once every call it names has succeeded (its job completed); a
    call that fails for good leaves the calls after it waiting, as any flow does (docs/flows.md).
    Raises what boss.flow() raises for the graph (EmptyFlow, UnknownFlowRef, FlowCycle ...)
    and what enqueue() raises for a call, before anything is written; ``task_enqueued`` is sent
    for each call once the flow is in.
    """
    if not isinstance(steps, Sequence) or isinstance(steps, str | bytes):
        raise InvalidTask("enqueue_flow() takes a list of TaskStep")
    for index, step in enumerate(steps):
        if not isinstance(step, TaskStep):
            raise InvalidTask(f"enqueue_flow() step {index} must be a TaskStep, not {type(step).__name__}")
    # The graph's shape first, so a cycle or an unknown ref is named before any task is checked.
    check_flow([FlowJob(s.ref, s.task.queue_name, depends_on=s.depends_on) for s in steps])
    backend = _backend(steps)
    prepared = [backend.prepare(step.task, step.args, step.kwargs) for step in steps]
    if backend.create_queues:
        backend.ensure_queues()
    backend.boss.flow(
        [
            FlowJob(step.ref, step.task.queue_name, data, options, depends_on=step.depends_on)
            for step, (_result, data, options) in zip(steps, prepared, strict=True)
        ]
    )
    results = {}
    for step, (result, _data, _options) in zip(steps, prepared, strict=True):
        object.__setattr__(result, "enqueued_at", timezone.now())
        task_enqueued.send(type(backend), task_result=result)
        results[step.ref] = result
    return results


def parent_results(context: TaskContext) -> dict[DependencyRef, Any]:
    """The return values of the running task call's parents in its flow, by DependencyRef(queue,
    id), the id being the parent's TaskResult id; for a task with ``takes_context=True``."""
    result = context.task_result
    backend = task_backends[result.backend]
    if not isinstance(backend, PgBossBackend):
        raise InvalidTask(f"parent_results() needs a PgBossBackend, not {type(backend).__name__}")
    outputs = backend.boss.get_parent_outputs(result.task.queue_name, result.id)
    return {ref: (output or {}).get("return_value") for ref, output in outputs.items()}
