"""A jobs module that cannot be imported, for the worker command's error handling test."""

from __future__ import annotations

import a_module_that_does_not_exist  # noqa: F401
