"""The optional libraries behind observability's extras, and the one line that names each extra.

A command that needs one (``--metrics-port`` needs prometheus-client) asks here before it starts
anything, so a missing extra is one line naming what to install, never an import traceback from
deep inside a worker that already connected to its database.
"""

from __future__ import annotations

import importlib

#: What a missing prometheus-client is reported with (the ``metrics`` extra).
METRICS_MISSING = "django_pgboss's metrics need prometheus-client: pip install 'django-pgboss[metrics]'"


def importable(module: str) -> bool:
    """Whether ``module`` imports. Imported rather than looked up (importlib.util.find_spec), since
    a package that is present but broken, or a stand-in that refuses to import, fails only then."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def metrics_available() -> bool:
    """Whether prometheus-client, which the metrics need, imports."""
    return importable("prometheus_client")
