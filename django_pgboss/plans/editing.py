"""SQL for changing jobs that were sent: partial edits of waiting jobs, bulk purges, blocked keys."""

from __future__ import annotations

import functools
import re

from django_pgboss.plans.fragments import counted_retained, lock_id, plus_seconds, queue_jobs
from django_pgboss.plans.jobs import notify_channel

#: The columns update_jobs() can set, by the option that sets them, with the cast its parameter
#: takes. start_after and retention_seconds are not here: they move start_after and keep_until
#: together (see update_jobs).
EDITABLE_COLUMNS = {
    "data": ("data", "jsonb"),
    "priority": ("priority", "int"),
    "expire_in_seconds": ("expire_seconds", "int"),
    "delete_after_seconds": ("deletion_seconds", "int"),
    "retry_limit": ("retry_limit", "int"),
    "retry_delay": ("retry_delay", "int"),
    "retry_backoff": ("retry_backoff", "boolean"),
    "retry_delay_max": ("retry_delay_max", "int"),
    "dead_letter": ("dead_letter", "text"),
    "heartbeat_seconds": ("heartbeat_seconds", "int"),
    "group_id": ("group_id", "text"),
    "group_tier": ("group_tier", "text"),
}


#: How start_after text names a moment rather than an interval: it ends in Z, or starts with a
#: calendar date (the test insert_jobs() makes in SQL, fragments.start_after()).
_MOMENT_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def start_after_kind(text: str) -> str:
    """Which start_after_expression() reads the start_after text ``text`` (as arguments.start_after
    returns it): "moment" for a date-time, "interval" for an interval from job_now().

    The choice is made here rather than in a CASE of the statement, since Citus evaluates each
    function of an UPDATE before it runs it, both branches of a CASE included, so that a CASE
    could not cast an interval's text to a timestamptz without failing."""
    return "moment" if text.endswith("Z") or _MOMENT_TEXT.match(text) else "interval"


def start_after_expression(schema: str, value: str, kind: str) -> str:
    """The moment the start_after text ``value`` (an expression) means, as insert_jobs() reads it:
    with ``kind`` "moment" (see start_after_kind()) the text is cast to timestamptz; with
    "interval" it is an interval from job_now(), so "1 hour" or "2 days 3 hours" is read on the
    database's clock."""
    if kind == "moment":
        return f"{value}::timestamptz"
    return f"{schema}.job_now() + {value}::interval"


@functools.lru_cache(maxsize=256)
def update_jobs(
    schema: str,
    table: str,
    *,
    by: str,
    match: str,
    columns: tuple[str, ...],
    start_after: str = "",
    retention: bool = False,
    notify: bool = False,
) -> str:
    """Edit jobs that have not started yet; returns the ids edited, oldest first.

    Named parameters: name; id (``by="id"``) or singleton_key (``by="singleton_key"``); one per
    option in ``columns`` (keys of EDITABLE_COLUMNS) under the option's name; start_after (text)
    when ``start_after`` names its kind (start_after_kind()), retention_seconds with
    ``retention``; with ``notify``, schema_key for the channel.

    Only the columns named change, so an edit never resets what it was not asked about. The
    throttle slot (singleton_on), the key and the state are never touched, which is also why no
    policy index can refuse an edit. start_after and keep_until move together as pg-boss moves
    them: a new retention counts from the (new or kept) start_after; a new start_after alone
    keeps the job's retention span (keep_until - start_after), in seconds. Both sums are
    fragments.plus_seconds(), which Citus runs in an UPDATE that reads the row's columns.

    ``match`` picks among several waiting jobs of a key: "newest" or "oldest" by created_on (id
    breaks a tie, so the pick is stable), or "all". The pick is made without a row lock; the
    UPDATE checks ``state < 'active'`` again on the row it locks, so a job a worker claimed in
    between is left alone rather than edited while it runs.

    The notifying CTE returns a boolean rather than pg_notify()'s void, as jobs._returning()'s
    does: Citus keeps a CTE's rows as an intermediate result, which cannot hold a pseudo-type.
    """
    target = "j.id = %(id)s" if by == "id" else "j.singleton_key = %(singleton_key)s"
    order = "DESC" if match == "newest" else "ASC"
    pick = "" if match == "all" or by == "id" else f"ORDER BY j.created_on {order}, j.id {order} LIMIT 1"
    assignments = []
    for option in columns:
        column, cast = EDITABLE_COLUMNS[option]
        assignments.append(f"{column} = %({option})s::{cast}")
    new_start = (
        start_after_expression(schema, "%(start_after)s::text", start_after)
        if start_after
        else "job.start_after"
    )
    if start_after:
        assignments.append(f"start_after = {new_start}")
    if retention:
        assignments.append(f"keep_until = {plus_seconds(new_start, '%(retention_seconds)s::int')}")
    elif start_after:
        span = "extract(epoch FROM job.keep_until - job.start_after)"
        assignments.append(f"keep_until = {plus_seconds(new_start, span)}")
    # An edit that names nothing to change still locks and returns the jobs it matched, as pg-boss's
    # does; assigning a column its own value is how an UPDATE says so.
    sets = ",\n        ".join(assignments or ["priority = job.priority"])
    update = f"""
    WITH target AS (
      SELECT j.id FROM {schema}.{table} j
      WHERE j.name = %(name)s AND j.state < 'active' AND {target}
      {pick}
    ),
    edited AS (
      UPDATE {schema}.{table} job SET
        {sets}
      FROM target
      WHERE job.name = %(name)s AND job.id = target.id AND job.state < 'active'
      RETURNING job.id, job.created_on, job.start_after
    )"""
    if notify:
        update += f""",
    notified AS (
      SELECT pg_notify({notify_channel()}, %(name)s) IS NULL AS sent
      FROM edited WHERE start_after <= {schema}.job_now() LIMIT 1
    )
    SELECT id FROM edited WHERE (SELECT count(*) FROM notified) >= 0 ORDER BY created_on, id"""
    else:
        update += """
    SELECT id FROM edited ORDER BY created_on, id"""
    return update


