"""SQL for settling jobs: complete, fail (retry, terminal failure, dead letter), cancel, resume,
retry, delete and touch, each optionally fenced to the attempt a worker fetched."""

from __future__ import annotations

import functools

from django_pgboss.plans.fragments import JOB_COLUMNS, UNSEEN_QUEUE_NAME, counted_retained, queue_jobs

# The attempt fence (pg-boss #925). A worker whose claim lapsed (its heartbeat went stale, the job
# expired) may still be running when another worker claims the job again. Settling by id and state
# alone would let the stale worker complete or fail the newer attempt. Every claim of a started job
# bumps retry_count, so the retry_count a worker fetched names its attempt: the settle matches
# 'id:retry_count' pairs and leaves a job whose count has moved on alone. Matching with = ANY over
# one text[] parameter is a hashed lookup, as cheap as the unfenced settle (pg-boss measured 58 ms
# against 54 ms for 5,000 jobs); it is always paired with state = 'active'.
ATTEMPT_FENCE = "AND state = 'active' AND (id::text || ':' || retry_count::text) = ANY(%(attempts)s::text[])"

# The longest retry wait, in seconds: the largest retry_delay an int4 column holds (68 years).
RETRY_DELAY_CEILING = 2**31 - 1

# What every settle returns: how many jobs it changed.
_COUNT = "SELECT count(*) FROM results"

# ... and a fail that reports its dead-letter copies, as [source id, queue, copy id] triples.
# (and, for the worker's job_failed signal, each failed job's id and the state it went to).
_REPORT = """SELECT (SELECT count(*) FROM results),
      (SELECT COALESCE(json_agg(json_build_array(source_id, name, id)), '[]'::json) FROM dead_lettered),
      (SELECT COALESCE(json_agg(json_build_array(id, state)), '[]'::json) FROM results)"""

# ... and, for the monitor's sweeps (``tally``), the jobs failed for good, per queue: a JSON array
# of [queue, count, how many of them have a dead letter, the first ids up to %(tally_ids)s]. The
# aggregate reads only the rows the statement failed, so a sweep that fails nothing pays nothing.
_TALLY = """(SELECT COALESCE(json_agg(json_build_array(name, failed, dead_lettered, ids)), '[]'::json)
      FROM (
        SELECT name, count(*) AS failed, count(dead_letter) AS dead_lettered,
          (array_agg(id ORDER BY id))[1:%(tally_ids)s] AS ids
        FROM results WHERE state = 'failed' GROUP BY name
      ) tallied)"""


def _count_retained(schema: str) -> str:
    """What a delete or a resume returns: how many jobs it changed, and how many of them the
    queue's retained_count held, for the caller to take off it."""
    return f"SELECT count(*), (count(*) FILTER (WHERE {counted_retained(schema)}))::int FROM results"


def _fence(fenced: bool) -> str:
    return ATTEMPT_FENCE if fenced else ""


@functools.lru_cache(maxsize=256)
def complete_jobs(schema: str, table: str, *, fenced: bool, include_queued: bool = False) -> str:
    """Complete active jobs with an output. Parameters: output (json), name, ids[, attempts].

    With include_queued, jobs still waiting (created or retry) are completed too, and released
    from any flow dependency they waited on; a fenced settle still names an active attempt.
    Flow dependants are not unblocked here: that is the background resolver's work, found through
    job_i9, so completion stays one cheap update whatever the number of partitions.
    """
    states = "state < 'completed'" if include_queued else "state = 'active'"
    unblock = ", blocked = false, pending_dependencies = 0" if include_queued else ""
    return f"""
    WITH results AS (
      UPDATE {schema}.{table}
      SET completed_on = {schema}.job_now(), state = 'completed', output = %(output)s::jsonb{unblock}
      WHERE {queue_jobs()} AND {states} {_fence(fenced)}
      RETURNING id
    )
    {_COUNT}
    """


