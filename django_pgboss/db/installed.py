"""Telling "the pgboss schema is not installed" apart from any other error a statement raises.

A database that was never migrated fails every statement with a missing relation, schema or
function. Rather than leave a user to read that from a traceback, the cursor layer turns exactly
those errors into one :class:`~django_pgboss.exceptions.SchemaNotInstalled` saying what to run.
It looks only at an error already raised, so a statement that succeeds costs nothing more.
"""

from __future__ import annotations

import re
from typing import Any

from django_pgboss.exceptions import SchemaNotInstalled
from django_pgboss.plans import catalog as catalog_plans

#: The SQLSTATEs of a missing schema, table, function and type.
MISSING_OBJECT_STATES = frozenset({"3F000", "42P01", "42883", "42704"})
#: The objects of the pg-boss schema whose absence means the schema is not there. A queue's own table is
#: not one: it goes missing when another process deletes the queue, which the API handles itself
#: (a stale route, api/sending.py), so such an error is left as it is.
PGBOSS_OBJECTS = frozenset(
    {
        "version",
        "queue",
        "job",
        "job_common",
        "schedule",
        "subscription",
        "warning",
        "queue_stats",
        "job_dependency",
        "bam",
        "job_state",
        "job_now",
        "create_queue",
        "delete_queue",
        "job_table_run",
        "job_table_run_async",
        "job_table_format",
    }
)
_MISSING = re.compile(r'^(?:schema|relation|type|function) "?(?P<name>.+?)"?(?:\(.*\))? does not exist')


def not_installed_message(alias: str) -> str:
    """The one line every command and the first Boss call give on a database never migrated."""
    return f"the pgboss schema is not installed in database {alias!r}: run manage.py migrate pgboss"


def not_installed(error: BaseException | None, alias: str, schema: str) -> SchemaNotInstalled | None:
    """SchemaNotInstalled when ``error`` says ``schema`` or one of pg-boss's objects in it does not
    exist, else None.

    PostgreSQL names what is missing ('schema "pgboss" does not exist', 'relation "pgboss.queue"
    does not exist', 'function pgboss.create_queue(unknown, jsonb) does not exist'); it must be
    ``schema`` itself or a pg-boss object in it, so neither a user's own missing table in a
    handler's query nor a deleted queue's table is reported as a missing schema.
    """
    if error is None:
        return None
    cause = error.__cause__ if error.__cause__ is not None else error
    if getattr(cause, "sqlstate", None) not in MISSING_OBJECT_STATES:
        return None
    diag = getattr(cause, "diag", None)
    message = getattr(diag, "message_primary", None) or str(cause).splitlines()[0]
    match = _MISSING.match(message)
    if match is None:
        return None
    name = match.group("name")
    if getattr(cause, "sqlstate", None) == "3F000":
        missing_ours = name == schema
    else:
        qualifier, _, obj = name.rpartition(".")
        missing_ours = qualifier.strip('"') == schema and obj.strip('"') in PGBOSS_OBJECTS
    return SchemaNotInstalled(not_installed_message(alias)) if missing_ours else None


def ensure_installed(context: Any) -> None:
    """Raise SchemaNotInstalled unless ``context``'s schema has pg-boss's version table: what a
    long-running command checks before it starts, so it stops with the one line instead of
    retrying for ever."""
    (oid,) = context.one(catalog_plans.version_table(), {"relation": f"{context.quoted_schema}.version"})
    if oid is None:
        raise SchemaNotInstalled(not_installed_message(context.using))
