"""What ``--version`` says: django_pgboss's version and the pg-boss release and schema it ports.

``django_pgboss.__version__`` is the package's one version number (pyproject.toml reads it); this
module adds the pg-boss side, so a report or a bug ticket names both at once.
"""

from __future__ import annotations

from django_pgboss import __version__
from django_pgboss.constants import SCHEMA_VERSION

#: The pg-boss release whose schema and SQL semantics this version ports (its interoperability
#: tests run against pg-boss 12.38.0 itself, and 12.35.0 beside it).
PGBOSS_VERSION = "12.38"


def version_text() -> str:
    """One line: ``django_pgboss 0.1.0 (pg-boss 12.38, schema 46)``."""
    return f"django_pgboss {__version__} (pg-boss {PGBOSS_VERSION}, schema {SCHEMA_VERSION})"
