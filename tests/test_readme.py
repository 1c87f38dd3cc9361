"""The README's examples, run as written: a user's first code must work when pasted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from django_pgboss import boss
from django_pgboss.worker import Worker, registry
from django_pgboss.worker.registry import registrations
from tests.helpers import job_row

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def bash_block(marker: str) -> str:
    """The README's bash code block that contains ``marker``."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (block,) = [block for block in blocks if marker in block]
    return block


def python_block(marker: str) -> str:
    """The README's python code block that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (block,) = [block for block in blocks if marker in block]
    return block


def migration_namespace() -> dict:
    """The README's data migration, executed as the module Django would import."""
    namespace: dict = {"__name__": "shop.migrations.0002_queues"}
    exec(
        compile(python_block("# shop/migrations/0002_queues.py"), "README.md (migration)", "exec"), namespace
    )
    return namespace


@pytest.fixture
def clean_registry():
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)


@pytest.mark.django_db(transaction=True)
def test_the_readme_jobs_module_runs_under_the_worker(clean_registry):
    emails = []
    namespace = {"__name__": "shop.jobs", "send_the_email": emails.append}
    exec(compile(python_block("# shop/jobs.py"), "README.md (shop/jobs.py)", "exec"), namespace)
    registration = registrations()["emails"]
    assert (registration.label, registration.concurrency) == ("shop.jobs.send_email", 4)

    boss.create_queue("emails-dead")
    boss.create_queue("emails", retry_limit=3, retry_backoff=True, dead_letter="emails-dead")
    job_id = boss.send("emails", {"order": 7}, priority=5)
    Worker([registration], burst=True).run()
    assert emails == [{"order": 7}]
    assert job_row(job_id, "state", "output") == ("completed", {"sent": True})


@pytest.mark.django_db
def test_the_readme_send_fetch_and_settle_example_runs(clean_registry):
    from django.db import transaction

    code = python_block("boss.fetch(")
    created = []

    class Order:
        class objects:  # stands in for the user's model manager
            @staticmethod
            def create(*args, **kwargs):
                created.append(kwargs)
                return type("order", (), {"pk": 42})()

    sent = []

    def send_the_email(data):
        sent.append(data)

    # The queues come from the README's data migration, as in a project that followed it.
    create_queues = migration_namespace()["create_queues"]
    create_queues(None, None)
    namespace = {"Order": Order, "send_the_email": send_the_email, "transaction": transaction}
    exec(compile(code, "README.md", "exec"), namespace)  # create(...) passes Ellipsis: valid as written
    assert sent == [{"order": 42}]
    (job,) = boss.find_jobs("emails")
    assert (job.state, job.output, job.priority) == ("completed", {"sent": True}, 5)


@pytest.mark.django_db
def test_the_readme_migration_creates_the_queues_and_a_second_run_leaves_changed_options_alone():
    namespace = migration_namespace()
    migration = namespace["Migration"]
    assert ("pgboss", "0001_initial") in migration.dependencies
    namespace["create_queues"](None, None)
    emails = boss.get_queue("emails")
    assert emails is not None
    assert (emails.retry_limit, emails.retry_backoff, emails.dead_letter) == (3, True, "emails-dead")
    # As the README says: create_queue() leaves an existing queue's options alone; update_queue changes them.
    boss.update_queue("emails", retry_limit=5)
    namespace["create_queues"](None, None)
    assert boss.get_queue("emails").retry_limit == 5


