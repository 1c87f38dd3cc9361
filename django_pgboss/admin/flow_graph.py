"""A flow drawn as a server-side SVG graph, in the style of admin/charts.py: no JavaScript.

Pure: it takes a flow's jobs (their states, which are blocked) and edges, and returns SVG text.
Jobs are laid out in layers, top to bottom, by their longest path from a job with no parents, so
every edge points down. A layer wider than COLUMNS jobs wraps onto more rows, and one with more
than MAX_PER_LAYER shows that many and a summary box counting the rest by state: a fan-out to
9,999 children stays a drawing that reads on a phone. The drawing is WIDTH units wide whatever the
flow, two boxes side by side, so on a phone (about 340 px of content) its text shows at about 13
px; static/pgboss/admin.css caps its width on a desktop so the text does not grow past twice that.

A job's state is told by more than colour: each state has an Okabe-Ito colour, a symbol and its
name written in the box. What the flow waits on is marked too: a job failed, cancelled or deleted
whose children it keeps blocked gets a thick dashed border and "holds up"; a job not finished
whose parents all completed, a thick border and "next".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html import escape

from django.utils.safestring import SafeString, mark_safe

#: The drawing's width in SVG units (the charts' too) and its box sizes.
WIDTH = 400
COLUMNS = 2
BOX_W, BOX_H = 185, 62
GAP_X, GAP_Y = 10, 44
MARGIN = 10
FONT = 15
#: Most jobs drawn per layer; the rest are counted in a summary box.
MAX_PER_LAYER = 7
#: Most characters of a queue name written in a box (the full name is in its tooltip).
NAME_CHARS = 19


@dataclass(frozen=True, slots=True)
class StateStyle:
    """How a job state is drawn: border colour, fill, and the symbol written before its name."""

    colour: str
    fill: str
    symbol: str


STYLES: dict[str, StateStyle] = {
    "blocked": StateStyle("#777777", "#f0f0f0", "‖"),
    "created": StateStyle("#56B4E9", "#eaf6fd", "○"),
    "retry": StateStyle("#E69F00", "#fdf3e0", "↻"),
    "active": StateStyle("#0072B2", "#e0eef7", "▶"),
    "completed": StateStyle("#009E73", "#e0f4ee", "✓"),
    "cancelled": StateStyle("#CC79A7", "#f8ebf3", "⊘"),
    "failed": StateStyle("#D55E00", "#fbe9df", "✗"),
    "deleted": StateStyle("#999999", "#ffffff", "-"),
}


@dataclass(frozen=True, slots=True)
class Node:
    """One job as the drawing needs it: its key (queue, id), its shown state, and its link."""

    name: str
    id: str
    state: str  # a job state, "blocked" for a created job still blocked, or "deleted"
    url: str | None = None
    current: bool = False


def shown_state(state: str | None, blocked: bool) -> str:
    """The state a job is drawn with: "blocked" for a waiting job still blocked, "deleted" for one gone."""
    if state is None:
        return "deleted"
    if blocked and state in ("created", "retry"):
        return "blocked"
    return state


def layers(
    keys: Iterable[tuple[str, str]], edges: Iterable[tuple[tuple[str, str], tuple[str, str]]]
) -> list[list[tuple[str, str]]]:
    """The jobs by layer: a job's layer is the longest path to it from a job without parents.
    Within a layer, jobs keep the (name, id) order. A flow has no cycle (flow() refuses one); a
    malformed one is still drawn, its remaining jobs in one last layer."""
    ordered = sorted(set(keys))
    parents: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    children: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for parent, child in edges:
        parents[child].add(parent)
        children[parent].add(child)
    depth: dict[tuple[str, str], int] = {}
    waiting = {key: len(parents[key]) for key in ordered}
    ready = [key for key in ordered if waiting[key] == 0]
    while ready:
        key = ready.pop()
        depth.setdefault(key, 0)
        for child in children[key]:
            depth[child] = max(depth.get(child, 0), depth[key] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    result: list[list[tuple[str, str]]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for key in ordered:
        if key in depth:
            result[depth[key]].append(key)
    leftovers = [key for key in ordered if key not in depth]
    if leftovers:
        result.append(leftovers)
    return result


def holding_up(
    nodes: Mapping[tuple[str, str], Node], edges: Iterable[tuple[tuple[str, str], tuple[str, str]]]
) -> dict[tuple[str, str], str]:
    """What the flow waits on: "stuck" for a job that failed, was cancelled or deleted and has
    children (they stay blocked until it is retried or resumed), "next" for a job not finished
    whose parents all completed (the flow goes on when it does)."""
    parents: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    has_children: set[tuple[str, str]] = set()
    for parent, child in edges:
        parents[child].append(parent)
        has_children.add(parent)
    held: dict[tuple[str, str], str] = {}
    for key, node in nodes.items():
        if node.state in ("failed", "cancelled", "deleted"):
            if key in has_children:
                held[key] = "stuck"
        elif node.state != "completed" and all(
            nodes[p].state == "completed" for p in parents[key] if p in nodes
        ):
            held[key] = "next"
    return held


def _text(x: float, y: float, content: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(content)}</text>'


def flow_svg(
    nodes: Mapping[tuple[str, str], Node],
    edges: Iterable[tuple[tuple[str, str], tuple[str, str]]],
    *,
    label: str,
) -> SafeString:
    """The flow as an SVG: each job a box (linked to its page), each dependency an arrow from the
    parent down to the child. ``label`` is the drawing's accessible name."""
    edges = list(edges)
    held = holding_up(nodes, edges)
    placed: dict[tuple[str, str], tuple[float, float]] = {}
    boxes: list[str] = []
    summaries: list[str] = []
    y = MARGIN
    for layer in layers(nodes, edges):
        shown, rest = layer[:MAX_PER_LAYER], layer[MAX_PER_LAYER:]
        cells = len(shown) + (1 if rest else 0)
        for start in range(0, cells, COLUMNS):
            row = list(range(start, min(start + COLUMNS, cells)))
            row_width = len(row) * BOX_W + (len(row) - 1) * GAP_X
            x0 = (WIDTH - row_width) / 2
            for column, index in enumerate(row):
                x = x0 + column * (BOX_W + GAP_X)
                if index < len(shown):
                    key = shown[index]
                    placed[key] = (x, y)
                    boxes.append(_box(nodes[key], x, y, held.get(key)))
                else:
                    summaries.append(_summary([nodes[k] for k in rest], x, y))
                    for key in rest:
                        placed[key] = (x, y)
            y += BOX_H + GAP_Y
    height = max(y - GAP_Y + MARGIN, BOX_H + 2 * MARGIN)
    arrows = []
    drawn: set[tuple[tuple[float, float], tuple[float, float]]] = set()
    for parent, child in edges:
        if parent not in placed or child not in placed:
            continue
        (px, py), (cx, cy) = placed[parent], placed[child]
        if ((px, py), (cx, cy)) in drawn:
            continue  # many hidden children share one summary box: one arrow to it
        drawn.add(((px, py), (cx, cy)))
        x1, y1, x2, y2 = px + BOX_W / 2, py + BOX_H, cx + BOX_W / 2, cy - 4
        if cy <= py:
            continue
        arrows.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#555" '
            'stroke-width="1.5" marker-end="url(#pgboss-arrow)"/>'
        )
    return mark_safe(
        f'<svg class="pgboss-flow-graph" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
        f'aria-label="{escape(label)}" font-size="{FONT}" font-family="sans-serif">'
        '<defs><marker id="pgboss-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>'
        + "".join(arrows)
        + "".join(boxes)
        + "".join(summaries)
        + "</svg>"
    )


