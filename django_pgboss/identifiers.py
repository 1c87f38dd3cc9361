"""The one place SQL identifiers are validated and quoted.

Values never reach SQL text: they are bound as parameters. Identifiers cannot be bound, so the
schema name (and, in the plans layer, a queue's partition table) pass through here, and only names
that satisfy pg-boss's own rules come out.
"""

from __future__ import annotations

import re

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
    return name  # type: ignore[return-value]


def quote_identifier(name: str) -> str:
    """Spell ``name`` for SQL text so PostgreSQL resolves it to exactly ``name``.

    A lower-case legal bare identifier is written bare, exactly as pg-boss writes its default
    schema; anything else is double-quoted. Keeping bare names bare matters beyond looks: pg-boss
    embeds the schema spelling in its plpgsql function bodies and in its advisory-lock and NOTIFY
    channel keys, so our spelling must be the one a pg-boss instance configured for the same schema
    uses (``pgboss``, or ``'"My Jobs"'`` for a name that needs quotes).
    """
    if BARE_IDENTIFIER_PATTERN.match(name):
        return name
    if '"' in name:
        # Unreachable for validated names; kept so a caller that skipped validation cannot inject.
        raise ImproperlyConfiguredSchema(f"identifier {name!r} must not contain a double quote")
    return f'"{name}"'


def quote_schema(name: str) -> str:
    """Validate a schema name and return its SQL spelling."""
    return quote_identifier(validate_schema_name(name))