@functools.lru_cache(maxsize=256)
def complete_jobs_with_outputs(schema: str, table: str) -> str:
    """Complete a batch of active jobs, each with its own output, fenced to each job's attempt.

    Parameters: records (a JSON object whose keys are the attempts, 'id:retry_count', and whose
    values are the outputs), name, and ids (the ids again, as an array; the worker passes its
    text, as JobStore.complete_each says why). This is the worker's settle: one statement for
    every job its handlers finished since the last flush. The ids come back as text.

    The id array finds the rows through the primary key, and each row looks its own attempt up
    in the object: a key that is missing is an attempt that is not the job's any more (the fence),
    and its value is the output (JSON null stored as SQL NULL, as a handler's None always was).
    There is no join for the planner to order. The recordset this replaced (json_to_recordset()
    joined to the rows) was planned, at 50 jobs, as a nested loop with the id-array index scan
    outside and the recordset inside, so every row was compared with every record: 2,450 rows
    removed by the join filter for 50 jobs, a cost that grows with the square of the batch
    (EXPLAIN ANALYZE, 20,000 waiting jobs). The object's lookup is a binary search of its keys;
    prepared, 50 jobs took 1.9 ms against 2.5 ms, 500 jobs 12.3 ms against 13.6 ms
    (bench/README.md, the batch-50 drain). Keyed by the attempt rather than the id, two results
    for one job in one batch (a late result of an attempt failed at its deadline, and the next
    attempt's) stay two keys, and only the attempt that is active matches.
    """
    attempt = "(j.id::text || ':' || j.retry_count::text)"
    return f"""
    UPDATE {schema}.{table} j
    SET completed_on = {schema}.job_now(), state = 'completed',
      output = NULLIF(%(records)s::jsonb -> {attempt}, 'null'::jsonb)
    WHERE {queue_jobs(alias="j.")} AND j.state = 'active'
      AND %(records)s::jsonb ? {attempt}
    RETURNING j.id::text
    """


def parent_first(schema: str) -> str:
    """A CTE that locks the parent ``job`` table before the statement touches any job table.

    A statement that writes one queue's table and also inserts through ``job`` (a fail that
    dead-letters, a redrive) would otherwise lock the queue's table first and ``job`` second, the
    reverse of DROP TABLE of a partition (delete_queue of a partitioned queue), which locks ``job``,
    then the partition, then the default partition ``job_common``: each would hold what the other
    waits for (tests/test_queue_locks.py forces that interleaving). PostgreSQL locks a statement's
    tables in the order they appear, as it parses it and, for a prepared statement, as its plan's
    range table lists them, CTEs first to last; so this must be the first CTE, and it must be
    referenced (with ``NOT EXISTS (SELECT FROM job_parent_first)``), since the planner drops an
    unreferenced SELECT CTE and with it the lock. MATERIALIZED keeps it a CTE of its own. It reads
    no row (ONLY the parent, which holds none): ACCESS SHARE conflicts with nothing but the ACCESS
    EXCLUSIVE of DDL, so the usual traffic on the queue tables never waits for it.
    """
    return f"job_parent_first AS MATERIALIZED (SELECT FROM ONLY {schema}.job LIMIT 0)"


PARENT_FIRST_USED = "NOT EXISTS (SELECT FROM job_parent_first)"

#: The columns a dead-letter copy writes, its queue's name first: shared by the fail statement's
#: copy and the split fail's (dead_letter_copies()), so the two write the same job.
_DEAD_LETTER_COLUMNS = (
    "name, priority, data, retry_limit, retry_backoff, retry_delay, start_after, created_on, "
    "keep_until, deletion_seconds, expire_seconds, singleton_key, group_id, group_tier, "
    "heartbeat_seconds, source_name, source_id, source_created_on, source_retry_count, "
    "source_output, source_root_id, trace_context"
)


