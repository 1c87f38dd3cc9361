"""The migration operations: RunPgBossSQL applies one frozen file of ``django_pgboss/sql/``;
InstallPgBossSchema (migration 0001) also adopts a schema pg-boss installed and upgrades an older one
to 43; UpgradePgBossSchema (migrations 0005 to 0007) takes it one pg-boss version further, to 46;
DistributePgBossSchema (migration 0008) distributes it over a Citus cluster in the citus-distributed
backend."""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from django.core.management.base import OutputWrapper
from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.migrations.operations.base import Operation

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import INITIAL_SCHEMA_VERSION as INITIAL_VERSION
from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.db.identifiers import quote_schema, schema_key
from django_pgboss.exceptions import SchemaError

SQL_DIR = Path(__file__).resolve().parent / "sql"

#: The placeholder the SQL files use for the schema name in SQL text.
SCHEMA_TOKEN = "{{schema}}"
#: The placeholder for the schema as it enters pg-boss's advisory-lock key (see schema_key).
SCHEMA_KEY_TOKEN = "{{schema_key}}"


def render_sql(filename: str, schema: str) -> str:
    """Return the text of ``sql/<filename>`` with the schema name quoted into it.

    The schema name is validated first (see :func:`django_pgboss.identifiers.quote_schema`), so an
    invalid PGBOSS["SCHEMA"] raises ImproperlyConfiguredSchema before any SQL is produced.
    """
    quoted = quote_schema(schema)
    text = (SQL_DIR / filename).read_text(encoding="utf-8")
    return text.replace(SCHEMA_KEY_TOKEN, schema_key(schema)).replace(SCHEMA_TOKEN, quoted)


class RunPgBossSQL(Operation):
    """Apply ``sql/<filename>`` forwards and ``sql/<reverse_filename>`` backwards.

    The schema is read from settings when the operation runs, not when the migration is imported,
    so one set of migrations serves every schema name. The SQL runs only on the database alias
    PGBOSS["DATABASE"] names (and only where the router allows the app): a project with several
    databases gets one pg-boss schema, where its jobs are sent.

    Frozen SQL is the contract: released files are never edited, a change is a new file.
    """

    reduces_to_sql = True

    def __init__(self, filename: str, reverse_filename: str | None = None) -> None:
        self.filename = filename
        self.reverse_filename = reverse_filename
        self.hints: dict[str, Any] = {}
        for name in filter(None, (filename, reverse_filename)):
            if not (SQL_DIR / name).is_file():
                raise FileNotFoundError(f"RunPgBossSQL: {SQL_DIR / name} does not exist")

    # A property, as Django's RunSQL has it: an operation is reversible when it has a reverse file.
    # Operation declares ``reversible`` a class variable, hence the override ignore (django-stubs
    # carries the same one on RunSQL).
    @property
    def reversible(self) -> bool:  # type: ignore[override]
        return self.reverse_filename is not None

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs = {"reverse_filename": self.reverse_filename} if self.reverse_filename else {}
        return (self.__class__.__name__, [self.filename], kwargs)

    def describe(self) -> str:
        return f"Apply pg-boss SQL {self.filename}"

    def state_forwards(self, app_label: str, state: Any) -> None:
        """The SQL creates tables the ORM does not manage: the model state is left as it is."""

    def _applies(self, app_label: str, connection: Any) -> bool:
        """Whether this database gets the pg-boss schema (see the class docstring)."""
        if connection.alias != pgboss_settings.DATABASE:
            return False
        if not router.allow_migrate(connection.alias, app_label, **self.hints):
            return False
        if connection.vendor != "postgresql":
            raise RuntimeError(
                f"django_pgboss needs PostgreSQL; database {connection.alias!r} is {connection.vendor}."
            )
        return True

    def _locked_schema(self, app_label: str, schema_editor: Any) -> str | None:
        """The schema to act on, with pg-boss's advisory lock taken in the migration's transaction,
        or None when this database gets no pg-boss schema (see _applies()) or migrate only collects
        the SQL (sqlmigrate): then nothing is inspected or locked. The lock is the one pg-boss takes
        to install or migrate, so a pg-boss instance starting at the same moment waits for the
        operation and its outcome instead of racing it."""
        from django_pgboss.db.context import DatabaseContext
        from django_pgboss.plans.queues import advisory_lock

        connection = schema_editor.connection
        if not self._applies(app_label, connection):
            return None
        schema = pgboss_settings.SCHEMA
        quote_schema(schema)  # an invalid name is refused before any SQL
        if getattr(schema_editor, "collect_sql", False):
            return None
        context = DatabaseContext(connection.alias, schema)
        context.execute(advisory_lock(), {"lock_key": context.lock_key("")})
        return schema

    def _run(self, app_label: str, schema_editor: Any, filename: str) -> None:
        if not self._applies(app_label, schema_editor.connection):
            return
        # params=None keeps the driver from reading the format() specifiers (%I, %L) in the
        # plpgsql bodies as placeholders.
        schema_editor.execute(render_sql(filename, pgboss_settings.SCHEMA), params=None)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, self.filename)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if self.reverse_filename is None:
            raise NotImplementedError(f"{self.filename} has no reverse SQL file")
        self._run(app_label, schema_editor, self.reverse_filename)


