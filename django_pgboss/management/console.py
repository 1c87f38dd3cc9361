"""Logging set-up shared by the worker and monitor commands."""

from __future__ import annotations

import logging


def configure_logging(verbosity: int) -> None:
    """Log django_pgboss's records to stderr at the command's verbosity, unless the project's
    LOGGING already routes them (then its configuration wins)."""
    logger = logging.getLogger("django_pgboss")
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
