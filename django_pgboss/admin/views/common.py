"""What every admin page family shares: the LogEntry it leaves, permission checks, JSON shown for reading."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


def log_entry(
    request: HttpRequest, model: type, object_id: str, text: str, flag: int, message: str
) -> LogEntry:
    """One admin LogEntry for an object that may no longer exist (or has a composite key)."""
    user_id = request.user.pk
    if user_id is None:
        # The admin serves only logged-in staff; an anonymous request has nothing to act as.
        raise PermissionDenied
    return LogEntry.objects.create(
        user_id=user_id,
        content_type=ContentType.objects.get_for_model(model, for_concrete_model=False),
        object_id=object_id,
        object_repr=text[:200],
        action_flag=flag,
        change_message=message,
    )


def pretty_json(value: Any) -> str:
    """JSON indented for reading; an empty string for None."""
    if value is None:
        return ""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def require_permission(request: HttpRequest, permission: str) -> None:
    """Raise PermissionDenied (a 403) unless the user has ``pgboss.<permission>``."""
    if not request.user.has_perm(f"pgboss.{permission}"):
        raise PermissionDenied