#: The steps whose index builds go through bam (``upgrade/vN_to_vM.bam.sql``), by the version each
#: starts from: pg-boss 12.38 queues those builds rather than run them in the migration, and so do
#: these. They replace the released files of the same steps (frozen, which built the indexes in the
#: migration's transaction, holding a write lock on each job table for the whole build).
BAM_BUILD_STEPS = frozenset({26, 27, 32, 37, 39, 42})
#: The frozen steps that bring an older pg-boss schema to 43, by the version each starts from, and
#: the file of schema 43's functions applied before them (see sql/upgrade/functions_43.sql).
UPGRADE_STEPS = {
    version: f"upgrade/v{version}_to_v{version + 1}{'.bam' if version in BAM_BUILD_STEPS else ''}.sql"
    for version in range(25, 43)
}
UPGRADE_FUNCTIONS = "upgrade/functions_43.sql"
#: The frozen steps that roll a schema back one version, by the version each starts from, with the
#: effect of pg-boss's rollback of that version (``pg-boss rollback``, migrationStore's
#: ``uninstall``; 12.38's for 44 to 46, 12.35's below), one for every version pg-boss has one for:
#: 46 down to 26 (to 25). manage.py pgboss_rollback runs them, and migrations 0005 to 0007 run
#: their own one backwards.
ROLLBACK_STEPS = {
    version: f"rollback/v{version}_to_v{version - 1}.sql" for version in range(26, SCHEMA_VERSION + 1)
}


# Where migrate writes its progress, and at what verbosity: pre_migrate hands both to its
# receivers (see remember_migrate_output), and an operation has no other way to reach them.
_migrate_output = threading.local()


def remember_migrate_output(
    sender: Any = None, verbosity: int = 1, stdout: Any = None, **kwargs: Any
) -> None:
    """pre_migrate receiver: keep the running migrate's stdout and verbosity for the operations."""
    _migrate_output.stdout = stdout
    _migrate_output.verbosity = verbosity


def refuse_unfit_backend(
    sender: Any = None, using: str = DEFAULT_DB_ALIAS, plan: Any = None, **kwargs: Any
) -> None:
    """pre_migrate receiver: before any migration runs, refuse to migrate pgboss forwards on a
    database that does not fit PGBOSS["BACKEND"] (UnfitBackend, one line), so that no DDL of any
    app has run when migrate stops. On "postgres", the default, it reads nothing."""
    from django_pgboss.constants import Backend
    from django_pgboss.db.context import DatabaseContext
    from django_pgboss.exceptions import UnfitBackend
    from django_pgboss.schema.backend import backend_problem, read_citus_facts

    backend = pgboss_settings.BACKEND
    if backend == Backend.POSTGRES or using != pgboss_settings.DATABASE:
        return
    if not any(migration.app_label == "pgboss" and not backwards for migration, backwards in plan or ()):
        return
    if backend not in Backend.values:
        raise UnfitBackend(
            f'settings.PGBOSS["BACKEND"] = {backend!r} is not one of '
            f"{', '.join(repr(value) for value in Backend.values)}; nothing was migrated."
        )
    connection = connections[using]
    if connection.vendor != "postgresql":
        return  # the pgboss.E001 check stops migrate first, and the operations refuse it
    facts = read_citus_facts(DatabaseContext(using))
    problem = backend_problem(backend, facts, using)
    if problem is not None:
        raise UnfitBackend(f"{problem}; nothing was migrated.")


