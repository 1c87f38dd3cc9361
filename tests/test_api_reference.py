"""The API reference (docs/reference/) covers the public API: every name of ``django_pgboss``,
``django_pgboss.testing`` and ``django_pgboss.signals`` is rendered on some page, every Boss
method is on the Boss page with its async twin right after it, and every rendered name has the
docstring that mkdocstrings needs to show it at all (it leaves out an undocumented name
silently). No database: the pages are read as text, and the docstrings with griffe, the docs
extra's static reader (the test is skipped where that extra is not installed)."""

from __future__ import annotations

import ast
import inspect
import os
import re
from pathlib import Path

import pytest

import django_pgboss
from django_pgboss import signals, testing
from django_pgboss.api.boss import Boss

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference"

# A `::: path` block, with the member list of its options when it gives one.
DIRECTIVE = re.compile(r"^::: (\S+)\n((?:    .*\n)*)", re.MULTILINE)
MEMBER = re.compile(r"^        - (\w+)$", re.MULTILINE)


def directives() -> list[tuple[str, str, list[str] | None]]:
    """(page, path, members or None) for every block of docs/reference/, in page order."""
    found = []
    for page in sorted(REFERENCE.glob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text()):
            members = MEMBER.findall(match.group(2)) or None
            found.append((page.name, match.group(1), members))
    return found


def rendered_paths() -> set[str]:
    """Every dotted path the reference renders: each block's object, and each public member of a
    module block (its member list, else its ``__all__``, else the public names it defines)."""
    paths = set()
    for _, path, members in directives():
        paths.add(path)
        target = _resolve(path)
        if inspect.ismodule(target):
            names = members or getattr(target, "__all__", None) or _defined_names(target)
            paths.update(f"{path}.{name}" for name in names)
    return paths


def _defined_names(module: object) -> list[str]:
    """The public names a module's own top-level statements bind (not those it imports)."""
    names = []
    for node in ast.parse(Path(inspect.getfile(module)).read_text()).body:  # type: ignore[arg-type]
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if not name.startswith("_")]


def _resolve(path: str) -> object:
    module_name, _, rest = path.partition(".")
    target: object = __import__(module_name)
    for part in rest.split("."):
        target = getattr(target, part)
    return target


def public_names() -> list[str]:
    """The public names the reference must cover, as dotted paths."""
    return [
        *(f"django_pgboss.{name}" for name in django_pgboss.__all__),
        *(f"django_pgboss.testing.{name}" for name in testing.__all__),
        *(f"django_pgboss.signals.{name}" for name in signals.__all__),
    ]


def _same_object(path: str, rendered: set[str]) -> bool:
    """``path`` is rendered under that path, or (a class or function re-exported by the package)
    under the path of the module that defines it."""
    if path in rendered:
        return True
    target = _resolve(path)
    if inspect.isclass(target) or inspect.isfunction(target):
        return any(_resolve(other) is target for other in rendered if other.endswith("." + target.__name__))
    return False


def test_every_public_name_is_rendered():
    rendered = rendered_paths()
    missing = [path for path in public_names() if not _same_object(path, rendered)]
    assert missing == [], f"not in docs/reference/: {missing}"


def test_every_block_names_an_object_that_exists():
    for page, path, members in directives():
        target = _resolve(path)  # raises AttributeError for a name that is gone
        for member in members or ():
            assert hasattr(target, member), f"docs/reference/{page}: {path} has no member {member}"


def test_the_boss_page_lists_every_method_with_its_twin_after_it():
    public = [name for name, _ in inspect.getmembers(Boss) if not name.startswith("_")]
    twins = {name for name in public if name.startswith("a") and name[1:] in public}
    listed = [path.removeprefix("django_pgboss.Boss.") for page, path, _ in directives() if page == "boss.md"]
    listed = [name for name in listed if name not in {"django_pgboss.Boss", "django_pgboss.boss"}]
    assert sorted(listed) == sorted(public), "docs/reference/boss.md does not list Boss's methods exactly"
    for position, name in enumerate(listed):
        if name in twins:
            assert listed[position - 1] == name[1:], f"{name} is not right after {name[1:]}"
        elif f"a{name}" in twins:
            assert listed[position + 1] == f"a{name}", f"a{name} is not right after {name}"


def test_every_rendered_name_has_a_docstring():
    griffe = pytest.importorskip("griffe")
    package = griffe.load("django_pgboss", search_paths=[str(REFERENCE.parents[1])], resolve_aliases=True)
    undocumented = []
    for path in sorted(rendered_paths()):
        obj = package[path.removeprefix("django_pgboss.")] if path != "django_pgboss" else package
        if obj.docstring is None:
            undocumented.append(path)
    assert undocumented == [], f"mkdocstrings leaves these out, for want of a docstring: {undocumented}"


# -- docs/pg-boss.md maps pg-boss 12.38.0's public API -----------------------------------------------


def _pgboss_dist() -> Path:
    """pg-boss 12.38.0's dist/ (scripts/test.sh installs it and sets PGBOSS_NODE_DIR)."""
    node_dir = os.environ.get("PGBOSS_NODE_DIR")
    dist = Path(node_dir or "/nonexistent") / "node_modules" / "pg-boss" / "dist"
    if not (dist / "index.d.ts").is_file():
        # As the interoperability tests do (tests/conftest.py): a missing install is a failure to see.
        pytest.fail(
            "pg-boss 12.38.0 is not installed (PGBOSS_NODE_DIR): scripts/test.sh installs it", pytrace=False
        )
    return dist


def _interface_fields(types: str, name: str) -> list[str]:
    body = re.search(rf"export interface {name}(?: extends [^{{]+)? \{{\n(.*?)\n\}}", types, re.DOTALL)
    assert body, f"types.d.ts has no interface {name}"
    text = re.sub(r"/\*\*.*?\*/", "", body.group(1), flags=re.DOTALL)
    return re.findall(r"^    (\w+)\??:", text, flags=re.MULTILINE)


def test_the_pgboss_page_maps_every_method_and_constructor_option():
    dist = _pgboss_dist()
    index = (dist / "index.d.ts").read_text()
    page = (REFERENCE.parent / "pg-boss.md").read_text()
    mapped = page.partition("## Every method and option")[2].partition("\n## ")[0]
    klass = index.partition("export declare class PgBoss")[2].partition("\n}")[0]
    methods = set(re.findall(r"^    (\w+)(?:<[^(]*>)?\(", klass, flags=re.MULTILINE)) - {"constructor"}
    missing = sorted(m for m in methods if f"`{m}()`" not in mapped)
    assert missing == [], f"docs/pg-boss.md does not map these PgBoss methods: {missing}"
    types = (dist / "types.d.ts").read_text()
    options = [
        option
        for interface in (
            "DatabaseOptions",
            "SchedulingOptions",
            "MaintenanceOptions",
            "BackendOptions",
            "InstanceOptions",
            "ConstructorOptions",
            "OpenTelemetryOptions",
        )
        for option in _interface_fields(types, interface)
    ]
    # openTelemetry's own options are written `openTelemetry.enabled`, and so name it too.
    missing = sorted({o for o in options if not re.search(rf"`(openTelemetry\.)?{o}(`|\.)", mapped)})
    assert missing == [], f"docs/pg-boss.md does not map these constructor options: {missing}"
