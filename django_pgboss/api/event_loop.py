"""Boss's sync methods refuse to run on a running event loop, naming their async twin.

Django raises SynchronousOnlyOperation ("You cannot call this from an async context - use a
thread or sync_to_async.") when a database connection is touched from a thread that runs an
event loop, because the call would block every coroutine of that loop. A Boss call there would
hit the same error deep inside a cursor; this check raises it before any argument is read or any
statement runs, and says what to call instead: ``await boss.asend(...)`` for ``boss.send(...)``.
``DJANGO_ALLOW_ASYNC_UNSAFE``, Django's own switch for this check (a notebook, a shell), turns
this one off too.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import SynchronousOnlyOperation

C = TypeVar("C", bound=type)


def public_methods(cls: type) -> list[str]:
    """The public methods ``cls`` itself defines, in definition order, except those marked
    ``runs_no_statement``: for Boss, each of these reaches the database, so each is guarded here
    and has an async twin (api/async_twins.py)."""
    return [
        name
        for name, member in vars(cls).items()
        if not name.startswith("_")
        and inspect.isfunction(member)
        and not getattr(member, "_runs_no_statement", False)
    ]


F = TypeVar("F", bound=Callable[..., Any])


def runs_no_statement(method: F) -> F:
    """Mark a public method that reaches no database (``Boss.worker()`` builds an object): it
    needs no async twin, and may be called on a running event loop."""
    method._runs_no_statement = True  # type: ignore[attr-defined]  # a marker on the function object
    return method


def refuse_in_event_loop(names: Callable[[type], list[str]]) -> Callable[[C], C]:
    """A class decorator: each method ``names(cls)`` lists raises SynchronousOnlyOperation when
    called on a thread with a running event loop, naming ``a<method>`` as the one to await."""

    def decorate(cls: C) -> C:
        for name in names(cls):
            setattr(cls, name, _guarded(getattr(cls, name), f"{cls.__name__}.{name}", f"a{name}"))
        return cls

    return decorate


def refuse_on_running_loop(call: str, instead: str) -> None:
    """Raise SynchronousOnlyOperation when the calling thread runs an event loop: ``call`` (what
    was called, "Boss.send()") would block it; ``instead`` names what to await instead."""
    if _get_running_loop() is not None and not os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE"):
        raise SynchronousOnlyOperation(
            f"{call} was called from a running event loop, where a blocking database call would "
            f"stall every coroutine: use `{instead}` instead (or run the sync call in a thread: "
            "sync_to_async)."
        )


# asyncio's own lookup, which answers None off a loop (the public get_running_loop() raises, and
# raising costs more than this check on every sync call).
_get_running_loop = asyncio._get_running_loop


def _guarded(method: Callable[..., Any], label: str, twin: str) -> Callable[..., Any]:
    call, instead = f"{label}()", f"await boss.{twin}(...)"

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _get_running_loop() is not None:
            refuse_on_running_loop(call, instead)
        return method(*args, **kwargs)

    return guarded
