"""Telling apart two dead-letter chains whose first jobs share an id (pure: no database).

The job table's key is (name, id), and ``send(id=...)`` lets two queues each hold a job with one
id. A chain is found by its root's id (source_root_id, index job_i12), so two such roots that
were both dead-lettered give one set of candidates holding both chains. The columns still tell
them apart: a dead-letter copy names the job it copies (source_name, source_id), and the first
copy of a chain names its root's queue, so following those links from any job reaches the queue
of its root. A redriven job keeps only source_root_id (the copy it was made from is gone), so it is
put in the chain whose jobs were in its queue (or, when no chain was there, the chain whose root
queue that is); when both chains have been through that queue, nothing stored says which one it
belongs to, and it is shown with both.

Only a chain that lost a copy can own such a job: a redrive deletes the copy it re-creates, so the
redriven job's chain holds a job that failed into a dead-letter queue and that no copy present
names (or a root that is gone and that no copy names). A chain whose every failure still has its
copy waiting, or whose root never failed, is left out, whatever queues it went through: without
that, the job redriven from one root's copy into the other root's queue was shown in the chain
of a root that never failed, and the failed root's own lineage missed it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from django_pgboss.records import Job


def _origin(job: Job, root_id: str, by_key: dict[tuple[str, str], Job]) -> tuple[str | None, Job]:
    """The root queue of ``job``'s chain as its links show it (or None), and the furthest job they reach."""
    seen: set[tuple[str, str]] = set()
    while (job.name, job.id) not in seen:
        seen.add((job.name, job.id))
        if job.source_id is None:
            # The root itself, or a redriven job (no link to the copy it was made from).
            return (job.name if job.id == root_id and job.source_root_id is None else None), job
        if job.source_id == root_id:
            return job.source_name, job  # the chain's first copy names the root's queue
        parent = by_key.get((job.source_name or "", job.source_id))
        if parent is None:
            return None, job  # the job it was copied from is gone (retention, a redrive)
        job = parent
    return None, job


def one_chain(candidates: Sequence[Job], name: str, job_id: str) -> list[Job]:
    """The jobs of ``candidates`` (one root id's chains, oldest first) in the chain of job (name, job_id).

    When no candidate is that job, ``job_id`` can only be the id of a root that retention deleted
    (the candidates are the jobs naming it as their source_root_id), and ``name`` its queue.
    """
    start = next((j for j in candidates if j.name == name and j.id == job_id), None)
    root_id = job_id if start is None else start.source_root_id or start.id
    by_key = {(j.name, j.id): j for j in candidates}
    origins = {(j.name, j.id): _origin(j, root_id, by_key) for j in candidates}
    # The queues each chain's linked jobs were in, by the queue of its root.
    visited: dict[str, set[str]] = defaultdict(set)
    for job in candidates:
        root_queue, _ = origins[(job.name, job.id)]
        if root_queue is not None:
            visited[root_queue] |= {job.name, root_queue}
    # The queues the chain's first job was sent to, as the root itself or its first copies say.
    root_queues = {j.name for j in candidates if j.id == root_id and j.source_root_id is None}
    root_queues |= {j.source_name for j in candidates if j.source_id == root_id and j.source_name}
    if (start is not None and len(root_queues) <= 1) or not root_queues:
        # One chain (or nothing links any job to a root): nothing to tell apart.
        return list(candidates)

    # The chains that lost a copy (see the module docstring): only they can own a redriven job.
    copied = {(j.source_name, j.source_id) for j in candidates if j.source_id is not None}
    open_chains: set[str] = set()
    for job in candidates:
        root_queue, _ = origins[(job.name, job.id)]
        failed_into_a_dead_letter = job.state == "failed" and job.dead_letter
        if root_queue is not None and failed_into_a_dead_letter and (job.name, job.id) not in copied:
            open_chains.add(root_queue)
    if start is None and name not in root_queues:
        open_chains.add(name)  # the root asked for is gone, and no copy names it

    def chains(job: Job) -> set[str]:
        root_queue, top = origins[(job.name, job.id)]
        if root_queue is not None:
            return {root_queue}
        # A redriven job: of the chains that lost a copy, the ones that went through its queue,
        # else all of them; when nothing says a chain lost one, the guess by queue alone.
        if open_chains:
            return {queue for queue in open_chains if top.name in visited.get(queue, set())} or open_chains
        return {queue for queue, names in visited.items() if top.name in names} or {top.name}

    mine = chains(start) if start is not None else {name}
    return [job for job in candidates if chains(job) & mine]
