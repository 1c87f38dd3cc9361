"""System checks for django_pgboss's settings and database (ids pgboss.E001 ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import Backend
from django_pgboss.db.identifiers import schema_name_problem
from django_pgboss.observability.auth import MIN_TOKEN_LENGTH, token_problem

if TYPE_CHECKING:
    from django.db.backends.postgresql.base import DatabaseWrapper

#: The oldest PostgreSQL pg-boss 12 supports.
MIN_POSTGRES_VERSION = 13


def _database_alias() -> tuple[str | None, list[Error]]:
    try:
        alias = pgboss_settings.DATABASE
    except ImproperlyConfigured as exc:
        return None, [Error(str(exc), id="pgboss.E004")]
    if alias not in settings.DATABASES:
        return None, [
            Error(
                f'settings.PGBOSS["DATABASE"] = {alias!r} is not a key of settings.DATABASES.',
                hint=f"Use one of: {', '.join(settings.DATABASES)}.",
                id="pgboss.E004",
            )
        ]
    return alias, []


@register(Tags.compatibility)
def check_database_engine(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """pgboss.E001: pg-boss's schema needs PostgreSQL."""
    alias, errors = _database_alias()
    if alias is None:
        return errors
    engine = settings.DATABASES[alias].get("ENGINE", "")
    if connections[alias].vendor != "postgresql":
        return [
            Error(
                f"django_pgboss needs PostgreSQL, but database {alias!r} uses {engine or 'no ENGINE'}.",
                hint='Point settings.PGBOSS["DATABASE"] at a database with ENGINE '
                "'django.db.backends.postgresql'.",
                id="pgboss.E001",
            )
        ]
    return []


