"""CONTRIBUTING.md's module map against the package: every module is named, and every name is a module.

The map names a module by its path under ``django_pgboss/`` in backticks (``db/context.py``); a
path under ``scripts/``, ``tests/`` or ``bench/`` is the repository's, and ``NNNN`` in a path
stands for a migration's four digits. No database is touched here.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "django_pgboss"
REPOSITORY_FOLDERS = ("scripts/", "tests/", "bench/")


def module_map() -> str:
    """The "Module map" section of CONTRIBUTING.md, up to the next section of its level."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index("## Module map\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def named_paths() -> set[str]:
    """Every ``*.py`` path the map writes in backticks."""
    return set(re.findall(r"`([\w./*-]+\.py)`", module_map()))


def files_named(path: str) -> list[Path]:
    """The files ``path`` names (several for a migration pattern; none when it names nothing)."""
    root = REPO if path.startswith(REPOSITORY_FOLDERS) else PACKAGE
    if "NNNN" in path:
        return sorted(root.glob(path.replace("NNNN", "[0-9]" * 4)))
    return [root / path] if (root / path).is_file() else []


def test_the_map_names_modules():
    # A guard on the reading itself: were the section or the pattern lost, the tests below would
    # pass on nothing.
    assert {"db/context.py", "api/boss.py", "plans/fragments.py", "__init__.py"} <= named_paths()


def test_every_module_of_the_package_is_in_the_map():
    named = {file for path in named_paths() for file in files_named(path)}
    missing = sorted(
        str(module.relative_to(PACKAGE)) for module in PACKAGE.rglob("*.py") if module not in named
    )
    assert not missing, f"CONTRIBUTING.md's module map does not name {', '.join(missing)}"


def test_every_module_the_map_names_exists():
    absent = sorted(path for path in named_paths() if not files_named(path))
    assert not absent, f"CONTRIBUTING.md's module map names {', '.join(absent)}, which do not exist"
