"""Every django_pgboss import path the documentation and the example project mention still works.

The paths are parsed out of docs/, README.md and example_project/ (``from ... import ...`` and
``import ...`` statements, and dotted names such as ``django_pgboss.tasks_backend.PgBossBackend``
in settings strings and prose), so a path a new page mentions is covered without editing this file.
No database is touched here.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = (REPO / "example_project").rglob("*")
SOURCES = [
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted(p for p in EXAMPLE_FILES if p.suffix in {".py", ".md", ".txt", ".html"}),
]
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
FROM_IMPORT = re.compile(
    rf"^\s*from\s+(django_pgboss(?:\.{NAME})*)\s+import\s+(\([^)]*\)|[^\n#]+)", re.MULTILINE
)
IMPORT = re.compile(rf"^\s*import\s+(django_pgboss(?:\.{NAME})*)", re.MULTILINE)
DOTTED = re.compile(rf"(?<![\w./-])django_pgboss(?:\.{NAME})+")


def mentioned_paths() -> dict[str, set[str]]:
    """Each dotted path (a module, or a module and an attribute) -> the files that mention it."""
    paths: dict[str, set[str]] = {}
    for source in SOURCES:
        if ".pgdata" in source.parts:
            continue
        text = source.read_text(encoding="utf-8", errors="replace")
        where = str(source.relative_to(REPO))
        found = set(DOTTED.findall(text)) | set(IMPORT.findall(text))
        for module, names in FROM_IMPORT.findall(text):
            found.add(module)
            for name in re.split(r"[\s,()]+", names):
                name = name.split(" as ")[0].strip()
                if re.fullmatch(NAME, name):
                    found.add(f"{module}.{name}")
        for path in found:
            paths.setdefault(path, set()).add(where)
    return paths


PATHS = mentioned_paths()


def resolve(path: str) -> object:
    """Import the longest module prefix of ``path``, then read the rest as attributes."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError as exc:
            if exc.name is None or not ".".join(parts[:split]).startswith(exc.name):
                raise  # the module exists but imports something missing: a real failure
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(path)


def test_the_documentation_mentions_the_paths_users_rely_on():
    # A guard on the parser itself: if it stopped finding paths, every other test here would pass.
    for path in (
        "django_pgboss.boss",
        "django_pgboss.work",
        "django_pgboss.tasks_backend.PgBossBackend",
        "django_pgboss.tasks.backend.PgBossBackend",
        "django_pgboss.registry",
        "django_pgboss.worker.registry",
        "django_pgboss.testing",
        "django_pgboss.models.Job",
    ):
        assert path in PATHS, path


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_documented_path_imports(path):
    try:
        resolve(path)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{path} (mentioned in {', '.join(sorted(PATHS[path]))}) does not import: {exc!r}")


@pytest.mark.parametrize("module", ["django_pgboss.tasks_backend", "django_pgboss", "django_pgboss.registry"])
def test_a_documented_module_imports_in_a_fresh_interpreter_without_settings(module):
    # `python -c "import django_pgboss.tasks_backend"`: nothing may need a configured Django or an
    # import order that only the test suite provides.
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
