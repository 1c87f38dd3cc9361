"""A documented import path kept working: Django's task framework or its backport, whichever is
installed. The code lives in django_pgboss.tasks.compat."""

from __future__ import annotations

from django_pgboss.tasks.compat import *  # noqa: F403
from django_pgboss.tasks.compat import __all__  # noqa: F401