class InstallPgBossSchema(RunPgBossSQL):
    """Migration 0001: create pg-boss schema 43, or adopt the one pg-boss installed, or upgrade an
    older one, under pg-boss's advisory lock.

    What it finds decides (django_pgboss.schema.adoption): no schema, or one holding nothing of
    pg-boss's, gets ``0001_initial.sql``; a schema whose version row and catalog both say 43 is
    adopted as it is, with one line saying so; a schema from an older pg-boss is brought to 43 by the
    frozen steps of ``sql/upgrade/`` and then checked like an adopted one; any other schema is refused
    with a message naming what differs, and the migration is not recorded (the upgrade, being in the
    migration's transaction, is rolled back with it). The lock is the one pg-boss takes to install
    or migrate, so a pg-boss instance starting at the same moment waits for the decision and its
    outcome instead of racing it.
    """

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from django_pgboss.db.context import DatabaseContext
        from django_pgboss.schema.adoption import adoption_message, plan_installation, upgrade_refusal
        from django_pgboss.schema.state import read_state

        connection = schema_editor.connection
        schema = self._locked_schema(app_label, schema_editor)
        if schema is None:
            # sqlmigrate prints what a fresh install runs; it inspects nothing.
            super().database_forwards(app_label, schema_editor, from_state, to_state)
            return
        context = DatabaseContext(connection.alias, schema)
        state = read_state(context, check_placement=False)
        plan = plan_installation(state, connection.alias, frozenset(UPGRADE_STEPS))
        if plan.message:
            self._announce(plan.message)
        if plan.action == "install":
            schema_editor.execute(render_sql(self.filename, schema), params=None)
        elif plan.action == "adopt" and not plan.message:
            self._announce(adoption_message(state, connection.alias))
        elif plan.action == "upgrade":
            assert plan.from_version is not None
            # The tables the steps alter are locked all at once first, as migrations 0005 to 0007
            # lock theirs (see lock_for_step()): a step that took them one statement at a time
            # would close a cycle with a client that holds a job table and waits for the queue
            # table (a send's foreign key check), and PostgreSQL would fail one side.
            lock_for_step(connection, schema, stats="queue_stats" in state.catalog.tables)
            schema_editor.execute(render_sql(UPGRADE_FUNCTIONS, schema), params=None)
            for version in range(plan.from_version, INITIAL_VERSION):
                schema_editor.execute(render_sql(UPGRADE_STEPS[version], schema), params=None)
            upgraded = read_state(context, check_placement=False)
            if upgraded.report is None or not upgraded.report.ok:
                raise upgrade_refusal(upgraded, connection.alias, plan.from_version, INITIAL_VERSION)
            self._announce(
                f'upgraded the pg-boss schema "{schema}" in database {connection.alias!r} from version '
                f"{plan.from_version} to {INITIAL_VERSION} (catalog checked)"
            )

    @staticmethod
    def _announce(message: str) -> None:
        # Written on migrate's own progress line ("Applying pgboss.0001_initial... <message> OK").
        if getattr(_migrate_output, "verbosity", 1) < 1:
            return
        stream = getattr(_migrate_output, "stdout", None)
        if isinstance(stream, OutputWrapper):
            stream.write(f" {message}.", ending="")
        else:
            (stream or sys.stdout).write(f" {message}.")
        (stream or sys.stdout).flush()


