#!/usr/bin/env bash
# Builds the sdist and the wheel as a release would (python -m build), checks their metadata
# (twine check), installs the wheel into a fresh venv and runs it there, so a packaging mistake
# (a file left out of the wheel, a dependency not declared) fails CI: bash scripts/check_dist.sh
#
# It writes nothing into the checkout: the build runs in a temporary copy of the sources, which
# is also what a user building from a clone gets (no egg-info or build/ left from a dev install).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON_BIN:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pgboss-dist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/src"
cp "$repo/pyproject.toml" "$repo/README.md" "$repo/LICENSE" "$tmp/src/"
(cd "$repo" && git ls-files -z django_pgboss | tar --null -T - -cf -) | tar -xf - -C "$tmp/src"

"$python" -m venv "$tmp/tools"
"$tmp/tools/bin/python" -m pip install -q --disable-pip-version-check build twine
"$tmp/tools/bin/python" -m build -q --outdir "$tmp/dist" "$tmp/src" >/dev/null
"$tmp/tools/bin/python" -m twine check --strict "$tmp"/dist/*
wheel=$(ls "$tmp"/dist/*.whl)
sdist=$(ls "$tmp"/dist/*.tar.gz)
echo "check_dist: built $(basename "$wheel") and $(basename "$sdist")"

# The sdist holds what the wheel is built from: the migration SQL and the templates too.
listing=$(tar -tzf "$sdist")
for member in django_pgboss/sql/0001_initial.sql django_pgboss/templates/admin/pgboss/schedule_form.html; do
  grep -qx "[^/]*/$member" <<<"$listing" || { echo "check_dist: $member is missing from the sdist" >&2; exit 1; }
done

# A fresh venv with the wheel and nothing else from this checkout.
"$python" -m venv "$tmp/user"
"$tmp/user/bin/python" -m pip install -q --disable-pip-version-check "$wheel" "psycopg[binary]"
cd "$tmp"
"$tmp/user/bin/python" -m django_pgboss --version
mkdir "$tmp/project" && cd "$tmp/project"
"$tmp/user/bin/django-admin" startproject mysite .
cat >>mysite/settings.py <<'SETTINGS'
INSTALLED_APPS += ["django_pgboss"]
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "unused", "HOST": "127.0.0.1", "PORT": "1"}}
SETTINGS
# Without a database: the checks, the migrations (the SQL files they render), the admin templates.
"$tmp/user/bin/python" manage.py check
"$tmp/user/bin/python" - <<'PY'
import os

os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
import django

django.setup()
from django.db.migrations.loader import MigrationLoader
from django.template.loader import get_template

import django_pgboss
from django_pgboss.operations import render_sql

assert "/site-packages/" in django_pgboss.__file__, django_pgboss.__file__
loader = MigrationLoader(None, ignore_no_migrations=True)
names = sorted(name for app, name in loader.disk_migrations if app == "pgboss")
assert names and names[0] == "0001_initial", names
assert "CREATE TABLE" in render_sql("0001_initial.sql", "pgboss")
for template in ("admin/pgboss/schedule_form.html", "admin/pgboss/queue/change_form.html"):
    get_template(template)
print(f"check_dist: the wheel installs and runs: {len(names)} migrations, SQL, templates, checks")
PY
