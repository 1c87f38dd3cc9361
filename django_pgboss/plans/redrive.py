"""SQL for dead letters: redrive, its preview, and a chain's lineage by source_root_id.

Every statement takes named parameters. The redrive filter is the same in all three statements
that use it: ``name`` (the dead-letter queue), ``destination`` (None: each job's source queue),
``source_name``, ``data`` (JSON, matched by containment), ``created_before`` and ``ids``, each
filter off when its value is NULL. ``table`` is the dead-letter queue's job table; redriven jobs
are written through the parent ``job`` table, so they land in whatever table the destination uses.
"""

from __future__ import annotations

import functools

from django_pgboss.plans.fragments import queue_jobs
from django_pgboss.plans.jobs import JOB_COLUMNS
from django_pgboss.plans.settle import PARENT_FIRST_USED, parent_first

# The queue a dead-letter row ``j`` goes back to: the override, else the queue it came from.
_DESTINATION = "COALESCE(%(destination)s::text, {alias}.source_name)"


def _destination(alias: str) -> str:
    return _DESTINATION.format(alias=alias)


def _candidate_filter(schema: str, table: str) -> str:
    """Which dead-letter rows ``j`` a redrive may take.

    Only jobs not yet started: one the dead-letter queue's own workers hold, or failed, stays.

    A key_strict_fifo job (a job sent to a key_strict_fifo dead-letter queue) whose key is held by
    an active, retrying or failed job of that queue waits behind it, as it would for fetch. Two
    reasons: job_i8 allows one such holder per key, so a collision could not be failed in place
    next to it; and a job left waiting would be a candidate again on every call, so a loop that
    redrives until nothing moves would never end. A retrying job holds its own key, so it is never
    a candidate itself; its queue's workers have it.
    """
    return f"""j.name = %(name)s
        AND j.state < 'active'
        AND NOT EXISTS (
          SELECT 1 FROM {schema}.{table} k
          WHERE j.policy = 'key_strict_fifo'
            AND k.name = j.name
            AND k.singleton_key = j.singleton_key
            AND k.policy = 'key_strict_fifo'
            AND k.state IN ('active', 'retry', 'failed')
        )
        AND (%(source_name)s::text IS NULL OR j.source_name = %(source_name)s::text)
        AND (%(data)s::jsonb IS NULL OR j.data @> %(data)s::jsonb)
        AND (%(created_before)s::timestamptz IS NULL OR j.created_on < %(created_before)s::timestamptz)
        AND (%(ids)s::uuid[] IS NULL OR j.id = ANY(%(ids)s::uuid[]))"""


def is_dead_letter_queue(schema: str, table: str) -> str:
    """Whether a queue serves as a dead-letter queue. Parameter: name.

    It does when some queue names it as its dead_letter, or when it holds dead-letter copies (rows
    with a source queue), which it keeps after the queue that sent them changed its dead_letter.
    Every copy carries source_root_id, so the second test reads only the rows job_i12 holds
    rather than the whole queue.
    """
    return f"""
    SELECT EXISTS (SELECT 1 FROM {schema}.queue WHERE dead_letter = %(name)s)
      OR EXISTS (
        SELECT 1 FROM {schema}.{table}
        WHERE name = %(name)s AND source_root_id IS NOT NULL AND source_name IS NOT NULL
      )
    """


def preview_redrive(schema: str, table: str) -> str:
    """What redrive() with the same filter would find, without doing it.

    Parameters: the filter and limit. One row per destination: its name (NULL when the job has no
    source and no override), whether that queue exists, and how many jobs would go there. A job
    whose destination does not exist is unroutable: redrive leaves it where it is.

    As pg-boss 12.38's previewRedrive, it reads at most ``limit`` jobs a redrive would move and at
    most ``limit`` it would leave in place, so a preview costs the same however large the dead
    letter queue has grown. Unordered: any ``limit`` of them say the same, and an ORDER BY would
    sort every candidate to pick them.
    """
    source = f"""FROM {schema}.{table} j
      LEFT JOIN {schema}.queue q ON q.name = {_destination("j")}
      WHERE {_candidate_filter(schema, table)}"""
    return f"""
    WITH routable AS (
      SELECT q.name AS destination {source} AND q.name IS NOT NULL LIMIT %(limit)s
    ),
    unroutable AS (
      SELECT {_destination("j")} AS destination {source} AND q.name IS NULL LIMIT %(limit)s
    )
    SELECT destination, true, count(*)::int FROM routable GROUP BY 1
    UNION ALL
    SELECT NULL, false, count(*)::int FROM unroutable HAVING count(*) > 0
    """