class UpgradePgBossSchema(RunPgBossSQL):
    """Migrations 0005 to 0007: take the schema from ``version - 1`` to ``version``, one pg-boss
    migration each (44: pg-boss 12.36, 45: 12.37, 46: 12.38), or leave it as it is.

    Under pg-boss's advisory lock it reads the version row: one step below ``version``, it applies the
    frozen upgrade file; at ``version`` or later (a schema pg-boss migrated, which migration 0001
    adopted), it changes nothing. Backwards, it applies the frozen rollback file, which refuses any
    schema not at ``version``. The last step, to SCHEMA_VERSION, also checks the result against the
    manifest (django_pgboss.schema.drift), so a schema the steps cannot make whole is rolled back
    with the migration and a message naming what differs, as migration 0001 does.
    """

    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(f"upgrade/v{version - 1}_to_v{version}.sql", ROLLBACK_STEPS[version])

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (self.__class__.__name__, [self.version], {})

    def describe(self) -> str:
        return f"Upgrade the pg-boss schema to version {self.version}"

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from django_pgboss.db.context import DatabaseContext
        from django_pgboss.schema.adoption import upgrade_refusal
        from django_pgboss.schema.state import read_state, read_version

        connection = schema_editor.connection
        schema = self._locked_schema(app_label, schema_editor)
        if schema is None:
            super().database_forwards(app_label, schema_editor, from_state, to_state)
            return
        context = DatabaseContext(connection.alias, schema)
        found = read_version(context)
        if found is not None and found >= self.version:
            return  # pg-boss already took the schema this far (migration 0001 adopted it)
        if found != self.version - 1:
            raise SchemaError(
                f'the pg-boss schema "{schema}" in database {connection.alias!r} is at version {found}, '
                f"not {self.version - 1}: this step upgrades {self.version - 1} to {self.version} only. "
                f"Nothing was changed; manage.py pgboss_doctor says what the schema is."
            )
        lock_for_step(connection, schema)
        schema_editor.execute(render_sql(self.filename, schema), params=None)
        if self.version == SCHEMA_VERSION:
            upgraded = read_state(context, check_placement=False)
            if upgraded.report is None or not upgraded.report.ok:
                raise upgrade_refusal(upgraded, connection.alias, self.version - 1, self.version)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        # pg-boss's advisory lock before the tables, the order its create_queue() takes them in (the
        # rollback file takes the lock again, which a session already holding it is granted at once).
        schema = self._locked_schema(app_label, schema_editor)
        if schema is None:
            super().database_backwards(app_label, schema_editor, from_state, to_state)
            return
        connection = schema_editor.connection
        lock_for_step(connection, schema)
        assert self.reverse_filename is not None  # every version step has its rollback file
        schema_editor.execute(render_sql(self.reverse_filename, schema), params=None)


#: How long one attempt to lock the tables a version step alters may wait: under PostgreSQL's
#: deadlock_timeout (1 s by default), so an attempt that would close a cycle with a client's
#: transaction gives way before the deadlock detector fails either side.
LOCK_ATTEMPT_TIMEOUT = "200ms"
#: How long the attempts go on before the migration gives up, saying what held the tables.
LOCK_DEADLINE_SECONDS = 300.0


def lock_for_step(connection: Any, schema: str, *, stats: bool = True) -> None:
    """Take, in the migration's transaction, the locks of every table a version step alters, all at
    once and before the step runs (``stats`` False: a schema without queue_stats yet, older than 35).

    Clients take these tables' locks in different orders: django_pgboss's send locks its job table,
    then reads the queue row; pg-boss 12.35's fetch locks a job partition, then the partitioned
    parent; a monitor pass locks the queue table, then the job tables. A step that took them one
    statement at a time would close a cycle with one of them sooner or later, and PostgreSQL would
    fail one side of it (bench/upgrade_46.py met it). So each attempt asks for all of them in one
    statement, waits LOCK_ATTEMPT_TIMEOUT at most, and on a timeout gives them back (a savepoint)
    and tries again a moment later, until LOCK_DEADLINE_SECONDS: the clients' statements go on
    meanwhile, paused at most that long by each attempt's place in the lock queue.
    """
    from django.db import OperationalError

    from django_pgboss.db.context import DatabaseContext
    from django_pgboss.plans import catalog

    context = DatabaseContext(connection.alias, schema)
    (configured,) = context.one(catalog.current_lock_timeout())
    deadline = time.monotonic() + LOCK_DEADLINE_SECONDS
    attempts = 0
    while True:
        attempts += 1
        try:
            with context.atomic():
                context.execute(catalog.lock_attempt(), {"timeout": LOCK_ATTEMPT_TIMEOUT})
                context.execute(catalog.lock_for_upgrade(context.quoted_schema, stats=stats))
                # The step's own statements wait as the session is configured to: it holds the
                # tables already, and what else it touches (bam, version) nothing holds for long.
                context.execute(catalog.lock_attempt(), {"timeout": configured})
            return
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "55P03":
                raise
            if time.monotonic() >= deadline:
                raise SchemaError(
                    f'could not lock the tables of the pg-boss schema "{schema}" in database '
                    f"{connection.alias!r} in {LOCK_DEADLINE_SECONDS:.0f} s ({attempts} attempts): a "
                    f"long transaction holds them (pg_locks and pg_stat_activity say which). Nothing "
                    f"was changed; run manage.py migrate pgboss again once it is done."
                ) from exc
            time.sleep(random.uniform(0.01, 0.05) * min(attempts, 10))


