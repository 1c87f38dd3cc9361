"""SQL for the monitor's wait and run histograms (pg-boss 12.38's latency bins), text only.

A counting pass records, per queue, the wait times (started_on less the later of created_on and
start_after) and the run times (completed_on less started_on) of the jobs that finished in its
window, as two histograms of LATENCY_SLOTS counts. Slot 0 holds times under 10 ms, slots 1 to
LATENCY_BINS each grow by a factor of √2 (slot k covers 10 ms · √2^(k-1) to 10 ms · √2^k), and
the last slot holds everything past about 23 hours. Log-spaced bins, because waits and runs span
six orders of magnitude; a percentile read from them lies in the same bin as the exact one, and
histograms add, so a reader can sum them over passes, buckets or queues before reading one.

They are stored in slot order with NULL where no job landed (a NULL costs a bit, a count four
bytes, and most slots are empty), exactly as pg-boss stores them, so a Node and a Python monitor
write the same arrays for the same jobs: the slot arithmetic below is pg-boss's, down to the
float8 literals, which Python spells as JavaScript does (both print the shortest repr).
"""

from __future__ import annotations

import math

#: The √2-wide bins between the first and the last slot.
LATENCY_BINS = 46
#: Every slot of a histogram: under 10 ms, the bins, and past the last bin.
LATENCY_SLOTS = LATENCY_BINS + 2
#: The lower edge of slot 1, in seconds.
LATENCY_MIN_SECONDS = 0.01

# Both slots of a job travel packed in one integer (wait * 64 + run), so the aggregate builds one
# array under one filter: pg-boss measured two arrays, each with its own filter, at twice the cost.
_PACK = 64

# date_part rather than extract: extract returns numeric since PostgreSQL 14, and numeric
# arithmetic on every finished job was a large share of the histograms' cost (pg-boss's finding).
WAIT_SECONDS = "date_part('epoch', (j.started_on - GREATEST(j.created_on, j.start_after)))"
RUN_SECONDS = "date_part('epoch', (j.completed_on - j.started_on))"

#: A measured histogram in which nothing finished: every slot NULL, not a NULL array, so a pass
#: that counted says so, as its deltas do.
EMPTY_BINS = "'{" + ",".join(["NULL"] * LATENCY_SLOTS) + "}'::int[]"


def latency_slot(seconds: str) -> str:
    """The slot of a duration (SQL float8 expression ``seconds``): ln(t / 10 ms) / ln(√2), plus one,
    clamped to slot 0 below 10 ms (a zero or negative duration, stamps of two clocks, included)
    and to the last slot past the end. Written out rather than width_bucket(), as pg-boss does."""
    low = repr(math.log(LATENCY_MIN_SECONDS))
    width = repr(math.log(2) / 2)
    raw = f"floor((ln(GREATEST(({seconds})::float8, 0.001::float8)) - {low}::float8) / {width}::float8)::int + 1"
    return f"LEAST(GREATEST({raw}, 0), {LATENCY_SLOTS - 1})"


def packed_slots() -> str:
    """An aggregate over finished jobs ``j``: the array of their packed (wait, run) slots, NULL when
    none finished. Only completed and failed jobs that were started: a cancelled job has no run."""
    return (
        f"array_agg({latency_slot(WAIT_SECONDS)} * {_PACK} + {latency_slot(RUN_SECONDS)})\n"
        "                FILTER (WHERE j.state IN ('completed', 'failed') AND j.started_on IS NOT NULL)"
    )


def packed_counts(packed: str) -> str:
    """A lateral join (alias ``latency``) that counts the packed array ``packed`` by value once:
    at most LATENCY_SLOTS² rows however many jobs finished, which both histograms read."""
    return f"""LEFT JOIN LATERAL (
        SELECT array_agg(g.p) AS ps, array_agg(g.n) AS ns
        FROM (SELECT p, count(*)::int AS n FROM unnest({packed}) AS u(p) GROUP BY p) g
      ) latency ON true"""


def histogram(which: str) -> str:
    """One histogram (``which`` is "wait" or "run") from packed_counts(): every slot in slot order,
    NULL where no job landed. floor() of a float division, as pg-boss writes it, and mod() for
    its %, which a statement with named parameters would read as one."""
    if which not in {"wait", "run"}:
        raise ValueError(f"{which!r} is not a histogram")
    slot = f"floor(p / {_PACK}.0)::int" if which == "wait" else f"mod(p, {_PACK})::int"
    return f"""(SELECT array_agg(c.n ORDER BY s.slot)
          FROM generate_series(0, {LATENCY_SLOTS - 1}) AS s(slot)
            LEFT JOIN (SELECT {slot} AS slot, sum(n)::int AS n
                       FROM unnest(latency.ps, latency.ns) AS u(p, n) GROUP BY 1) c ON c.slot = s.slot)"""