def _box(node: Node, x: float, y: float, held: str | None) -> str:
    style = STYLES.get(node.state, STYLES["created"])
    name = node.name if len(node.name) <= NAME_CHARS else node.name[: NAME_CHARS - 1] + "…"
    border = f'stroke="{style.colour}" stroke-width="{5 if held else 2.5}"'
    if held == "stuck":
        border += ' stroke-dasharray="8 4"'
    note = {"stuck": " · holds up", "next": " · next"}.get(held or "", "")
    status = f"{style.symbol} {node.state}{note}"
    why = {"stuck": " (holds the flow up)", "next": " (the flow waits on it)"}.get(held or "", "")
    tip = f"{node.name} / {node.id}: {node.state}{why}"
    holding = f' data-holding="{held}"' if held else ""
    current = ' data-current="true"' if node.current else ""
    parts = [
        f'<g class="pgboss-flow-job" data-job="{escape(node.name)}/{escape(node.id)}" '
        f'data-state="{node.state}"{holding}{current}>',
        f"<title>{escape(tip)}</title>",
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="8" fill="{style.fill}" {border}/>',
        _text(x + 10, y + 24, name, fill="#111", font_weight="bold"),
        _text(x + 10, y + 48, status, fill="#222"),
        "</g>",
    ]
    if node.url:
        return f'<a href="{escape(node.url)}">' + "".join(parts) + "</a>"
    return "".join(parts)


def _summary(rest: list[Node], x: float, y: float) -> str:
    counts = Counter(node.state for node in rest)
    common = ", ".join(f"{count:,} {state}" for state, count in counts.most_common(2))
    tip = "; ".join(f"{count:,} {state}" for state, count in counts.most_common())
    return (
        f'<g class="pgboss-flow-more" data-count="{len(rest)}"><title>{escape(tip)}</title>'
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="8" fill="#fafafa" '
        'stroke="#555" stroke-width="1.5" stroke-dasharray="3 3"/>'
        + _text(x + 10, y + 24, f"+ {len(rest):,} more", fill="#111", font_weight="bold")
        + _text(x + 10, y + 48, common[:24], fill="#222")
        + "</g>"
    )