@register(Tags.compatibility)
def check_schema_name(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """pgboss.E002: PGBOSS["SCHEMA"] must be a name the SQL can carry safely."""
    try:
        schema = pgboss_settings.SCHEMA
    except ImproperlyConfigured:
        return []  # the settings themselves are wrong: check_database_engine reports it, once, as E004
    problem = schema_name_problem(schema)
    if problem is None:
        return []
    return [
        Error(
            f'settings.PGBOSS["SCHEMA"] = {schema!r} is invalid: the schema name {problem}.',
            hint="Use a name of at most 50 bytes without quotes, %, $, periods, backslashes or "
            "control characters, such as 'pgboss'.",
            id="pgboss.E002",
        )
    ]


@register(Tags.database)
def check_postgres_version(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    """pgboss.E003: PostgreSQL 13 or newer (run by ``migrate`` and ``check --database``)."""
    alias, _ = _database_alias()
    if alias is None or not databases or alias not in databases:
        return []
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return []
    connection.ensure_connection()
    # The vendor check above makes this Django's PostgreSQL wrapper, which has pg_version.
    major = cast("DatabaseWrapper", connection).pg_version // 10000
    if major < MIN_POSTGRES_VERSION:
        return [
            Error(
                f"django_pgboss needs PostgreSQL {MIN_POSTGRES_VERSION} or newer; database {alias!r} "
                f"runs PostgreSQL {major}.",
                id="pgboss.E003",
            )
        ]
    return []


#: The numeric PGBOSS settings and their allowed ranges, as pg-boss bounds the same options.
NUMERIC_SETTINGS = {
    "MONITOR_INTERVAL_SECONDS": (1, 86_400),
    "MAINTENANCE_INTERVAL_SECONDS": (1, 86_400),
    "CRON_INTERVAL_SECONDS": (1, 45),
    "FLOW_INTERVAL_SECONDS": (1, 86_400),
    "BAM_INTERVAL_SECONDS": (10, 86_400),
    "QUEUE_STATS_RETENTION_DAYS": (1, 365),
    "WARNING_QUEUE_SIZE": (1, None),
    "WARNING_SLOW_QUERY_SECONDS": (1, None),
    "WARNING_RETENTION_DAYS": (1, 365),
    "REINDEX_INTERVAL_SECONDS": (1, 86_400),
    "MAX_ABANDONED_THREADS": (0, None),
    "INSTANCE_HEARTBEAT_SECONDS": (1, 3600),
    "NOTIFY_HEARTBEAT_INTERVAL_SECONDS": (1, 3600),
    "NOTIFY_HEARTBEAT_TIMEOUT_SECONDS": (1, 3600),
    "NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS": (1, 3600),
}
BOOLEAN_SETTINGS = (
    "PREPARED_STATEMENTS",
    "PERSIST_QUEUE_STATS",
    "PERSIST_WARNINGS",
    "MONITOR_VACUUM",
    "REINDEX",
    "REGISTER_INSTANCE",
    "PROPAGATE_TRACE_CONTEXT",
)


@register(Tags.compatibility)
def check_monitor_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """pgboss.E005: the monitor's (and the worker's) settings are in range."""
    errors = []
    try:
        values = {key: getattr(pgboss_settings, key) for key in (*NUMERIC_SETTINGS, *BOOLEAN_SETTINGS)}
    except ImproperlyConfigured:
        return []  # reported by pgboss.E004
    for key, (low, high) in NUMERIC_SETTINGS.items():
        value = values[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < low
            or (high is not None and value > high)
        ):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            errors.append(
                Error(f'settings.PGBOSS["{key}"] = {value!r} must be an integer {bounds}.', id="pgboss.E005")
            )
    for key in BOOLEAN_SETTINGS:
        if not isinstance(values[key], bool):
            errors.append(
                Error(f'settings.PGBOSS["{key}"] = {values[key]!r} must be True or False.', id="pgboss.E005")
            )
    name = pgboss_settings.INSTANCE_NAME
    if name is not None and (not isinstance(name, str) or not name or "\x00" in name or len(name) > 1024):
        errors.append(
            Error(
                f'settings.PGBOSS["INSTANCE_NAME"] = {name!r} must be None or a non-empty string of at '
                "most 1,024 characters without NUL.",
                id="pgboss.E005",
            )
        )
    return errors


@register(Tags.compatibility)
def check_backend_setting(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """pgboss.E008: PGBOSS["BACKEND"] names one of the engines django_pgboss knows."""
    try:
        backend = pgboss_settings.BACKEND
    except ImproperlyConfigured:
        return []  # reported by pgboss.E004
    if isinstance(backend, str) and backend in Backend.values:
        return []
    return [
        Error(
            f'settings.PGBOSS["BACKEND"] = {backend!r} is not a database engine django_pgboss knows.',
            hint=f"Use one of: {', '.join(repr(value) for value in Backend.values)}.",
            id="pgboss.E008",
        )
    ]


@register(Tags.security)
def check_metrics_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """pgboss.E007: METRICS_TOKEN is not a token a header can carry, or METRICS_ADDR is no
    address; pgboss.W004: METRICS_TOKEN is short enough to guess."""
    try:
        token, addr = pgboss_settings.METRICS_TOKEN, pgboss_settings.METRICS_ADDR
    except ImproperlyConfigured:
        return []  # reported by pgboss.E004
    messages: list[CheckMessage] = []
    problem = token_problem(token)
    if problem is not None:
        # Never the token itself: check output ends up in logs and CI output.
        shown = f"a str of {len(token)} characters" if isinstance(token, str) else f"a {type(token).__name__}"
        messages.append(Error(f'settings.PGBOSS["METRICS_TOKEN"] ({shown}) {problem}.', id="pgboss.E007"))
    elif isinstance(token, str) and len(token) < MIN_TOKEN_LENGTH:
        messages.append(
            CheckWarning(
                f'settings.PGBOSS["METRICS_TOKEN"] has {len(token)} characters: a token that short can be '
                f"guessed. Use at least {MIN_TOKEN_LENGTH}.",
                hint="python -c 'import secrets; print(secrets.token_urlsafe(32))' makes one.",
                id="pgboss.W004",
            )
        )
    if not isinstance(addr, str) or not addr.strip() or "\x00" in addr:
        messages.append(
            Error(
                f'settings.PGBOSS["METRICS_ADDR"] = {addr!r} must be a host name or an IP address to '
                'listen on ("127.0.0.1", "0.0.0.0", "::").',
                id="pgboss.E007",
            )
        )
    return messages


@register(Tags.database, deploy=True)
def check_backend_fits_database(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """pgboss.E009: the database does not fit PGBOSS["BACKEND"] ("citus" or "citus-distributed"
    without the citus extension, "citus-distributed" without worker nodes or off the coordinator).

    A deployment check, as pgboss.E006 is, because it reads the database; ``migrate`` refuses the
    same set-ups itself, in one line, before any DDL.
    """
    from django_pgboss.db.context import DatabaseContext
    from django_pgboss.schema.backend import backend_problem, read_citus_facts

    alias, errors = _database_alias()
    if alias is None or errors or (databases is not None and alias not in databases):
        return []
    backend = pgboss_settings.BACKEND
    connection = connections[alias]
    if backend == Backend.POSTGRES or backend not in Backend.values or connection.vendor != "postgresql":
        return []  # nothing to read, or E008 / E001 say why
    try:
        facts = read_citus_facts(DatabaseContext(alias))
    except DatabaseError as exc:
        return [CheckWarning(f"could not read database {alias!r}: {exc}".strip(), id="pgboss.W003")]
    problem = backend_problem(backend, facts, alias)
    if problem is None:
        return []
    return [Error(f"{problem}.", id="pgboss.E009")]


@register(Tags.database, deploy=True)
def check_schema_installed(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """pgboss.E006 (schema not installed), pgboss.W001 (drift), pgboss.W002 (an older version to
    migrate), pgboss.W005 (a newer version, which django_pgboss runs on unchecked, as an older pg-boss
    does): the live schema, read with the doctor's drift check.

    A deployment check (``check --deploy``), because it reads the database; it checks the alias
    PGBOSS["DATABASE"] names unless ``--database`` names others.
    """
    from django_pgboss.constants import SCHEMA_VERSION
    from django_pgboss.db.context import DatabaseContext
    from django_pgboss.schema.adoption import newer_schema_message
    from django_pgboss.schema.state import read_state

    alias, errors = _database_alias()
    if alias is None or errors:
        return []
    if databases is not None and alias not in databases:
        return []
    connection = connections[alias]
    schema = pgboss_settings.SCHEMA
    if connection.vendor != "postgresql" or schema_name_problem(schema) is not None:
        return []  # E001 / E002 say why
    try:
        state = read_state(DatabaseContext(alias, schema))
    except DatabaseError as exc:
        return [
            CheckWarning(
                f"could not read the pgboss schema in database {alias!r}: {exc}".strip(), id="pgboss.W003"
            )
        ]
    if not state.installed:
        return [
            Error(
                f"the pgboss schema is not installed in database {alias!r}: run manage.py migrate pgboss",
                id="pgboss.E006",
            )
        ]
    version = state.version
    if version is not None and version > SCHEMA_VERSION:
        return [
            CheckWarning(
                f"{newer_schema_message(state, alias)}.",
                hint="Upgrade django_pgboss; until then workers and the monitor run on it as they are.",
                id="pgboss.W005",
            )
        ]
    if version != SCHEMA_VERSION:
        return [
            CheckWarning(
                f'pg-boss schema "{schema}" in database {alias!r} is at version {version}, not {SCHEMA_VERSION}.',
                hint="Run manage.py migrate pgboss.",
                id="pgboss.W002",
            )
        ]
    assert state.report is not None
    if state.report.ok:
        return []
    problems = state.report.problems
    listed = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    return [
        CheckWarning(
            f'pg-boss schema "{schema}" in database {alias!r} differs from schema {SCHEMA_VERSION}: {listed}.',
            hint="manage.py pgboss_doctor shows the full report.",
            id="pgboss.W001",
        )
    ]
