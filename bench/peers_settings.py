"""bench/settings.py plus bench.peersapp, whose jobs.py holds the no-op handler of bench/peers.py."""

from __future__ import annotations

from bench.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.peersapp"]  # noqa: F405