def _dead_letter_values(schema: str) -> str:
    """A dead-letter copy's values after its queue's name, from the failed job ``r`` and its
    dead-letter queue ``q``: the queue's retry and retention settings, the job's payload, and the
    provenance columns that chain it to the job it copies."""
    return (
        f"r.priority, r.data, q.retry_limit, q.retry_backoff, q.retry_delay, {schema}.job_now(), "
        f"{schema}.job_now(), {schema}.job_now() + q.retention_seconds * interval '1s', "
        "q.deletion_seconds, q.expire_seconds, r.singleton_key, r.group_id, r.group_tier, "
        "q.heartbeat_seconds, r.name, r.id, r.created_on, r.retry_count, r.output, "
        "COALESCE(r.source_root_id, r.id), r.trace_context"
    )


def fail_statement(
    schema: str,
    table: str,
    where: str,
    *,
    terminal: bool = False,
    report: bool = False,
    split: bool = False,
    tally: bool = False,
) -> str:
    """Fail the jobs ``where`` selects: retry those with attempts left, fail the rest for good and
    copy them to their dead letter. Parameters: output (json), and those of ``where``.

    ``terminal`` fails every job for good whatever its attempts left, so it goes to its dead
    letter at once (pg-boss's perJobResults ``deadletter``). With ``report`` the statement
    returns, besides the count, the dead-letter copies it made as a JSON array of
    [source id, dead-letter queue, copy id] (the worker logs them), and each failed job as
    [id, state] ('retry', or 'failed' for good: the worker's job_failed signal says which).

    A failed job is deleted and re-inserted under the same id, rather than updated, because its
    policy index may refuse it the retry state (a stately key that already has a job waiting to
    retry): ON CONFLICT drops such a retry, and the job is then re-inserted as failed for good, so
    nothing is lost. The retry waits retry_delay seconds, or with retry_backoff
    max(retry_delay, 1) * 2^(n-1) * (1 + random()) for the n-th attempt (n capped at 16), at most
    retry_delay_max, and never more than 2^31 - 1 seconds (RETRY_DELAY_CEILING). retry_count is left
    alone: the next claim counts the attempt.

    The ceiling makes the backoff saturate instead of overflowing: 2^16 times a retry_delay near
    2^31 seconds is far past the largest interval (about 292,000 years), and one such row would make
    this statement raise "interval out of range", in fail() and in every monitor pass that expires
    the job, for every queue the pass covers.

    A job failed for good is copied, as a new job, into its dead_letter queue (through the parent
    table, since that queue may have a partition of its own), taking that queue's settings and
    carrying its provenance: source_name, source_id, source_created_on, source_retry_count, its
    final output as source_output (the copy's own output starts empty) and source_root_id, the id
    of the first job of the chain, which every hop keeps. The copy has no dead_letter of its own,
    so it never chains further. The count returned is of the failed jobs, not the copies.

    The statement locks the parent ``job`` table before the queue's own table (parent_first), as
    delete_queue's DROP TABLE of a partition does: in the other order the two deadlocked.

    ``split`` is the citus-distributed backend's form, pg-boss's split of this statement for
    distributed engines: it writes no dead-letter copy and reads nothing through the parent
    ``job`` table, so every job table it touches is the queue's own, on the one node that holds
    the queue. It returns the count, each failed job as [id, state], and the rows of the jobs
    failed for good that have a dead letter (a JSON array of job rows), which the caller copies
    with dead_letter_copies(), one statement per dead-letter queue, in the same transaction.

    ``tally`` (the monitor's sweeps) adds a last column: the jobs failed for good, per queue, as
    [queue, count, dead-lettered count, first ids] (parameter tally_ids: how many ids at most),
    which the monitor logs as the worker logs a job it fails for good.
    """
    retry_start = f"""CASE
        WHEN retry_count = retry_limit THEN start_after
        WHEN NOT retry_backoff THEN {schema}.job_now() + retry_delay * interval '1s'
        ELSE {schema}.job_now() + LEAST(
          retry_delay_max,
          GREATEST(retry_delay, 1) * (
            2 ^ LEAST(16, retry_count + 1) / 2 + 2 ^ LEAST(16, retry_count + 1) / 2 * random()
          ),
          {RETRY_DELAY_CEILING}
        ) * interval '1s'
      END"""

    def reinsert(state: str, start_after: str, completed_on: str) -> str:
        # Every column of the deleted row, but for these.
        changed = {
            "state": state,
            "start_after": start_after,
            "completed_on": completed_on,
            "output": "(SELECT output FROM fail_output)",
            "heartbeat_on": "NULL",
        }
        # trace_context is no Job field but is carried over as pg-boss 12.38 carries it, so a
        # retry's process span continues the trace its send stored (upsert_by_key is not: a failed
        # job is no upserted job waiting, as in 12.38).
        columns = (*JOB_COLUMNS, "trace_context")
        return f"""
      INSERT INTO {schema}.{table} ({", ".join(columns)})
      SELECT {", ".join(changed.get(column, column) for column in columns)}
      FROM deleted_jobs"""

    retried = reinsert(
        f"CASE WHEN retry_count < retry_limit THEN 'retry'::{schema}.job_state ELSE 'failed'::{schema}.job_state END",
        retry_start,
        f"CASE WHEN retry_count < retry_limit THEN NULL ELSE {schema}.job_now() END",
    )
    failed = reinsert(f"'failed'::{schema}.job_state", "start_after", f"{schema}.job_now()")
    head = f"""{parent_first(schema)},
    fail_output AS (SELECT %(output)s::jsonb AS output WHERE {PARENT_FIRST_USED})"""
    if split:
        head = "fail_output AS (SELECT %(output)s::jsonb AS output)"
    body = f"""
    WITH {head},
    deleted_jobs AS (
      DELETE FROM {schema}.{table}
      WHERE {where}
      RETURNING *
    ),
    retried_jobs AS ({retried}{" WHERE false" if terminal else ""}
      ON CONFLICT DO NOTHING
      RETURNING *
    ),
    failed_jobs AS ({failed}
      WHERE id NOT IN (SELECT id FROM retried_jobs)
      RETURNING *
    ),
    results AS (
      SELECT * FROM retried_jobs
      UNION ALL
      SELECT * FROM failed_jobs
    )"""
    tallied = f",\n      {_TALLY}" if tally else ""
    if split:
        return f"""{body}
    SELECT (SELECT count(*) FROM results),
      (SELECT COALESCE(json_agg(json_build_array(id, state)), '[]'::json) FROM results),
      (SELECT COALESCE(json_agg(r), '[]'::json) FROM results r WHERE r.state = 'failed' AND r.dead_letter IS NOT NULL){tallied}
    """
    if report:
        selected = _REPORT + tallied
    elif tally:
        selected = f"SELECT (SELECT count(*) FROM results){tallied}"
    else:
        selected = _COUNT
    return f"""{body},
    dead_lettered AS (
      INSERT INTO {schema}.job (
        {_DEAD_LETTER_COLUMNS}
      )
      SELECT
        r.dead_letter, {_dead_letter_values(schema)}
      FROM results r
      JOIN {schema}.queue q ON q.name = r.dead_letter
      WHERE r.state = 'failed'
      RETURNING source_id, name, id
    )
    {selected}
    """