# Why a dead-letter row ``j`` was not re-created in queue ``q``, in pg-boss's shape (message,
# reason, destination, policy, singletonKey) so both sides read it alike: its output once it is
# failed in place.
_CONFLICT_OUTPUT = """jsonb_build_object(
        'message', 'Not redriven: queue ' || q.name || CASE
          WHEN q.policy = 'key_strict_fifo' AND j.singleton_key IS NULL
            THEN ' is key_strict_fifo and this job has no singleton key'
          WHEN j.singleton_key IS NULL
            THEN ' already has a job without a singleton key that its '
              || COALESCE(q.policy, 'standard') || ' policy allows only once'
          ELSE ' already has a job with singleton key ' || j.singleton_key || ' that its '
            || COALESCE(q.policy, 'standard') || ' policy allows only once'
        END,
        'reason', 'redrive_conflict',
        'destination', q.name,
        'policy', q.policy,
        'singletonKey', j.singleton_key
      )"""

# What a dead-letter row ``j`` that was not re-created becomes: failed in place, with ``output``
# (an expression) as its output. Its own output, if it had one, is kept as source_output when that
# is still empty.
_CONFLICT_SET = """state = 'failed',
      completed_on = {schema}.job_now(),
      source_output = COALESCE(j.source_output, j.output),
      output = {output}"""

# The columns a redriven job is written with, in the order of the values redrive() and
# redrive_insert() give them: the destination's settings as it is configured now, the job's
# identity carried over, and the chain's first job.
_REDRIVEN_COLUMNS = """id, name, data, priority, retry_limit, retry_backoff, retry_delay, retry_delay_max,
        expire_seconds, start_after, created_on, keep_until, deletion_seconds, policy,
        singleton_key, group_id, group_tier, heartbeat_seconds, dead_letter, source_root_id,
        trace_context"""


def _redriven_values(schema: str, new_id: str, job: str, root: str) -> str:
    """The values of _REDRIVEN_COLUMNS for the job ``job`` re-created in queue ``q`` as ``new_id``,
    with ``root`` its chain's first job (each an expression)."""
    return f"""{new_id}, q.name, {job}.data, {job}.priority, q.retry_limit, q.retry_backoff, q.retry_delay,
        q.retry_delay_max, q.expire_seconds, {schema}.job_now(), {schema}.job_now(),
        {schema}.job_now() + q.retention_seconds * interval '1s', q.deletion_seconds, q.policy,
        {job}.singleton_key, {job}.group_id, {job}.group_tier, q.heartbeat_seconds, q.dead_letter,
        {root}, {job}.trace_context"""


