"""pg-boss's schema drift check, ported: a live catalog compared with what its schema version must hold.

pg-boss (``detectSchemaDrift()``, ``pg-boss doctor``) compares the live catalog with a
manifest of its schema: tables, columns with their types, nullability and defaults, indexes with
their keys and predicates, constraints, function bodies and the job_state enum order. This does the
same against our frozen manifest (:mod:`django_pgboss.schema.manifest`), and also checks what the
partitioning rests on: ``job`` is partitioned by queue name with ``job_common`` as its DEFAULT
partition, and every queue created with ``partition`` has its own table attached for its name,
carrying the indexes of its policy.

Definitions are compared in a canonical form that undoes what PostgreSQL may print differently for
the same object (whitespace, the casts it adds to literals, ``IN`` printed as ``= ANY (ARRAY[...])``)
and nothing else; the report shows them as the catalog prints them. Constraint names are not
compared (an older pg-boss named a few differently), their definitions are. What the schema holds
beyond pg-boss's objects (a table or an index of the user's) is reported as a note, never as drift,
and so is an index that is missing while a bam command that builds it is not yet completed (an
upgrade's background build, pg-boss's "still building").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django_pgboss.schema.catalog import Catalog, Column, Function, Index
from django_pgboss.schema.manifest import DAILY_STATS_PARTITION

_CAST = re.compile(r"::(?:\{\{schema\}\}\.|[a-z_][a-z0-9_$]*\.)?[a-z_][a-z0-9_$]*(?:\[\])?")
_ANY_ARRAY = re.compile(r"=\s*ANY\s*\(\s*ARRAY\s*\[([^\]]*)\]\s*\)", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s+")

#: The DEFAULT partition of job: every queue without a table of its own keeps its jobs there.
COMMON_JOB_TABLE = "job_common"

#: The job_iN indexes a partitioned queue's table carries only for its own policy; every other
#: index of job_common (pg-boss's base set: the key, job_i4, job_i7, job_i9, job_i11 to job_i17 as
#: the version has them) every job table carries whatever its queue's policy.
POLICY_JOB_INDEXES = {
    "short": ("i1",),
    "singleton": ("i2",),
    "stately": ("i3",),
    "exclusive": ("i6",),
    "key_strict_fifo": ("i8", "i10"),
}
#: The check only a key_strict_fifo queue's own table carries (job_common carries it for all).
KEY_STRICT_FIFO_CHECK = "CHECK ((NOT ((policy = 'key_strict_fifo'::text) AND (singleton_key IS NULL))))"


def canonical(text: str | None) -> str:
    """``text`` with the cosmetic differences of two equal catalog definitions removed."""
    if text is None:
        return ""
    folded = _ANY_ARRAY.sub(lambda m: "IN (" + m.group(1) + ")", _CAST.sub("", text))
    return _WHITESPACE.sub(" ", folded).strip()


def _body(text: str) -> str:
    # pg-boss compares stored bodies with runs of whitespace folded, case kept.
    return _WHITESPACE.sub(" ", text).strip()


def _readable(text: str | None) -> str:
    return "no default" if text is None else _WHITESPACE.sub(" ", text).strip()


@dataclass
class DriftReport:
    """The differences between a live schema and its version's manifest, as sentences.

    ``problems`` is the drift (anything there makes the schema one pg-boss and django_pgboss cannot
    be trusted to run on); ``notes`` are harmless extras worth knowing about, and the indexes still
    being built in the background.
    """

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the schema is its version's schema, object for object."""
        return not self.problems


@dataclass(frozen=True)
class QueueTable:
    """A partitioned queue as its queue row describes it: name, table name, policy."""

    name: str
    table: str
    policy: str


def base_job_indexes(expected: Catalog) -> list[str]:
    """The suffixes (``pkey``, ``i4`` ...) of the indexes every job table of ``expected`` carries."""
    prefix = f"{COMMON_JOB_TABLE}_"
    by_policy = {suffix for suffixes in POLICY_JOB_INDEXES.values() for suffix in suffixes}
    return [
        name[len(prefix) :]
        for name, index in expected.indexes.items()
        if index.table == COMMON_JOB_TABLE and name[len(prefix) :] not in by_policy
    ]


