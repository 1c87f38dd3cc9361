"""dateutil's rrule search, bounded by a deadline and a horizon it looks at from inside. Pure.

Within one next(), dateutil's rrule searches period after period for the next occurrence, up to
the year 9999, and checks UNTIL only against occurrences it has found: a rule whose parts never
fall together (BYSETPOS beyond its set, an ordinal weekday a month lacks, an INTERVAL that never
lands on 29 February) is searched for seconds or, hourly, minutes, with nothing a caller can
interrupt. Its one step per period is _iterinfo's dayset method (and, below daily, its timeset
method), so recurrence/expressions.py evaluates its rules with ``bounded()`` ones: a copy of
rrule._iter that builds a subclass of _iterinfo whose methods look at the calling thread's
``search.deadline`` (every 256 periods, raising SearchTimedOut) and ``search.horizon`` (raising
SearchPastHorizon), so that a windowed reading ends its search at the end of its window instead of
at the next occurrence, however far that is. dateutil's module is left as it is: the copy of _iter
looks its _iterinfo up in a namespace of its own.
"""

from __future__ import annotations

import datetime as dt
import threading
import types
from typing import Any

from dateutil import rrule as dateutil_rrule

#: The calling thread's bounds: ``deadline`` (with its ``clock``), ``horizon`` (naive wall time)
#: and the periods searched so far, ``steps``.
search = threading.local()


class SearchTimedOut(Exception):
    """Raised from inside dateutil's search when the walk's deadline has passed."""

    def __init__(self, year: int) -> None:
        super().__init__(year)
        self.year = year


class SearchPastHorizon(Exception):
    """Raised from inside dateutil's search once it has passed the walk's horizon."""


# dateutil's private names, read through vars(): its type stubs do not declare them.
_ITERINFO: Any = vars(dateutil_rrule)["_iterinfo"]
_ITER: Any = vars(dateutil_rrule.rrule)["_iter"]


class _BoundedIterinfo(_ITERINFO):
    # No __slots__ of its own: _iterinfo.__init__ sets every name of ``self.__slots__`` to None,
    # which must still find the base class's.

    def _step(self, year: int, month: int, day: int) -> None:
        self._day = (year, month, day)
        horizon = getattr(search, "horizon", None)
        if horizon is not None:
            freq = self.rrule._freq
            if freq == dateutil_rrule.YEARLY:
                beyond = year > horizon.year
            elif freq == dateutil_rrule.MONTHLY:
                beyond = (year, month) > (horizon.year, horizon.month)
            else:
                beyond = dt.date(year, month, day) > horizon.date()
            if beyond:
                raise SearchPastHorizon
        deadline = getattr(search, "deadline", None)
        if deadline is not None:
            search.steps += 1
            if search.steps % 256 == 0 and search.clock() > deadline:
                raise SearchTimedOut(year)

    def ydayset(self, year: int, month: int, day: int) -> Any:
        self._step(year, month, day)
        return super().ydayset(year, month, day)

    def mdayset(self, year: int, month: int, day: int) -> Any:
        self._step(year, month, day)
        return super().mdayset(year, month, day)

    def wdayset(self, year: int, month: int, day: int) -> Any:
        self._step(year, month, day)
        return super().wdayset(year, month, day)

    def ddayset(self, year: int, month: int, day: int) -> Any:
        self._step(year, month, day)
        return super().ddayset(year, month, day)

    # A rule more frequent than daily steps through a day's hours, minutes or seconds between two
    # dayset calls, so the horizon is looked at here too, with the day of the last dayset (which
    # may be a day behind: the check then stops later, never earlier).
    def _at(self, hour: int, minute: int, second: int) -> None:
        horizon = getattr(search, "horizon", None)
        day: tuple[int, int, int] | None = getattr(self, "_day", None)
        if horizon is not None and day is not None and dt.datetime(*day, hour, minute, second) > horizon:
            raise SearchPastHorizon

    def htimeset(self, hour: int, minute: int, second: int) -> Any:
        self._at(hour, minute, second)
        return super().htimeset(hour, minute, second)

    def mtimeset(self, hour: int, minute: int, second: int) -> Any:
        self._at(hour, minute, second)
        return super().mtimeset(hour, minute, second)

    def stimeset(self, hour: int, minute: int, second: int) -> Any:
        self._at(hour, minute, second)
        return super().stimeset(hour, minute, second)


_bounded_iter = types.FunctionType(
    _ITER.__code__,
    {**vars(dateutil_rrule), "_iterinfo": _BoundedIterinfo},
    _ITER.__name__,
    _ITER.__defaults__,
    _ITER.__closure__,
)


class _BoundedRule(dateutil_rrule.rrule):
    """dateutil's rrule, searched by the bounded copy of its _iter (see above)."""

    _iter = _bounded_iter

    def replace(self, **kwargs: Any) -> _BoundedRule:
        return bounded(super().replace(**kwargs))


def bounded(rule: dateutil_rrule.rrule) -> _BoundedRule:
    """``rule`` (dateutil's, as rrulestr() made it), from now on searched within the calling
    thread's bounds; replace() keeps that for the rules it makes."""
    rule.__class__ = _BoundedRule
    return rule  # type: ignore[return-value]
