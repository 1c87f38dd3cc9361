"""Compatibility module: ``django_pgboss.tasks_compat``, the path 0.1 documented for Django's task
framework or its backport (whichever is installed), kept working.

New code imports from where the code lives: ``django_pgboss.tasks.compat``. Nothing inside the
package imports this module (an import contract checks it).
"""

from __future__ import annotations

from django_pgboss.tasks.compat import *  # noqa: F403
from django_pgboss.tasks.compat import __all__  # noqa: F401
