"""bench/settings.py plus tests.fleetapp, whose jobs.py holds the mixed fleet's handlers (bench/mixed_fleet.py).

The worker's connections persist, as a deployment's would: each handler runs in a transaction of its
own, and under Django's default CONN_MAX_AGE = 0 each would open a connection.
"""

from __future__ import annotations

from bench.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.fleetapp"]  # noqa: F405
DATABASES["default"]["CONN_MAX_AGE"] = 60  # noqa: F405
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # noqa: F405
