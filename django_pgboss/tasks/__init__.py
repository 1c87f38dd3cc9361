"""The ``django.tasks`` backend (backend.py) and the one module that hides whether Django's own
task framework or the django-tasks backport provides it (compat.py)."""