class DistributePgBossSchema(RunPgBossSQL):
    """Migration 0008: with ``PGBOSS["BACKEND"] = "citus-distributed"``, distribute the job table
    over the Citus cluster by queue name (``sql/citus/distribute.sql``); in any other backend,
    change nothing.

    It refuses, before any SQL, a database without the citus extension or without an active worker
    node, and leaves a job table that is distributed already as it is. After the file it checks the
    result against the variant's manifest and placement (django_pgboss.schema.citus), as migration
    0007 checks schema 46, so a schema it cannot make whole is rolled back with the migration.
    Backwards, it undistributes a distributed job table (``sql/citus/undistribute.sql``), whatever
    the backend now says, so ``migrate pgboss 0007`` takes a cluster's schema back to the plain one.
    """

    def __init__(self) -> None:
        super().__init__("citus/distribute.sql", "citus/undistribute.sql")

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (self.__class__.__name__, [], {})

    def describe(self) -> str:
        return "Distribute the pg-boss job table over a Citus cluster (citus-distributed backend only)"

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from django_pgboss.constants import Backend
        from django_pgboss.db.context import DatabaseContext
        from django_pgboss.schema.backend import backend_problem, read_citus_facts
        from django_pgboss.schema.state import read_placement, read_state

        if pgboss_settings.BACKEND != Backend.CITUS_DISTRIBUTED:
            return
        schema = self._locked_schema(app_label, schema_editor)
        if schema is None:
            super().database_forwards(app_label, schema_editor, from_state, to_state)
            return
        connection = schema_editor.connection
        where = f'the pg-boss schema "{schema}" in database {connection.alias!r}'
        context = DatabaseContext(connection.alias, schema)
        # migrate's pre_migrate refusal says this first; a migration run on its own says it here.
        problem = backend_problem(pgboss_settings.BACKEND, read_citus_facts(context), connection.alias)
        if problem is not None:
            raise SchemaError(f"{problem}; nothing was changed.")
        placement = read_placement(context) or {}
        if "job" in placement:
            return  # distributed already (by an earlier run, or by hand)
        for statement in one_by_one(render_sql(self.filename, schema)):
            schema_editor.execute(statement, params=None)
        distributed = read_state(context)
        problems = distributed.report.problems if distributed.report is not None else ["no version 46"]
        if problems:
            listed = "\n".join(f"  - {problem}" for problem in problems)
            raise SchemaError(
                f"distributing {where} over the Citus cluster did not give the citus-distributed variant "
                f"of schema {SCHEMA_VERSION}, so it was rolled back:\n{listed}\n"
                f"manage.py pgboss_doctor says what the schema is. Nothing was changed."
            )

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from django_pgboss.db.context import DatabaseContext
        from django_pgboss.schema.state import read_placement

        schema = self._locked_schema(app_label, schema_editor)
        if schema is None:
            return
        placement = read_placement(DatabaseContext(schema_editor.connection.alias, schema))
        if placement is None or "job" not in placement:
            return
        assert self.reverse_filename is not None
        for statement in one_by_one(render_sql(self.reverse_filename, schema)):
            schema_editor.execute(statement, params=None)


def one_by_one(text: str) -> list[str]:
    """The statements of a ``sql/citus/`` file, each ending a line with ``;``, one by one.

    Citus propagates some DDL to the workers as the text the client sent, so a file sent whole
    would reach them as several commands in one, which they refuse. These files hold no function
    bodies, so a semicolon that ends a line always ends a statement.
    """
    statements, current = [], []
    for line in text.splitlines():
        current.append(line)
        if line.rstrip().endswith(";"):
            statements.append("\n".join(current))
            current = []
    return statements
