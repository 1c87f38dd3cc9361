"""The monitor's wait and run histograms read in Python (pg-boss 12.38's latency.js), pure.

A histogram is LATENCY_SLOTS counts: slot 0 holds times under 10 ms, slot k (1 to LATENCY_BINS)
times from 10 ms · √2^(k-1) to 10 ms · √2^k, and the last slot every time past the last bin
(about 23 hours). ``QueueInfo.wait_bins`` and ``StatsPoint.run_bins`` are such lists; the SQL
that fills them is plans/latency.py. Histograms add, so sum them (add_bins()) over points or
queues first and read a percentile from the sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from django_pgboss.plans.latency import LATENCY_BINS, LATENCY_MIN_SECONDS, LATENCY_SLOTS

__all__ = [
    "LATENCY_BINS",
    "LATENCY_MIN_SECONDS",
    "LATENCY_SLOTS",
    "add_bins",
    "percentile",
    "slot_upper_bounds",
]


def slot_upper_bounds() -> list[float]:
    """Each slot's upper edge in seconds, in slot order: 0.01 for slot 0, 0.01 · √2^k for slot k,
    and infinity for the last slot, which has none (the bounds of a Prometheus histogram)."""
    return [LATENCY_MIN_SECONDS * math.sqrt(2) ** k for k in range(LATENCY_BINS + 1)] + [math.inf]


def add_bins(a: Sequence[int] | None, b: Sequence[int] | None) -> list[int] | None:
    """Two histograms as one, added slot by slot, as if their jobs had been recorded together
    (pg-boss's addBins). None counts as empty; the sum is None only when both are."""
    if b is None:
        return None if a is None else list(a)
    if a is None:
        return list(b)
    return [n + (b[i] if i < len(b) else 0) for i, n in enumerate(a)]


def percentile(bins: Sequence[int] | None, p: float) -> float | None:
    """The time in seconds below which ``p`` percent (1 to 100) of a histogram's jobs fall,
    estimated within its slot (pg-boss's percentile(), the same arithmetic): ``percentile(bins,
    95)`` is the p95. None for no histogram, or one that holds no job.

    A percentile in slot 0 is only known to be under 10 ms, so it reads as 10 ms; one in the last
    slot only to be past its lower edge, so it reads as that edge. Elsewhere it is placed within
    its slot by how far into the slot's jobs the target falls, on the slot's log scale. ``p`` is
    checked by the callers (arguments.percentiles()); this raises ValueError for one out of range.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 1 <= p <= 100:
        raise ValueError(f"p must be a percent from 1 to 100, such as 95, not {p!r}")
    if bins is None:
        return None
    total = sum(bins)
    if total == 0:
        return None
    # Walk to the slot holding the target job. A valid histogram always reaches it; the last slot
    # stops the walk regardless, so counts that do not add up cannot run past the end.
    target = p / 100 * total
    k = 0
    seen = 0
    while k < len(bins) - 1 and not (bins[k] > 0 and seen + bins[k] >= target):
        seen += bins[k]
        k += 1
    if k == 0:
        return LATENCY_MIN_SECONDS
    low = LATENCY_MIN_SECONDS * math.sqrt(2) ** (k - 1)
    if k == len(bins) - 1:
        return low
    return low * math.sqrt(2) ** ((target - seen) / bins[k])
