"""The one place SQL identifiers are validated and quoted.

Values never reach SQL text: they are bound as parameters. Identifiers cannot be bound, so the
schema name (and, in the plans layer, a queue's partition table) pass through here, and only names
that satisfy pg-boss's own rules come out.
"""

from __future__ import annotations

import functools
import re
from typing import cast

from django_pgboss.constants import BARE_IDENTIFIER_PATTERN, SCHEMA_NAME_MAX_BYTES
from django_pgboss.exceptions import ImproperlyConfiguredSchema

# Characters a schema name may not contain even when quoted. Each would break out of a place pg-boss
# (and our migration SQL) writes the schema into: a double quote ends the identifier, a single quote
# ends the string literals and format() templates of the plpgsql functions, % is a format()
# specifier, $ collides with dollar quoting, a period reads as a schema separator, and a backslash or
# control character breaks the bytea input the name is hashed through for advisory locks.
_FORBIDDEN = {
    '"': "a double quote",
    "'": "a single quote",
    "%": "a percent sign",
    "$": "a dollar sign",
    ".": "a period",
    "\\": "a backslash",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# PostgreSQL's keywords that cannot stand bare as a schema name (every category but unreserved,
# from pg_get_keywords() on PostgreSQL 15): such a name is quoted even though it looks bare.
_KEYWORDS_NEEDING_QUOTES = frozenset(
    [
        "all",
        "analyse",
        "analyze",
        "and",
        "any",
        "array",
        "as",
        "asc",
        "asymmetric",
        "authorization",
        "between",
        "bigint",
        "binary",
        "bit",
        "boolean",
        "both",
        "case",
        "cast",
        "char",
        "character",
        "check",
        "coalesce",
        "collate",
        "collation",
        "column",
        "concurrently",
        "constraint",
        "create",
        "cross",
        "current_catalog",
        "current_date",
        "current_role",
        "current_schema",
        "current_time",
        "current_timestamp",
        "current_user",
        "dec",
        "decimal",
        "default",
        "deferrable",
        "desc",
        "distinct",
        "do",
        "else",
        "end",
        "except",
        "exists",
        "extract",
        "false",
        "fetch",
        "float",
        "for",
        "foreign",
        "freeze",
        "from",
        "full",
        "grant",
        "greatest",
        "group",
        "grouping",
        "having",
        "ilike",
        "in",
        "initially",
        "inner",
        "inout",
        "int",
        "integer",
        "intersect",
        "interval",
        "into",
        "is",
        "isnull",
        "join",
        "lateral",
        "leading",
        "least",
        "left",
        "like",
        "limit",
        "localtime",
        "localtimestamp",
        "national",
        "natural",
        "nchar",
        "none",
        "normalize",
        "not",
        "notnull",
        "null",
        "nullif",
        "numeric",
        "offset",
        "on",
        "only",
        "or",
        "order",
        "out",
        "outer",
        "overlaps",
        "overlay",
        "placing",
        "position",
        "precision",
        "primary",
        "real",
        "references",
        "returning",
        "right",
        "row",
        "select",
        "session_user",
        "setof",
        "similar",
        "smallint",
        "some",
        "substring",
        "symmetric",
        "table",
        "tablesample",
        "then",
        "time",
        "timestamp",
        "to",
        "trailing",
        "treat",
        "trim",
        "true",
        "union",
        "unique",
        "user",
        "using",
        "values",
        "varchar",
        "variadic",
        "verbose",
        "when",
        "where",
        "window",
        "with",
        "xmlattributes",
        "xmlconcat",
        "xmlelement",
        "xmlexists",
        "xmlforest",
        "xmlnamespaces",
        "xmlparse",
        "xmlpi",
        "xmlroot",
        "xmlserialize",
        "xmltable",
    ]
)


def schema_name_problem(name: object) -> str | None:
    """Say what is wrong with a schema name, or return None when it is usable."""
    if not isinstance(name, str):
        return f"must be a string, not {type(name).__name__}"
    if not name:
        return "must not be empty"
    if len(name.encode("utf-8")) > SCHEMA_NAME_MAX_BYTES:
        return f"must be at most {SCHEMA_NAME_MAX_BYTES} bytes long"
    for char, label in _FORBIDDEN.items():
        if char in name:
            return f"must not contain {label}"
    if _CONTROL.search(name):
        return "must not contain control characters"
    if name.startswith("pg_"):
        return "must not start with pg_ (PostgreSQL reserves those names)"
    return None


def validate_schema_name(name: object) -> str:
    """Return ``name`` when it is a usable schema name, else raise ImproperlyConfiguredSchema."""
    problem = schema_name_problem(name)
    if problem is not None:
        raise ImproperlyConfiguredSchema(
            f'settings.PGBOSS["SCHEMA"] = {name!r} is invalid: the schema name {problem}.'
        )
    return cast(str, name)  # schema_name_problem() found none, so a str


def quote_identifier(name: str) -> str:
    """Spell ``name`` for SQL text so PostgreSQL resolves it to exactly ``name``.

    A lower-case legal bare identifier is written bare, exactly as pg-boss writes its default
    schema; anything else is double-quoted. Keeping bare names bare matters beyond looks: pg-boss
    embeds the schema spelling in its plpgsql function bodies and in its advisory-lock and NOTIFY
    channel keys, so our spelling must be the one a pg-boss instance configured for the same schema
    uses (``pgboss``, or ``'"My Jobs"'`` for a name that needs quotes).
    """
    if BARE_IDENTIFIER_PATTERN.match(name) and name not in _KEYWORDS_NEEDING_QUOTES:
        return name
    if '"' in name:
        # Unreachable for validated names; kept so a caller that skipped validation cannot inject.
        raise ImproperlyConfiguredSchema(f"identifier {name!r} must not contain a double quote")
    return f'"{name}"'


def schema_key(name: str) -> str:
    """The schema as pg-boss writes it into the keys it derives (advisory locks, NOTIFY channels).

    pg-boss hashes its configured schema string with only meaningless quotes removed: a name that
    is a legal lower-case bare identifier stands bare even when it is a keyword, anything else keeps
    its quotes. Our keys must hash the same text, or we would not exclude a pg-boss instance.
    """
    return name if BARE_IDENTIFIER_PATTERN.match(name) else f'"{name}"'


def advisory_lock_key(schema: str, name: str = "") -> str:
    """pg-boss's advisory-lock key text for lock ``name`` in ``schema``: '.pgboss.', the schema as
    pg-boss spells it (schema_key()), then the name; its migration lock has no name. The one
    spelling of the key, so a pg-boss (Node) instance on the same schema and this package take
    the same locks (plans/fragments.py's lock_id() turns the text into the lock's id)."""
    return f".pgboss.{schema_key(schema)}{name}"


def quote_schema(name: str) -> str:
    """Validate a schema name and return its SQL spelling."""
    if not isinstance(name, str):
        validate_schema_name(name)  # raises, naming the problem
    return _quote_schema(name)


@functools.lru_cache(maxsize=64)
def _quote_schema(name: str) -> str:
    # Every statement renders the schema into its text; validating the same setting on each one
    # was a measurable part of a send. A name that fails raises, and a failure is never cached.
    return quote_identifier(validate_schema_name(name))


# The tables a queue's jobs can live in: the shared DEFAULT partition, or the queue's own partition,
# named by create_queue() as 'j' followed by the sha224 of the queue name.
_JOB_TABLE = re.compile(r"^(job|job_common|j[0-9a-f]{56})\Z")


def quote_job_table(name: str) -> str:
    """Return a job table's name for SQL text, refusing anything create_queue() cannot have made."""
    if not isinstance(name, str) or not _JOB_TABLE.match(name):
        raise ValueError(f"{name!r} is not a pg-boss job table")
    return name
