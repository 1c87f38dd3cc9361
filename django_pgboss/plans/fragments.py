"""SQL fragments more than one statement shares, written once.

Each is a pure function of its arguments (or a constant) that returns SQL text, like the plans
themselves; the statements splice them in.
"""

from __future__ import annotations

import functools


def lock_id(key: str) -> str:
    """pg-boss's advisory-lock id for the lock-key text ``key`` (an expression, usually a parameter).

    sha224 of the database name and the key, its first 64 bits as a bigint: derived exactly as
    pg-boss derives it, so a pg-boss (Node) instance on the same schema takes the same locks.
    """
    return f"('x' || encode(sha224((current_database() || {key})::bytea), 'hex'))::bit(64)::bigint"


#: Every column of a job, in the order of records.Job's fields (reads select them in this order;
#: records.job_from_row() matches them by name).
JOB_COLUMNS = (
    "id",
    "name",
    "data",
    "retry_count",
    "expire_seconds",
    "heartbeat_seconds",
    "group_id",
    "group_tier",
    "policy",
    "state",
    "priority",
    "retry_limit",
    "retry_delay",
    "retry_backoff",
    "retry_delay_max",
    "start_after",
    "started_on",
    "singleton_key",
    "singleton_on",
    "deletion_seconds",
    "heartbeat_on",
    "created_on",
    "completed_on",
    "keep_until",
    "dead_letter",
    "blocked",
    "blocking",
    "pending_dependencies",
    "output",
    "source_name",
    "source_id",
    "source_created_on",
    "source_retry_count",
    "source_output",
    "source_root_id",
)
#: The columns every fetch returns; the rest come with include_metadata. start_after is among
#: them because the worker measures each job's wait from it (the send-to-start histogram of
#: observability/metrics.py): eight bytes a row, against a second read per job.
JOB_MIN_COLUMNS = (*JOB_COLUMNS[: JOB_COLUMNS.index("policy")], "start_after")

#: The columns a send or an insert writes (the rest take their defaults), in the order the insert
#: statements list their values.
INSERT_COLUMNS = (
    "id",
    "name",
    "data",
    "priority",
    "start_after",
    "created_on",
    "singleton_key",
    "singleton_on",
    "group_id",
    "group_tier",
    "expire_seconds",
    "deletion_seconds",
    "keep_until",
    "retry_limit",
    "retry_delay",
    "retry_backoff",
    "retry_delay_max",
    "policy",
    "dead_letter",
    "heartbeat_seconds",
)


def written_extras(*, upsert_by_key: bool, trace_context: bool = False) -> tuple[tuple[str, ...], str]:
    """The columns a send writes beyond INSERT_COLUMNS, and their values (text to follow the last
    of INSERT_COLUMNS' values in a SELECT list), as pg-boss 12.38's insert writes them.

    ``upsert_by_key``: true, the mark of a job upsert() inserted by its key, which job_i13 (unique
    over (name, singleton_key) among such jobs while created) holds to one per key.
    ``trace_context``: the parameter ``%(trace_context)s``, the trace context of the span that
    sent the jobs (one JSON object for every job of the statement, as pg-boss 12.38 stores one
    carrier on each job a send inserts). Without either, the common case, nothing: a send's
    statement is what it always was, and the column keeps its default, NULL.
    """
    columns: tuple[str, ...] = ()
    values = ""
    if upsert_by_key:
        columns += ("upsert_by_key",)
        values += ",\n      true"
    if trace_context:
        columns += ("trace_context",)
        values += ",\n      %(trace_context)s::jsonb"
    return columns, values


def start_after(schema: str, text: str) -> str:
    """A job's start_after from pg-boss's startAfter text ``text`` (an expression): a timestamp
    (ISO, or ending in Z) is taken as it is, anything else as an interval from job_now(); none
    means now."""
    return f"""CASE
          WHEN right({text}, 1) = 'Z' OR ({text}) ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}'
            THEN ({text})::timestamptz
          ELSE {schema}.job_now() + COALESCE({text}, '0')::interval
        END"""


def plus_seconds(moment: str, seconds: str) -> str:
    """The moment ``seconds`` (a number expression) after ``moment`` (a timestamptz expression),
    spelled so that Citus runs it in an UPDATE whose new value reads the row's own columns.

    timestamptz + interval is STABLE (an interval of days or months is added on the session's
    calendar), and Citus refuses an UPDATE of a distributed table whose SET calls a STABLE
    function with a column reference. An interval of seconds means the same on every calendar,
    so the sum is taken on the UTC wall clock, where timestamp + interval is IMMUTABLE, and read
    back as a timestamptz: the same moment PostgreSQL's own sum gives, in every time zone.
    """
    return f"((({moment}) AT TIME ZONE 'UTC') + ({seconds}) * interval '1s') AT TIME ZONE 'UTC'"