@functools.lru_cache(maxsize=64)
def redrive(schema: str, table: str) -> str:
    """Move dead-letter jobs back to their source queue (or the destination), oldest first.

    Parameters: the filter and ``limit``. Returns one row per job taken, oldest first: its id, the
    id it was re-created under (NULL if it was not), and whether it was failed in place.

    The candidates are the oldest ``limit`` matching rows whose destination exists (a job with no
    source and no override, or whose source queue was deleted, is unroutable and stays), locked
    with SKIP LOCKED so two redrives at once split the work instead of moving a job twice or
    waiting on each other. Each is re-created as a new job: a new id, state created, retry_count
    0, no output, every queue setting (retries, expiry, retention, policy, heartbeat, dead_letter)
    from the destination as it is configured now, the job's identity (data, priority,
    singleton_key, group) carried over, and source_root_id, the id of the chain's first job, so
    get_lineage() finds it. The re-created jobs are deleted from the dead-letter queue.

    The destination's policy index may refuse a job (short, stately, exclusive: a job with its key
    is already waiting there, or an older job of this batch took the slot). ON CONFLICT DO NOTHING
    skips just that row instead of aborting the batch, and the dead-letter row is failed in place
    with a redrive_conflict output: never deleted, so nothing is lost; failed, so the next redrive
    does not take it again and stall behind it; and retry() makes it a candidate again once the
    collision is gone. A keyless job bound for a key_strict_fifo queue, whose check constraint
    would abort the whole statement, is refused the same way. Of several refused key_strict_fifo
    dead-letter rows with one key only the oldest is failed (job_i8 allows one failed row per key);
    the rest wait behind it.

    The delete and the conflict update find their rows by primary key, (name, id = ANY(array)):
    joined to the CTE instead, the planner reads every row of a large dead-letter queue again.

    Each candidate gets its new id in ``candidates``, before the insert: the statement's parts
    cannot see one another's writes, so comparing the ids the insert returns with the ones handed
    out is the only way to tell, within one statement, which jobs were re-created. The CTE is
    materialized (and FOR UPDATE), so each row keeps the one id it was given.

    Its first CTE locks the parent ``job`` table before the dead-letter queue's own table
    (settle.parent_first), in the order delete_queue's DROP TABLE of a partition takes them.
    """
    filter_sql = _candidate_filter(schema, table)
    return f"""
    WITH {parent_first(schema)},
    candidates AS MATERIALIZED (
      SELECT j.id, j.created_on, gen_random_uuid() AS new_id
      FROM {schema}.{table} j
      JOIN {schema}.queue q ON q.name = {_destination("j")}
      WHERE {filter_sql} AND {PARENT_FIRST_USED}
      ORDER BY j.created_on, j.id
      LIMIT %(limit)s
      FOR UPDATE OF j SKIP LOCKED
    ),
    created AS (
      INSERT INTO {schema}.job ({_REDRIVEN_COLUMNS})
      SELECT {_redriven_values(schema, "c.new_id", "m", "COALESCE(m.source_root_id, m.source_id)")}
      FROM candidates c
      JOIN {schema}.{table} m ON m.name = %(name)s AND m.id = c.id
      JOIN {schema}.queue q ON q.name = {_destination("m")}
      WHERE NOT (q.policy = 'key_strict_fifo' AND m.singleton_key IS NULL)
      ORDER BY m.created_on, m.id
      ON CONFLICT DO NOTHING
      RETURNING id
    ),
    settled AS (
      SELECT c.id, c.created_on, c.new_id, (i.id IS NOT NULL) AS moved
      FROM candidates c
      LEFT JOIN created i ON i.id = c.new_id
    ),
    removed AS (
      DELETE FROM {schema}.{table}
      WHERE {queue_jobs("ARRAY(SELECT id FROM settled WHERE moved)")}
    ),
    refused AS (
      UPDATE {schema}.{table} j
      SET {_CONFLICT_SET.format(schema=schema, output=_CONFLICT_OUTPUT)}
      FROM {schema}.queue q
      WHERE {queue_jobs("ARRAY(SELECT id FROM settled WHERE NOT moved)", alias="j.")}
        AND q.name = {_destination("j")}
        AND (j.policy IS DISTINCT FROM 'key_strict_fifo' OR j.id IN (
          SELECT DISTINCT ON (m.singleton_key) m.id
          FROM {schema}.{table} m
          WHERE {queue_jobs("ARRAY(SELECT id FROM settled WHERE NOT moved)", alias="m.")}
            AND m.policy = 'key_strict_fifo'
          ORDER BY m.singleton_key, m.created_on, m.id
        ))
      RETURNING j.id
    )
    SELECT s.id, CASE WHEN s.moved THEN s.new_id END, f.id IS NOT NULL
    FROM settled s
    LEFT JOIN refused f ON f.id = s.id
    ORDER BY s.created_on, s.id
    """


# The split redrive of the citus-distributed backend. redrive() is one statement whose parts
# write two queues' tables, which on Citus are shards of distributed tables, maybe on two nodes:
# Citus cannot run its modifying CTEs as one routed statement, nor call a STABLE function
# (job_now(), jsonb_build_object()) on a column in an UPDATE. So it runs as pg-boss splits such
# statements for distributed engines: the candidates taken and locked on the dead-letter queue's
# shard, each destination's jobs inserted on its own, then the moved jobs deleted and the refused
# ones failed in place, every statement in one transaction (db/split_redrive.py), so a job is moved,
# failed in place or left as it was, never two of these.


