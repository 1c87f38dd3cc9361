"""The demo's live progress: redrawn in place on a terminal, plain lines in a pipe or a CI log."""

from __future__ import annotations

from io import StringIO

from example_project.shop.demo.counts import QueueCounts
from example_project.shop.demo.display import LiveProgress


def progress(out: StringIO, *, tty: bool) -> LiveProgress:
    counts = {"order-emails": QueueCounts(queued=2, completed=30, failed=1, retried=4, dead_lettered=1)}
    # refresh: an hour, so only event() and stop() draw (no timing in the test).
    return LiveProgress(
        out, lambda: counts, lambda: "orders coming in\n31 orders", tty=tty, refresh=3600, plain_every=3600
    )


def test_on_a_terminal_events_print_above_a_table_redrawn_in_place():
    out = StringIO()
    live = progress(out, tty=True)
    live.start()
    live.event("card declined for order 6")
    live.stop()
    text = out.getvalue()

    event, table = text.split("\n", 1)
    assert event.endswith("] card declined for order 6")
    # Drawn after the event (4 lines: header, one queue, two status lines), then moved up over
    # and cleared (ANSI "cursor up 4 lines", "clear to the end") before the last draw.
    first, last = table.split("\x1b[4F\x1b[J")
    assert first.splitlines()[0].split() == [
        "queue", "queued", "active", "completed", "failed", "retried", "dead", "letters", "jobs/s",
    ]  # fmt: skip
    assert last.splitlines()[1].split() == ["order-emails", "2", "0", "30", "1", "4", "1", "0.0"]
    assert last.splitlines()[2].endswith("s: orders coming in")
    assert last.splitlines()[3].endswith("s: 31 orders")
    assert all(len(line) < 80 for line in (first + last).splitlines())  # fits an 80-column terminal


def test_elsewhere_it_prints_plain_lines_without_escape_codes():
    out = StringIO()
    live = progress(out, tty=False)
    live.start()
    live.event("card declined for order 6")
    live.stop()
    text = out.getvalue()

    assert "\x1b" not in text
    event, total = text.splitlines()
    assert event.endswith("] card declined for order 6")
    assert total.endswith(
        "] 30 completed, 1 failed, 4 retried, 2 queued, 0 active, 0.0 jobs/s; orders coming in; 31 orders"
    )