@pytest.fixture
def empty_database():
    """A database of its own on the test server, for a project that migrates from scratch."""
    db = settings.DATABASES["default"]
    params = {
        "host": db["HOST"] or "127.0.0.1",
        "port": db["PORT"] or 5432,
        "user": db["USER"],
        "password": db["PASSWORD"] or None,
    }
    name = f"readme_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield {**params, "name": name}
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_the_readme_install_commands_install_a_package_a_new_project_migrates_and_uses(
    tmp_path, empty_database
):
    """Every command of the README's install block, as written, in a fresh venv: from the clone,
    as a built wheel and from a git URL; then a startproject set up as the README says (settings,
    migrate pgboss, the data migration) runs on the installed package, not on this checkout."""
    # The clone the README calls ./django_pgboss: the files a clone has, committed to git, so
    # the git URL line has a repository to clone and the build leaves this checkout untouched.
    clone = tmp_path / "django_pgboss"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, clone / name)
    shutil.copytree(
        REPO / "django_pgboss", clone / "django_pgboss", ignore=shutil.ignore_patterns("__pycache__")
    )
    git = ["git", "-c", "user.name=readme", "-c", "user.email=readme@example.com"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "clone"]):
        subprocess.run([*git, *command], cwd=clone, check=True, capture_output=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV"}
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"

    def run(command: str, cwd: Path = tmp_path) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    install = [
        line
        for line in bash_block('pip install ./django_pgboss "psycopg[binary]"').splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(install) == 5
    for line in install:
        run(line)
    assert (clone / "dist" / "django_pgboss-0.1.0-py3-none-any.whl").is_file()
    assert list((clone / "dist").glob("django_pgboss-0.1.0.tar.gz"))

    # A new project, set up as the README's "Use it in a project" says.
    run("django-admin startproject mysite . && python manage.py startapp shop")
    # The settings block elides the rest of DATABASES ("..."): its PGBOSS dict is taken as written.
    (pgboss_setting,) = re.findall(
        r"^PGBOSS = \{.*?^\}", python_block("# settings.py\nINSTALLED_APPS"), re.M | re.S
    )
    settings_block: dict = {}
    exec(pgboss_setting, settings_block)
    db = empty_database
    with open(tmp_path / "mysite" / "settings.py", "a") as project_settings:
        project_settings.write(
            textwrap.dedent(
                f"""
                INSTALLED_APPS += ["shop", "django_pgboss"]
                DATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": {db["name"]!r},
                    "USER": {db["user"]!r}, "PASSWORD": {db["password"] or ""!r}, "HOST": {db["host"]!r},
                    "PORT": {str(db["port"])!r}}}}}
                PGBOSS = {settings_block["PGBOSS"]!r}
                """
            )
        )
    (tmp_path / "shop" / "models.py").write_text(
        "from django.db import models\n\n\nclass Order(models.Model):\n    total = models.IntegerField(default=0)\n"
    )
    run("python manage.py makemigrations shop")
    (tmp_path / "shop" / "migrations" / "0002_queues.py").write_text(
        python_block("# shop/migrations/0002_queues.py")
    )
    (migrate,) = [line for line in bash_block("migrate pgboss").splitlines() if "migrate pgboss" in line]
    run(migrate.split("#")[0])
    run("python manage.py migrate && python manage.py check")
    out = run(
        'python manage.py shell -c "import django_pgboss; from django_pgboss import boss; '
        "q = boss.get_queue('emails'); print(django_pgboss.__file__); "
        "print(q.retry_limit, q.dead_letter, boss.send('emails', {'order': 1}) is not None)\""
    )
    module, result = out.strip().splitlines()[-2:]
    assert module.startswith(str(venv)), module
    assert result == "3 emails-dead True"


def test_the_pypi_install_form_appears_only_as_what_it_will_be_once_published():
    # django-pgboss is not on PyPI yet: a command that installs it by that name fails today, so
    # README.md and docs/ show it only in a block introduced as what works once it is published
    # (or, inline, on a line that says so). Each other install line was run in a fresh venv.
    # By name from an index; "django-pgboss[otel] @ git+..." names a git URL, which works today.
    by_name = re.compile(r"pip install (?:--upgrade )?\"?django-pgboss(?:\[[a-z,]+\])?\"?(?:\s|$)(?!\s*@)")
    unlabelled = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text()
        for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
            introduction = text[max(block.start() - 300, 0) : block.start()]
            for line in block.group(1).splitlines():
                command = line.split("#")[0]
                if by_name.search(command) and "published" not in introduction:
                    unlabelled.append(f"{path.name}: {line.strip()}")
    assert unlabelled == []
