"""The argument layer: every check of what callers pass in, and the defaults (pg-boss's attorney).

Each public call validates its arguments here before any SQL runs, and each refusal is a
:mod:`django_pgboss.exceptions` error (a ValueError or TypeError subclass) whose message names the
argument, so the caller's transaction stays usable. The bounds are the storage's own: integer
options are int4 columns, limits are bigint, text that an index holds must fit a btree entry, and
every moment must leave each derived column (keep_until) inside what Python's datetime can read.

Values come out validated and in the shape the statements take; their names stay snake_case until
:mod:`django_pgboss.wire` encodes them.

One module per kind of argument, each building on ``scalars``:

- ``scalars.py``: integers against their int4 or bigint columns, numbers, booleans, text an index
  holds (``MAX_KEY_BYTES``), uuids.
- ``names.py``: queue names, event names, schedule keys.
- ``moments.py``: ``moment()``, the one ISO 8601 parser, and ``start_after()``.
- ``queue_options.py``: create_queue() and update_queue() options, and the options queues and
  jobs share.
- ``job_options.py``: send() options (``job_payload()``), update() and upsert() edits, group
  concurrency, JSON filters.
- ``references.py``: the jobs a settle names, and their attempt fence.
- ``pages.py``: a list read's ``limit`` and ``after``.

Callers import from ``django_pgboss.arguments`` (``arguments.integer(...)``), which exports every
name below; the modules are how the layer is laid out, not separate entry points.
"""

from __future__ import annotations

from django_pgboss.arguments.job_options import (
    CLEARABLE_EDITS,
    EDIT_MATCHES,
    data_filter,
    edit_options,
    edit_target,
    group_limits,
    job_payload,
)
from django_pgboss.arguments.moments import (
    EARLIEST_START_AFTER,
    LATEST_START_AFTER,
    MAX_START_AFTER_SECONDS,
    moment,
    start_after,
)
from django_pgboss.arguments.names import event_name, queue_name, schedule_key
from django_pgboss.arguments.pages import (
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    PAGE_LIMIT_DEFAULT,
    PAGE_LIMIT_MAX,
    instance_after,
    list_limit,
    page_after,
    page_after_row,
    page_limit,
)
from django_pgboss.arguments.queue_options import MAX_EXPIRE_IN_SECONDS, queue_options, shared_options
from django_pgboss.arguments.references import JobReference, attempt_references, job_attempt
from django_pgboss.arguments.scalars import (
    INT4_MAX,
    INT4_MIN,
    INT8_MAX,
    MAX_KEY_BYTES,
    boolean,
    integer,
    limit,
    number,
    percentiles,
    text,
    uuid_text,
)

__all__ = [
    "CLEARABLE_EDITS",
    "EARLIEST_START_AFTER",
    "EDIT_MATCHES",
    "INT4_MAX",
    "INT4_MIN",
    "INT8_MAX",
    "LATEST_START_AFTER",
    "LIST_LIMIT_DEFAULT",
    "LIST_LIMIT_MAX",
    "MAX_EXPIRE_IN_SECONDS",
    "MAX_KEY_BYTES",
    "MAX_START_AFTER_SECONDS",
    "PAGE_LIMIT_DEFAULT",
    "PAGE_LIMIT_MAX",
    "JobReference",
    "attempt_references",
    "boolean",
    "data_filter",
    "edit_options",
    "edit_target",
    "event_name",
    "group_limits",
    "instance_after",
    "integer",
    "job_attempt",
    "job_payload",
    "limit",
    "list_limit",
    "moment",
    "number",
    "page_after",
    "page_after_row",
    "page_limit",
    "percentiles",
    "queue_name",
    "queue_options",
    "schedule_key",
    "shared_options",
    "start_after",
    "text",
    "uuid_text",
]
