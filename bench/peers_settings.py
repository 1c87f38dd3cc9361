"""bench/settings.py plus bench.peersapp, whose jobs.py holds the no-op handler of bench/peers.py."""

from __future__ import annotations

import os

from bench.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.peersapp"]  # noqa: F405

# PEERS_CONN_MAX_AGE=N (a --variant of bench/peers.py): the worker's connections persist N seconds
# instead of Django's default 0 (closed after each job by the handler threads).
if os.environ.get("PEERS_CONN_MAX_AGE"):
    DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ["PEERS_CONN_MAX_AGE"])  # noqa: F405

# PGBOSS_BACKEND=citus or citus-distributed (bench/citus_scale.py): the database is a Citus
# coordinator in that mode.
if os.environ.get("PGBOSS_BACKEND"):
    PGBOSS["BACKEND"] = os.environ["PGBOSS_BACKEND"]  # noqa: F405
