"""What a user installs: the wheel's contents and the runtime dependencies it declares.

The wheel is built from a copy of the package in a temporary folder, the way pip builds it from a
checkout, so the test sees exactly what `pip install django-pgboss` would put on a user's machine.
"""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """django_pgboss's wheel, built by setuptools (the build backend) from a copy of the sources."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "django_pgboss", source / "django_pgboss", ignore=shutil.ignore_patterns("__pycache__")
    )
    built = subprocess.run(
        [sys.executable, "-c", "from setuptools import build_meta; print(build_meta.build_wheel('dist'))"],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(source / "dist" / built.stdout.strip().splitlines()[-1]) as archive:
        yield archive


def test_the_wheel_ships_py_typed_so_type_checkers_read_the_package_hints(wheel):
    assert "django_pgboss/py.typed" in wheel.namelist()


def test_the_wheel_ships_the_migration_sql_templates_and_static_files(wheel):
    names = wheel.namelist()
    sql_dir = REPO / "django_pgboss" / "sql"
    # The migration files and the upgrade steps of sql/upgrade/.
    sql_files = sorted(p.relative_to(sql_dir).as_posix() for p in sql_dir.rglob("*.sql"))
    assert any(name.startswith("upgrade/") for name in sql_files)
    assert (
        sorted(n.removeprefix("django_pgboss/sql/") for n in names if n.startswith("django_pgboss/sql/"))
        == sql_files
    )
    assert any(n.startswith("django_pgboss/templates/admin/pgboss/") for n in names)
    assert any(n.startswith("django_pgboss/static/pgboss/") for n in names)
    assert "django_pgboss/migrations/0001_initial.py" in names
    # The doctor and adoption compare the live schema with this manifest.
    assert "django_pgboss/schema/schema43.json" in names


def test_the_wheel_requires_no_settings_helper_at_run_time(wheel):
    (metadata_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = email.message_from_bytes(wheel.read(metadata_name))
    runtime = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(re.match(r"[\w.-]+", r).group().lower() for r in runtime) == [
        "croniter",
        "django",
        "psycopg",
        "python-dateutil",
    ]


def test_pgqueuer_is_only_in_the_bench_extra():
    # bench/peers.py's fourth system; the wheel's run-time requirements are checked above.
    extras = PROJECT["optional-dependencies"]
    assert [r for r in extras["peers"] if r.startswith("pgqueuer")] == ["pgqueuer[asyncpg,psycopg]==1.6.0"]
    assert not [
        name for name, rs in extras.items() if name != "peers" for r in rs if r.startswith("pgqueuer")
    ]


def test_django_environ_is_in_the_extras_of_the_code_that_imports_it():
    # tests/settings.py and bench/settings.py run with the test extra, example_project with the demo one.
    extras = PROJECT["optional-dependencies"]
    for extra in ("test", "demo"):
        assert any(r.startswith("django-environ") for r in extras[extra]), extra
    assert not any(r.startswith("django-environ") for r in PROJECT["dependencies"])


def test_every_module_of_the_package_imports_without_django_environ():
    # A fresh interpreter where `import environ` fails, configured by hand as a user's project would be.
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        sys.modules["environ"] = None
        import django
        from django.conf import settings
        settings.configure(
            INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                            "django.contrib.sessions", "django.contrib.messages", "django_pgboss"],
            DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "unused"}},
        )
        django.setup()
        import django_pgboss
        names = [m.name for m in pkgutil.walk_packages(django_pgboss.__path__, "django_pgboss.")]
        for name in names:
            importlib.import_module(name)
        print(len(names))
        """
    )
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 30
