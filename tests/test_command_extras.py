"""The commands without an optional extra installed: a command that needs one says which, in one
line, before it starts anything; one that can do without it (traces) runs as usual. Each command
runs as a process in which the extra's module is made unimportable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from django_pgboss import boss
from django_pgboss.observability.extras import METRICS_MISSING
from tests.processes import REPO, worker_env

pytestmark = pytest.mark.django_db(transaction=True)

# A None in sys.modules makes every import of that module (and of its submodules) raise
# ModuleNotFoundError, as when the package is not installed; then the command runs as manage.py
# would run it. The suite's URLconf routes the metrics view, which a project without
# prometheus-client would not, so the child's URLconf is an empty one.
_WITHOUT = """
import sys
import types

sys.modules[{module!r}] = None
urls = types.ModuleType("urls_without_metrics")
urls.urlpatterns = []
sys.modules[urls.__name__] = urls
import tests.settings

tests.settings.ROOT_URLCONF = urls.__name__
from django.core.management import execute_from_command_line

execute_from_command_line(["manage.py", *sys.argv[1:]])
"""


def run_without(module: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT.format(module=module), *argv],
        cwd=REPO,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["pgboss_work", "pgboss_monitor"])
def test_metrics_port_without_prometheus_client_is_one_line_and_exit_status_1(command):
    boss.create_queue("echo")
    completed = run_without("prometheus_client", command, "--metrics-port", "0", "--queue", "echo")
    assert completed.returncode == 1
    assert completed.stderr == f"CommandError: {METRICS_MISSING}\n"
    assert completed.stdout == ""


def test_the_same_command_with_prometheus_client_passes_the_check():
    # The check refuses only a missing library: with it installed, the same command runs.
    boss.create_queue("echo")
    completed = run_without("a_module_nobody_installs", "pgboss_monitor", "--once", "--metrics-port", "0")
    assert completed.returncode == 0, completed.stderr
    assert "monitor pass:" in completed.stdout


def test_pgboss_work_runs_its_jobs_without_opentelemetry():
    # Traces are optional: without the API every span is a no-op, and nothing asks for the extra.
    boss.create_queue("echo")
    boss.send("echo", {"n": 1})
    completed = run_without("opentelemetry", "pgboss_work", "--burst", "--queue", "echo")
    assert completed.returncode == 0, completed.stderr
    assert "worked 1 job(s): 1 completed" in completed.stdout
    assert "Traceback" not in completed.stderr


def test_pgboss_monitor_runs_its_pass_without_opentelemetry():
    completed = run_without("opentelemetry", "pgboss_monitor", "--once")
    assert completed.returncode == 0, completed.stderr
    assert "monitor pass:" in completed.stdout
    assert "Traceback" not in completed.stderr


def test_routing_the_metrics_view_without_prometheus_client_names_the_extra():
    # The suite's URLconf routes the metrics view: loading it without the library is Django's
    # ImproperlyConfigured naming the extra, at the URL check, not an ImportError from the view.
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['prometheus_client'] = None\n"
            "from django.core.management import execute_from_command_line\n"
            "execute_from_command_line(['manage.py', 'check'])",
        ],
        cwd=REPO,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 1
    assert completed.stderr.rstrip().splitlines()[-1] == (
        f"django.core.exceptions.ImproperlyConfigured: {METRICS_MISSING}"
    )
