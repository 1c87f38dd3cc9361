"""Statements run one way: through DatabaseContext (db/context.py), never a cursor of a module's own.

Outside ``db/``, no module opens a cursor (``.cursor()``) or calls ``execute()`` on anything but
a database context; the migration operations hand their frozen files to Django's
``schema_editor.execute()``, and the worker's LISTEN connection (psycopg's own, outside Django,
since it must outlive every transaction) runs the LISTEN statement its context gives it. Read
from the source, so no database is touched here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "django_pgboss"
#: What may receive execute(): a DatabaseContext (under the names the package gives it) and
#: Django's schema editor in a migration operation.
EXECUTE_RECEIVERS = {"context", "self.context", "self._context", "schema_editor"}
#: The one other receiver, by module: the LISTEN connection.
LISTEN_CONNECTION = ("worker/listener.py", "connection")


def calls_outside_db() -> list[tuple[str, int, str, str]]:
    """Every call of a method named cursor or execute outside db/: (module, line, method, receiver)."""
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        relative = module.relative_to(PACKAGE)
        if relative.parts[0] == "db":
            continue
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"cursor", "execute"}
            ):
                found.append((str(relative), node.lineno, node.func.attr, ast.unparse(node.func.value)))
    return found


def test_the_scan_sees_the_calls_it_judges():
    # A guard on the scan: were it to find nothing, the test below would pass on nothing.
    assert any(receiver == "context" and method == "execute" for _, _, method, receiver in calls_outside_db())


def test_no_module_outside_db_runs_a_statement_on_a_cursor_of_its_own():
    stray = [
        f"{module}:{line}: {receiver}.{method}()"
        for module, line, method, receiver in calls_outside_db()
        if method == "cursor"
        or (receiver not in EXECUTE_RECEIVERS and (module, receiver) != LISTEN_CONNECTION)
    ]
    assert not stray, "run statements through DatabaseContext (db/context.py): " + ", ".join(stray)