def redrive_candidates(schema: str, table: str) -> str:
    """The split redrive's first statement: take and lock the jobs a redrive would, as redrive()
    does (the filter and ``limit``; oldest first, SKIP LOCKED). Returns per job, oldest first: its
    id, its destination, its policy and singleton_key (which tell the refused jobs of one
    key_strict_fifo key apart), the output it is failed in place with if its destination refuses
    it (computed here, in a read, where Citus allows the function), and the job as
    redrive_insert() reads it, JSON text with a new id.
    """
    return f"""
    SELECT j.id, q.name, j.policy, j.singleton_key, {_CONFLICT_OUTPUT}::text,
      json_build_object(
        'new_id', gen_random_uuid(), 'data', j.data, 'priority', j.priority,
        'singleton_key', j.singleton_key, 'group_id', j.group_id, 'group_tier', j.group_tier,
        'root', COALESCE(j.source_root_id, j.source_id), 'trace_context', j.trace_context
      )::text
    FROM {schema}.{table} j
    JOIN {schema}.queue q ON q.name = {_destination("j")}
    WHERE {_candidate_filter(schema, table)}
    ORDER BY j.created_on, j.id
    LIMIT %(limit)s
    FOR UPDATE OF j SKIP LOCKED
    """


def redrive_insert(schema: str) -> str:
    """The split redrive's second statement, once per destination: re-create jobs in queue
    ``name`` as redrive() does. Parameters: name, jobs (a JSON array of redrive_candidates()'
    jobs, oldest first, so that of two jobs one policy slot admits the older is written).
    Returns the ids written; a job the destination's policy refused is not among them."""
    return f"""
    INSERT INTO {schema}.job ({_REDRIVEN_COLUMNS})
    SELECT {_redriven_values(schema, "m.new_id", "m", "m.root")}
    FROM ROWS FROM (json_to_recordset(%(jobs)s::json) AS (
      new_id uuid, data jsonb, priority int, singleton_key text, group_id text, group_tier text,
      root uuid, trace_context jsonb
    )) WITH ORDINALITY AS m (
      new_id, data, priority, singleton_key, group_id, group_tier, root, trace_context, ord
    )
    JOIN {schema}.queue q ON q.name = %(name)s
    WHERE NOT (q.policy = 'key_strict_fifo' AND m.singleton_key IS NULL)
    ORDER BY m.ord
    ON CONFLICT DO NOTHING
    RETURNING id
    """


def redrive_remove(schema: str, table: str) -> str:
    """The split redrive's third statement: delete the moved jobs from dead-letter queue ``name``.
    Parameters: name, ids."""
    return f"DELETE FROM {schema}.{table} WHERE {queue_jobs()}"


def redrive_refuse(schema: str, table: str) -> str:
    """The split redrive's last statement: fail in place the jobs of dead-letter queue ``name``
    whose destination refused them, as redrive() does. Parameters: name, ids, outputs (a JSON
    object from each id to the output redrive_candidates() computed for it). Returns their ids."""
    output = "%(outputs)s::jsonb -> j.id::text"
    return f"""
    UPDATE {schema}.{table} j
    SET {_CONFLICT_SET.format(schema=schema, output=output)}
    WHERE {queue_jobs(alias="j.")}
    RETURNING j.id
    """


def lineage(schema: str) -> str:
    """Every job of the dead-letter chain that holds a job id, oldest first. Parameters: id, and
    name, the queue that holds it (NULL: any queue).

    A chain is its first job (the root) and every job with source_root_id = the root: each
    dead-letter copy and each redriven job, in whatever queue. The id given may be any of them,
    the root included, and the root may be gone (retention deletes it): its id still names the
    chain through the others' source_root_id.

    The job table's primary key is (name, id), and a chain crosses queues, so the job the id names
    is found by probing that key once per queue rather than by scanning every table for the id.
    The chain itself is read through job_i12, the partial index on source_root_id. A job that was
    never dead-lettered is a chain of one; an id no job has gives no rows.

    Two queues may each hold a job with one id (the key is (name, id)): when both were
    dead-lettered, the rows hold both chains, which api/lineage.py tells apart.
    """
    columns = ", ".join(f"j.{column}" for column in JOB_COLUMNS)
    return f"""
    WITH named AS (
      SELECT COALESCE(j.source_root_id, j.id) AS root
      FROM {schema}.queue q
      JOIN {schema}.job j ON j.name = q.name AND j.id = %(id)s::uuid
      WHERE %(name)s::text IS NULL OR q.name = %(name)s::text
      LIMIT 1
    ),
    chain AS (
      SELECT COALESCE((SELECT root FROM named), %(id)s::uuid) AS root
    )
    SELECT {columns}
    FROM {schema}.job j
    WHERE j.source_root_id = (SELECT root FROM chain)
    UNION ALL
    SELECT {columns}
    FROM {schema}.queue q
    JOIN {schema}.job j ON j.name = q.name AND j.id = (SELECT root FROM chain)
    WHERE j.source_root_id IS DISTINCT FROM j.id
    ORDER BY created_on, id
    """