@functools.lru_cache(maxsize=256)
def fail_jobs(
    schema: str,
    table: str,
    *,
    fenced: bool,
    terminal: bool = False,
    report: bool = False,
    split: bool = False,
) -> str:
    """Fail jobs by id. Parameters: output (json), name, ids[, attempts].

    Unfenced, a job still waiting can be failed too (state < 'completed'), as in pg-boss; fenced,
    only the named active attempt. ``terminal``, ``report`` and ``split`` are fail_statement's.
    """
    return fail_statement(
        schema,
        table,
        f"{queue_jobs()} AND state < 'completed' {_fence(fenced)}",
        terminal=terminal,
        report=report,
        split=split,
    )


@functools.lru_cache(maxsize=64)
def dead_letter_copies(schema: str) -> str:
    """Copy jobs failed for good into one dead-letter queue: the second half of the split fail
    (fail_statement(split=True)). Parameters: name (the dead-letter queue), failed (a JSON array
    of the failed jobs' rows, as the split fail returned them). Returns [source id, queue, copy id]
    rows. The copies are the ones the unsplit statement writes; every row of one statement goes
    to one queue, so Citus writes them to the one shard that holds it.
    """
    return f"""
    INSERT INTO {schema}.job (
      {_DEAD_LETTER_COLUMNS}
    )
    SELECT
      q.name, {_dead_letter_values(schema)}
    FROM json_populate_recordset(NULL::{schema}.job, %(failed)s::json) r
    JOIN {schema}.queue q ON q.name = %(name)s
    WHERE r.dead_letter = %(name)s
    RETURNING source_id, name, id
    """


