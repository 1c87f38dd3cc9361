#!/usr/bin/env python
"""The example project's manage.py: python example_project/manage.py <command>."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    # The project package is example_project/, imported from the repository root.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