#: The jobs each purge deletes, as a condition on state.
PURGE_STATES = {
    "queued": "{t}.state < 'active'",
    "stored": "{t}.state > 'active'",
    "all": "true",
}


@functools.lru_cache(maxsize=64)
def purge_batch(schema: str, table: str, *, which: str, first: bool) -> str:
    """Delete one batch of a queue's jobs; returns (the batch's last id, how many rows the batch
    read, how many it deleted, how many of those the queue's retained_count held): fewer read
    than batch_size means the walk is at its end.

    Named parameters: name, batch_size and, unless ``first``, after (the last id of the batch
    before). ``which`` is a key of PURGE_STATES.

    The batches walk the primary key (name, id) in id order from where the last one stopped, so
    each batch reads only rows no batch has read yet: restarting from the front every time would
    re-read the index entries of the rows already deleted (dead until vacuum), and a purge of a
    million jobs would slow down with every batch. Each batch is its own statement, so its row
    locks last only as long as the batch (see bench/purge.py). The DELETE checks the state again
    on the row it locks, so a job that changed state under the purge is judged as it is now.

    The DELETE takes the batch as an array (``id = ANY(ARRAY(...))``), not as a join: joined, the
    planner hashed the whole queue's rows to meet 5,000 ids (EXPLAIN on 200,000 jobs: a sequential
    scan, 0.5 s a batch, growing with the queue); as an array it probes the primary key per id.
    """
    condition = PURGE_STATES[which]
    after = "" if first else "AND b.id > %(after)s"
    return f"""
    WITH batch AS (
      SELECT b.id FROM {schema}.{table} b
      WHERE b.name = %(name)s {after} AND {condition.format(t="b")}
      ORDER BY b.name, b.id
      LIMIT %(batch_size)s
    ),
    deleted AS (
      DELETE FROM {schema}.{table} j
      WHERE {queue_jobs("ARRAY(SELECT id FROM batch)", alias="j.")} AND {condition.format(t="j")}
      RETURNING j.id, j.state, j.completed_on
    )
    SELECT (SELECT id FROM batch ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM batch)::bigint,
      (SELECT count(*) FROM deleted)::bigint,
      (SELECT count(*) FROM deleted WHERE {counted_retained(schema)})::bigint
    """


def blocked_keys(schema: str, table: str, *, after: bool = False) -> str:
    """The keys of a key_strict_fifo queue that a failed job blocks, in key order, at most the
    parameter limit. Parameters: name, limit, and with ``after`` after (the previous page's last key)."""
    page = "AND singleton_key > %(after)s" if after else ""
    return f"""
    SELECT DISTINCT singleton_key FROM {schema}.{table}
    WHERE name = %(name)s AND state = 'failed' AND policy = 'key_strict_fifo' {page}
    ORDER BY singleton_key
    LIMIT %(limit)s
    """


def upsert_index_ready() -> str:
    """Whether job_i13 is built and valid on one job table. Parameter: table, the table's
    qualified name as SQL spells it (read as a regclass).

    A partition's copy of the index is named after the table (job_table_format turns job_i13 into
    <table>_i13). On a schema upgraded from 44 with jobs in the table, the index is built by bam
    after the migration (CREATE UNIQUE INDEX CONCURRENTLY), and until the build ends it is absent
    or not yet valid: inserts may then not be checked against it.
    """
    return """
    SELECT EXISTS (
      SELECT 1 FROM pg_class t
      JOIN pg_index i ON i.indrelid = t.oid
      JOIN pg_class x ON x.oid = i.indexrelid
      WHERE t.oid = %(table)s::regclass AND x.relname = t.relname || '_i13' AND i.indisvalid
    )
    """


def upsert_lock() -> str:
    """Take a transaction-scoped advisory lock for one (queue, key) of an upsert, while job_i13
    is not yet valid on the queue's table (see upsert_index_ready()).

    Parameter: lock_key, the lock key text (DatabaseContext.lock_key of the queue and key). Derived the way
    pg-boss derives its own lock ids (queues.advisory_lock), so the space is shared with them;
    a collision with another key only makes two upserts wait for each other.
    """
    return f"SELECT pg_advisory_xact_lock({lock_id('%(lock_key)s')})"