def cancel_jobs(schema: str, table: str, *, fenced: bool) -> str:
    """Cancel jobs not yet finished. Parameters: name, ids[, attempts]."""
    return f"""
    WITH results AS (
      UPDATE {schema}.{table}
      SET completed_on = {schema}.job_now(), state = 'cancelled'
      WHERE {queue_jobs()} AND state < 'completed' {_fence(fenced)}
      RETURNING id
    )
    {_COUNT}
    """


def resume_jobs(schema: str, table: str) -> str:
    """Put cancelled jobs back to created. Parameters: name, ids. Returns how many, and how many of
    them the queue's retained_count held (the caller takes those off it, as pg-boss 12.38 does).

    A resumed job's start_after moves up to now (a later one is kept), so its wait, in the
    monitor's histograms and ready_oldest_seconds, counts from when it could run again rather than
    from when it was first sent. Whether it was counted is read from the completed_on it had
    before the update, which clears it. It loses upsert_by_key, as in pg-boss 12.38, so it never
    collides in job_i13 with a newer job upserted by the same key: it waits beside it as a job
    send() wrote.
    """
    return f"""
    WITH resumable AS (
      SELECT id, state, completed_on FROM {schema}.{table}
      WHERE {queue_jobs()} AND state = 'cancelled'
    ),
    results AS (
      UPDATE {schema}.{table} j
      SET completed_on = NULL, state = 'created', upsert_by_key = NULL,
        start_after = GREATEST(j.start_after, {schema}.job_now())
      FROM resumable r
      WHERE {queue_jobs(alias="j.")} AND j.id = r.id AND j.state = 'cancelled'
      RETURNING r.state, r.completed_on
    )
    {_count_retained(schema)}
    """


def retry_jobs(schema: str, table: str) -> str:
    """Give failed jobs one more attempt. Parameters: name, ids.

    The limit grows by one and the job waits to retry at once; its next claim counts the attempt,
    and if that attempt fails too, it is dead-lettered again. A limit already at int4's largest
    value stays there rather than overflowing.
    """
    return f"""
    WITH results AS (
      UPDATE {schema}.{table}
      SET state = 'retry', retry_limit = LEAST(retry_limit::bigint + 1, 2147483647), completed_on = NULL
      WHERE {queue_jobs()} AND state = 'failed'
      RETURNING id
    )
    {_COUNT}
    """


def delete_jobs(schema: str, table: str, *, fenced: bool) -> str:
    """Delete jobs in any state (fenced: only the named active attempt). Parameters: name, ids[, attempts].
    Returns how many, and how many of them the queue's retained_count held (see resume_jobs())."""
    return f"""
    WITH results AS (
      DELETE FROM {schema}.{table}
      WHERE {queue_jobs()} {_fence(fenced)}
      RETURNING id, state, completed_on
    )
    {_count_retained(schema)}
    """


@functools.lru_cache(maxsize=256)
def touch_jobs(schema: str, table: str, *, fenced: bool) -> str:
    """Refresh active jobs' heartbeat. Parameters: name, ids[, attempts].

    Fenced when the worker passes its jobs, so a worker that lost its claim cannot keep a newer
    attempt's heartbeat fresh.
    """
    return f"""
    WITH results AS (
      UPDATE {schema}.{table}
      SET heartbeat_on = {schema}.job_now()
      WHERE {queue_jobs()} AND state = 'active' {_fence(fenced)}
      RETURNING id
    )
    {_COUNT}
    """