def singleton_slot(schema: str, seconds: str, offset: str) -> str:
    """The throttle slot (singleton_on) for a slot length of ``seconds`` (an expression, float8):
    job_now() floored to a multiple of it, shifted by ``offset`` seconds for a debounced job's next
    slot; NULL without a slot length."""
    return f"""CASE WHEN {seconds} IS NOT NULL THEN
        'epoch'::timestamp + '1s'::interval * ({seconds} * floor(
          (date_part('epoch', {schema}.job_now()) + COALESCE({offset}, 0)) / {seconds}))
      END"""


def expired(schema: str, alias: str = "") -> str:
    """An active job past its expiry (expire_seconds since it started): what the expiry sweep fails
    and what the monitor's count counts, so the count can say which queues the sweep would find a
    job in. ``alias`` qualifies the columns ("j." in a join). The deadline is plus_seconds(), which
    Citus runs in the sweep's DELETE."""
    return (
        f"{alias}state = 'active'"
        f" AND {plus_seconds(f'{alias}started_on', f'{alias}expire_seconds')} < {schema}.job_now()"
    )


def stalled(schema: str, alias: str = "") -> str:
    """An active job whose heartbeat stopped (heartbeat_seconds since its last one): what the
    heartbeat sweep fails and what the monitor's count counts (see expired())."""
    return (
        f"{alias}state = 'active' AND {alias}heartbeat_seconds IS NOT NULL"
        f" AND {plus_seconds(f'{alias}heartbeat_on', f'{alias}heartbeat_seconds')} < {schema}.job_now()"
    )


#: The queue's name as the statements below compare it, unseen by the planner (see queue_jobs()).
UNSEEN_QUEUE_NAME = "(SELECT %(name)s::text)"
#: The same comparison as Citus routes it: to pick the one shard that holds a queue, Citus reads
#: the distribution column compared with a constant (a bound parameter is one), never with the
#: output of a subquery. On the citus-distributed backend, where the job tables' statistics are
#: each shard's and a shard holds a few queues, every statement runs with this spelling
#: (routable(), applied by the statement cursor, db/cursors.py).
ROUTABLE_QUEUE_NAME = "%(name)s::text"


@functools.lru_cache(maxsize=1024)
def routable(sql: str) -> str:
    """``sql`` with the queue's name compared as Citus routes it (ROUTABLE_QUEUE_NAME)."""
    return sql.replace(UNSEEN_QUEUE_NAME, ROUTABLE_QUEUE_NAME)


def queue_jobs(ids: str = "%(ids)s::uuid[]", alias: str = "") -> str:
    """The jobs of the queue ``%(name)s`` whose ids are in the array ``ids`` (an expression): how
    the settles, the purge's delete and the redrive find the rows they change, by the primary key
    (name, id), one index descent per id (the claim's update finds its rows by tuple id instead,
    plans/jobs.py). ``alias`` qualifies the columns.

    The name is compared as the output of an InitPlan, ``(SELECT %(name)s::text)``, not as the
    parameter itself, so that the planner cannot look it up in the table's statistics. A queue
    created, or filled, since the table's last ANALYZE is missing from them, and for a name it
    does not find there PostgreSQL expects a row or so: one descent by the name alone, filtering
    the ids, then looks cheaper than one descent per id, and every settle of that queue reads the
    whole queue until autovacuum analyzes the table again (20,000 fresh jobs: 16 ms to
    complete 50 of them instead of 1.1; bench/README.md, "A queue the statistics do not know
    yet"). Unseen, the name is estimated as the table's average queue, and the ids stay in the
    index condition. pg-boss 12.35 compares the parameter, and reads the whole queue the same way.
    """
    return f"{alias}name = {UNSEEN_QUEUE_NAME} AND {alias}id = ANY({ids})"


#: The finished states a queue's retained_count counts (schema 46). Failed jobs are live: they
#: block keys and can be retried.
RETAINED_STATES = "state IN ('completed', 'cancelled')"


def counted_retained(schema: str, alias: str = "") -> str:
    """A job the queue ``%(name)s``'s retained_count holds: completed or cancelled by its
    retained_on. What a delete or a resume that moves it out of that set takes off the count
    (stats.reduce_retained_count()). ``alias`` qualifies the columns."""
    return (
        f"{alias}{RETAINED_STATES} AND {alias}completed_on"
        f" <= (SELECT retained_on FROM {schema}.queue WHERE name = %(name)s)"
    )