def _queue_table_expectations(expected: Catalog, queue: QueueTable) -> tuple[dict[str, Index], set[str]]:
    """The indexes and constraint definitions a partitioned queue's own table must carry."""
    indexes = {}
    for suffix in (*base_job_indexes(expected), *POLICY_JOB_INDEXES.get(queue.policy, ())):
        template = expected.indexes[f"{COMMON_JOB_TABLE}_{suffix}"]
        indexes[f"{queue.table}_{suffix}"] = Index(
            queue.table,
            template.definition.replace(COMMON_JOB_TABLE, queue.table),
            True,
            template.constraint_backed,
        )
    constraints = {canonical(d) for d in expected.constraints.get(COMMON_JOB_TABLE, {}).values()}
    if queue.policy != "key_strict_fifo":
        constraints.discard(canonical(KEY_STRICT_FIFO_CHECK))
    # Each queue's table checks the name it was attached for, so a row can never sit in the
    # wrong queue's table even if the partition bound were changed.
    literal = queue.name.replace("'", "''")
    constraints.add(canonical(f"CHECK ((name = '{literal}'::text))"))
    return indexes, constraints


def compare(
    expected: Catalog, live: Catalog, queues: list[QueueTable], building: frozenset[str] = frozenset()
) -> DriftReport:
    """Compare ``live`` with ``expected`` (its version's manifest); ``queues`` are the live schema's
    partitioned queues, whose tables are checked too, and ``building`` the indexes an unfinished bam
    command builds."""
    report = DriftReport()
    problems = report.problems
    if not live.exists:
        problems.append("the schema does not exist")
        return report

    # The job_state enum: its order is load-bearing (every "waiting" test is state < 'active').
    if not live.enum:
        problems.append("type job_state is missing")
    elif live.enum != expected.enum:
        problems.append(
            f"type job_state has the values ({', '.join(live.enum)}), "
            f"expected ({', '.join(expected.enum)}) in this order"
        )

    # Tables and the two partitioning schemes.
    kinds = {"r": "an ordinary table", "p": "a partitioned table"}
    for table, kind in expected.tables.items():
        if table not in live.tables:
            problems.append(f"table {table} is missing")
        elif live.tables[table] != kind:
            problems.append(f"table {table} is {kinds[live.tables[table]]}, expected {kinds[kind]}")
    for table, (parent, bound) in expected.partitions.items():
        if table in live.tables and live.partitions.get(table) != (parent, bound):
            where = live.partitions.get(table)
            actual = f"a partition of {where[0]} {where[1]}" if where else "not a partition"
            problems.append(f"table {table} is {actual}, expected a partition of {parent} {bound}")
    queue_tables = {q.table: q for q in queues}
    for queue in queues:
        attached = ("job", f"FOR VALUES IN ('{queue.name.replace(chr(39), chr(39) * 2)}')")
        if queue.table not in live.tables:
            problems.append(f"table {queue.table} of partitioned queue {queue.name!r} is missing")
        elif live.partitions.get(queue.table) != attached:
            where = live.partitions.get(queue.table)
            actual = f"a partition of {where[0]} {where[1]}" if where else "not a partition"
            problems.append(
                f"table {queue.table} of queue {queue.name!r} is {actual}, expected a partition of job {attached[1]}"
            )
    for table, (parent, _bound) in live.partitions.items():
        if parent == "job" and table not in expected.tables and table not in queue_tables:
            problems.append(f"table {table} is a partition of job, but no queue names it as its table")

    # Columns: every managed table, and each queue's table against the job table's columns.
    column_sets = {t: expected.columns[t] for t in expected.tables if t in expected.columns}
    for table in queue_tables:
        column_sets[table] = expected.columns["job"]
    for table, columns in column_sets.items():
        if table in live.columns:
            _compare_columns(
                table, columns, live.columns[table], problems, with_defaults=table not in queue_tables
            )

    # Indexes.
    wanted_indexes = {n: i for n, i in expected.indexes.items()}
    wanted_constraints = {
        t: {canonical(d) for d in defs.values()} for t, defs in expected.constraints.items()
    }
    for queue in queues:
        indexes, constraints = _queue_table_expectations(expected, queue)
        wanted_indexes.update(indexes)
        wanted_constraints[queue.table] = constraints
    for name, index in wanted_indexes.items():
        found = live.indexes.get(name)
        if index.table not in live.tables:
            continue  # the missing table is reported already
        if found is None and name in building:
            report.notes.append(
                f"index {name} on {index.table} is still being built (a bam command the monitor runs)"
            )
        elif found is None:
            problems.append(f"index {name} on {index.table} is missing")
        elif not found.valid:
            problems.append(
                f"index {name} is invalid (an interrupted CREATE INDEX CONCURRENTLY?): drop it and create it again"
            )
        elif canonical(found.definition) != canonical(index.definition):
            problems.append(
                f"index {name} differs: it is {_readable(found.definition)}; "
                f"expected {_readable(index.definition)}"
            )
    managed = set(expected.tables) | set(queue_tables)
    for name, index in live.indexes.items():
        if index.table in managed and name not in wanted_indexes and not index.constraint_backed:
            report.notes.append(
                f"index {name} on {index.table} is not pg-boss's (harmless, but not ours to keep)"
            )

    # Constraints, compared as sets of definitions per table.
    for table, wanted in wanted_constraints.items():
        if table not in live.tables:
            continue
        have = live.constraints.get(table, {})
        have_canonical = {canonical(d): name for name, d in have.items()}
        for definition in sorted(wanted - set(have_canonical)):
            problems.append(f"table {table} lacks the constraint {definition}")
        for definition, name in sorted(have_canonical.items()):
            if definition not in wanted:
                problems.append(f"table {table} has a constraint pg-boss does not: {name} {have[name]}")

    # Functions: names, signatures and bodies.
    for name, overloads in expected.functions.items():
        _compare_function(name, overloads[0], live.functions.get(name, []), problems)

    for table in live.tables:
        parent = live.partitions.get(table, ("", ""))[0]
        if table in managed or parent == "job":
            continue  # pg-boss's, or a stray job partition reported above
        if parent == "queue_stats" and DAILY_STATS_PARTITION.match(table):
            continue
        report.notes.append(f"table {table} is not pg-boss's")
    for name in live.functions:
        if name not in expected.functions:
            report.notes.append(f"function {name} is not pg-boss's")
    return report