@functools.lru_cache(maxsize=256)
def touch_attempts(schema: str, table: str) -> str:
    """Refresh the heartbeat of the named attempts, returning the ids refreshed (the worker's
    heartbeat: an attempt missing from them is no longer this worker's). Parameters: name, ids,
    attempts."""
    return f"""
    UPDATE {schema}.{table}
    SET heartbeat_on = {schema}.job_now()
    WHERE {queue_jobs()} {ATTEMPT_FENCE}
    RETURNING id
    """


# A stately key keeps at most one job per state below completed, so a job put back as 'retry'
# would collide with one of its key already waiting to retry; it then goes back as 'created'
# instead, and only when both places are taken is it left for a plain fail() (which, as pg-boss's
# does, fails it for good: the policy keeps one waiting job per state).
_STATELY_TAKEN = (
    """EXISTS (
        SELECT 1 FROM {schema}.{table} o
        WHERE o.name = """
    + UNSEEN_QUEUE_NAME
    + """ AND o.state = '{state}' AND o.policy = 'stately'
          AND COALESCE(o.singleton_key, '') = COALESCE(j.singleton_key, '')
      )"""
)


@functools.lru_cache(maxsize=256)
def requeue_jobs(schema: str, table: str, *, started: bool) -> str:
    """Put active jobs a stopping worker holds back in the queue without charging an attempt.

    Named parameters: name, ids, attempts (the attempt pairs), and output (json) when ``started``.
    Always fenced.
    Returns the ids put back.

    Every claim of a job that was started before bumps retry_count, and retry_count against
    retry_limit is what decides between a retry and a failure for good (pg-boss 12.35's fetch and
    fail). A job the worker claimed but never started (``started=False``) gets started_on cleared,
    as pg-boss's restore() does, so its next claim does not count an attempt: its retry_count
    stays what this claim made it. That is safe only because no handler of this attempt ever ran,
    so no stale settle can come from it. A job whose handler was running when the shutdown cut it
    short (``started=True``) keeps started_on, so its next claim does bump retry_count and the
    attempt fence still tells the interrupted handler from the next one; instead its retry_limit
    grows by one (saturating at int4's maximum), as pg-boss's retry() grants an attempt, so the
    interruption does not count towards the limit. Its output records the shutdown.

    Either way the job waits as 'retry' from now, without retry_delay (a shutdown is not the
    job's failure), which keeps a key_strict_fifo key blocked behind it and cannot collide with
    a short queue's one 'created' job per key. The job loses upsert_by_key, as pg-boss 12.38's
    restore() has it do, so a stately job put back as 'created' cannot collide in job_i13 with a
    newer job upserted by its key.
    """
    taken_retry = _STATELY_TAKEN.format(schema=schema, table=table, state="retry")
    taken_created = _STATELY_TAKEN.format(schema=schema, table=table, state="created")
    if started:
        charge = """output = %(output)s::jsonb,
        retry_limit = CASE WHEN j.retry_limit < 2147483647 THEN j.retry_limit + 1 ELSE j.retry_limit END,"""
    else:
        charge = "started_on = NULL,"
    return f"""
    WITH results AS (
      UPDATE {schema}.{table} j
      SET state = CASE
          WHEN j.policy = 'stately' AND {taken_retry} THEN 'created'::{schema}.job_state
          ELSE 'retry'::{schema}.job_state
        END,
        {charge}
        start_after = {schema}.job_now(),
        heartbeat_on = NULL,
        upsert_by_key = NULL
      WHERE {queue_jobs(alias="j.")} AND j.state = 'active'
        AND (j.id::text || ':' || j.retry_count::text) = ANY(%(attempts)s::text[])
        AND NOT (j.policy = 'stately' AND {taken_retry} AND {taken_created})
      RETURNING j.id
    )
    SELECT id FROM results
    """
