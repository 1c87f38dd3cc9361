"""The monitor's wait and run histograms read in Python (django_pgboss.latency, pg-boss 12.38's
latency.js): percentiles, sums of histograms and the slots' bounds. Pure: no database.

The histograms the monitor writes, and the percentiles get_queue_stats() reads from them, are
tests/test_latency.py's.
"""

from __future__ import annotations

import math

import pytest

from django_pgboss.latency import LATENCY_SLOTS, add_bins, percentile, slot_upper_bounds


def slots(**counts: int) -> list[int]:
    """A histogram with ``counts`` (slot_<k>=n) in the named slots and 0 elsewhere."""
    bins = [0] * LATENCY_SLOTS
    for name, n in counts.items():
        bins[int(name.removeprefix("slot_"))] = n
    return bins


def test_a_percentile_is_read_within_its_slot_on_the_log_scale():
    # Slot 16 covers 10 ms·√2^15 to 10 ms·√2^16 (1.81 s to 2.56 s); half its jobs are half way in.
    bins = slots(slot_16=4)
    assert percentile(bins, 50) == pytest.approx(0.01 * math.sqrt(2) ** 15.5)
    assert percentile(bins, 100) == pytest.approx(0.01 * math.sqrt(2) ** 16)


def test_the_first_and_last_slots_have_one_edge_each():
    assert percentile(slots(slot_0=3), 99) == 0.01  # only known to be under 10 ms
    last = LATENCY_SLOTS - 1
    assert percentile(slots(**{f"slot_{last}": 1}), 50) == pytest.approx(0.01 * math.sqrt(2) ** (last - 1))


def test_an_empty_or_missing_histogram_has_no_percentile():
    assert percentile(None, 50) is None
    assert percentile([0] * LATENCY_SLOTS, 50) is None


def test_histograms_add_slot_by_slot():
    assert add_bins(slots(slot_1=1), slots(slot_1=2, slot_3=1)) == slots(slot_1=3, slot_3=1)
    assert add_bins(None, slots(slot_2=1)) == slots(slot_2=1)
    assert add_bins(None, None) is None


def test_the_slot_bounds_end_with_infinity():
    bounds = slot_upper_bounds()
    assert len(bounds) == LATENCY_SLOTS
    assert bounds[0] == 0.01 and bounds[-1] == math.inf
    assert bounds[16] == pytest.approx(0.01 * math.sqrt(2) ** 16)