def _compare_columns(
    table: str,
    expected: dict[str, Column],
    live: dict[str, Column],
    problems: list[str],
    *,
    with_defaults: bool,
) -> None:
    for name, column in expected.items():
        found = live.get(name)
        if found is None:
            problems.append(f"column {table}.{name} is missing")
            continue
        if found.type != column.type:
            problems.append(f"column {table}.{name} is {found.type}, expected {column.type}")
        if found.not_null != column.not_null:
            want = "NOT NULL" if column.not_null else "nullable"
            have = "NOT NULL" if found.not_null else "nullable"
            problems.append(f"column {table}.{name} is {have}, expected {want}")
        if with_defaults and canonical(found.default) != canonical(column.default):
            problems.append(
                f"column {table}.{name} defaults to {_readable(found.default)}, expected {_readable(column.default)}"
            )
    for name in live:
        if name not in expected:
            problems.append(f"column {table}.{name} is not pg-boss's")


def _compare_function(name: str, expected: Function, live: list[Function], problems: list[str]) -> None:
    if not live:
        problems.append(f"function {name}({expected.arguments}) is missing")
        return
    match = [f for f in live if f.arguments == expected.arguments]
    if not match:
        signatures = ", ".join(f"{name}({f.arguments})" for f in live)
        problems.append(
            f"function {name} takes other arguments: found {signatures}, expected {name}({expected.arguments})"
        )
        return
    found = match[0]
    for label, have, want in (
        ("returns", found.result, expected.result),
        ("is written in", found.language, expected.language),
        ("has volatility", found.volatility, expected.volatility),
    ):
        if have != want:
            problems.append(f"function {name} {label} {have}, expected {want}")
    if _body(found.body) != _body(expected.body):
        have, want = _body(found.body), _body(expected.body)
        at = next(
            (i for i, (a, b) in enumerate(zip(have, want, strict=False)) if a != b), min(len(have), len(want))
        )
        start = max(at - 30, 0)
        problems.append(
            f"function {name}({expected.arguments}) has a body pg-boss did not write: "
            f"at ...{have[start : at + 40]!r}..., expected ...{want[start : at + 40]!r}..."
        )
    for other in live:
        if other is not found:
            problems.append(f"function {name}({other.arguments}) is an overload pg-boss does not define")
