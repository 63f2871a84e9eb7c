"""A corpus table's two plans drawn side by side (matplotlib, rendered to inline SVG).

Each panel is one plan: a row per KV-cache group, the table's layers along the x axis in the
table's order (layer ``i`` at ``x = i``), a group's layers as bars coloured by their spec kind.
The row's label says the group's form (merged / per member), block size and page bytes. What
differs from the other plan is marked in red: a group whose layers no group of the other plan
holds (a different partition), a label whose form, block size or pages differ, a block count
that differs, a plan the other side made that this side refused. The colours of the kinds are
fixed (:data:`KIND_COLOURS`): the page draws one legend for every drawing.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

DIFF = "#c62828"
"""What differs from the other plan."""
SAME = "#263238"
KIND_COLOURS: dict[str, str] = {
    "FullAttentionSpec": "#4c72b0",
    "SlidingWindowSpec": "#55a868",
    "ChunkedLocalAttentionSpec": "#8172b2",
    "MLAAttentionSpec": "#dd8452",
    "SlidingWindowMLASpec": "#da8bc3",
    "MambaSpec": "#937860",
    "CrossAttentionSpec": "#64b5cd",
    "EncoderOnlyAttentionSpec": "#8c8c8c",
    "SinkFullAttentionSpec": "#ccb974",
    "RSWASpec": "#2a9d8f",
    "HiddenStateCacheSpec": "#b07aa1",
    "CircularBufferSpec": "#9c755f",
}
OTHER_KIND = "#bab0ac"
MAX_ROWS = 16
"""Groups drawn per plan; the rest are counted in the panel's title."""


def kind_colour(kind: str) -> str:
    return KIND_COLOURS.get(kind, OTHER_KIND)


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % (factor // 1024 or 1) == 0:
            value = n / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def group_label(group: Mapping[str, Any]) -> str:
    pages = group.get("pages") or []
    page = _size(pages[0]) if len(pages) == 1 else f"{len(pages)} pages" if pages else "?"
    form = "merged" if group.get("form") == "merged" else "per member"
    return f"{form} · blk {group.get('block_size', '?')} · {page}"


# -- what differs, structurally ------------------------------------------------------------------


def marks(ref: Mapping[str, Any], eng: Mapping[str, Any] | None) -> dict[str, Any]:
    """Which groups of each plan have no counterpart in the other (``"ref"``/``"eng"``: a flag
    per group), which matched groups differ in form, block size or pages (``"fields"``: per
    engine group, the keys that differ), and whether the block counts or the refusals differ.
    With no engine plan, nothing is marked."""
    out: dict[str, Any] = {"ref": [False] * len(ref.get("groups", [])), "eng": [], "fields": [],
                           "blocks": False, "refusal": False}
    if eng is None:
        return out
    out["eng"] = [False] * len(eng.get("groups", []))
    out["fields"] = [[] for _ in eng.get("groups", [])]
    if ("error" in ref) != ("error" in eng):
        out["refusal"] = True
        return out
    if "error" in ref:
        return out
    by_layers = {frozenset(g["layers"]): g for g in ref["groups"]}
    eng_sets = {frozenset(g["layers"]) for g in eng["groups"]}
    out["ref"] = [frozenset(g["layers"]) not in eng_sets for g in ref["groups"]]
    for i, g in enumerate(eng["groups"]):
        twin = by_layers.get(frozenset(g["layers"]))
        if twin is None:
            out["eng"][i] = True
            continue
        out["fields"][i] = [k for k in ("form", "block_size", "pages") if twin.get(k) != g.get(k)]
    out["blocks"] = ref.get("num_blocks") != eng.get("num_blocks")
    return out


def differs(m: Mapping[str, Any]) -> bool:
    return bool(m["refusal"] or m["blocks"] or any(m["ref"]) or any(m["eng"]) or any(m["fields"]))


# -- the drawing -----------------------------------------------------------------------------


def _runs(positions: Sequence[int]) -> list[tuple[float, int]]:
    """Layer positions as ``(start, length)`` runs of bars, each layer one unit wide."""
    runs: list[tuple[int, int]] = []
    for p in sorted(positions):
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return [(start - 0.5, length) for start, length in runs]  # layer i spans i-0.5 .. i+0.5


def _panel(ax: Any, title: str, plan: Mapping[str, Any] | None, order: Mapping[str, int],
           kinds: Mapping[str, str], unmatched: Sequence[bool], fields: Sequence[Sequence[str]],
           blocks_differ: bool, rows: int, refused_alone: bool = False) -> None:
    n = max(len(order), 1)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(rows - 0.5, -0.6)
    ax.set_yticks([])
    ax.set_xticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    if plan is None:
        ax.set_title(f"{title}: not planned", loc="left", fontsize=9, color="#777777")
        return
    ax.set_xlabel(f"{len(order)} layers, in the table's order", fontsize=7, color="#777777", labelpad=2)
    if "error" in plan:
        colour = DIFF if refused_alone else SAME
        ax.set_title(f"{title}: refused", loc="left", fontsize=9, color=colour, fontweight="bold")
        ax.text(0, 0, str(plan["error"])[:150], fontsize=7, color=colour, va="top", wrap=True)
        return
    groups = plan.get("groups", [])
    more = f" (+{len(groups) - MAX_ROWS} not drawn)" if len(groups) > MAX_ROWS else ""
    blocks = f"{plan.get('num_blocks', '?')} blocks"
    ax.set_title(f"{title}: {len(groups)} group{'s' * (len(groups) != 1)}{more}", loc="left", fontsize=9,
                 color=SAME)
    ax.set_title(("≠ " if blocks_differ else "") + blocks, loc="right", fontsize=9,
                 color=DIFF if blocks_differ else SAME, fontweight="bold" if blocks_differ else "normal")
    for row, group in enumerate(groups[:MAX_ROWS]):
        by_kind: dict[str, list[int]] = {}
        for layer in group["layers"]:
            by_kind.setdefault(kinds.get(layer, ""), []).append(order.get(layer, 0))
        odd = bool(unmatched[row]) if row < len(unmatched) else False
        for kind, positions in by_kind.items():
            ax.broken_barh(_runs(positions), (row - 0.32, 0.64), facecolors=kind_colour(kind),
                           edgecolors=DIFF if odd else "none", linewidth=1.6 if odd else 0, clip_on=False)
        changed = list(fields[row]) if row < len(fields) else []
        label = f"G{row} " + group_label(group) + (f"  ≠ {', '.join(changed)}" if changed else "")
        bad = odd or bool(changed)
        ax.text(-0.5, row - 0.36, ("≠ " if odd else "") + label, fontsize=7, va="bottom",
                color=DIFF if bad else SAME, fontweight="bold" if bad else "normal")


def draw_pair(ref: Mapping[str, Any], eng: Mapping[str, Any] | None, layers: Sequence[tuple[str, str]],
              ident: str, engine_title: str = "engine") -> str:
    """The two plans of one table as an inline ``<svg>`` (no XML prologue); ``layers`` the table's
    ``(layer name, spec kind)`` in its order, ``ident`` unique in the page (the SVG's own ids are
    derived from it, so many drawings share a page)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    m = marks(ref, eng)
    order = {name: i for i, (name, _) in enumerate(layers)}
    kinds = dict(layers)
    rows = max(1, min(MAX_ROWS, max(len(ref.get("groups", [])), len((eng or {}).get("groups", [])))))
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": ident, "font.size": 8,
                                "font.family": "sans-serif"}):
        height = 0.75 + 0.36 * rows
        fig, axes = plt.subplots(1, 2, figsize=(10, height), squeeze=True)
        try:
            _panel(axes[0], "reference", ref, order, kinds, m["ref"], [], m["blocks"], rows, m["refusal"])
            _panel(axes[1], engine_title, eng, order, kinds, m["eng"], m["fields"], m["blocks"], rows,
                   m["refusal"])
            fig.subplots_adjust(left=0.01, right=0.99, top=1 - 0.32 / height, bottom=0.2 / height, wspace=0.06)
            buffer = io.StringIO()
            fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(fig)
    return _inline(buffer.getvalue(), ident, differs(m))


_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_GROUP_ID = re.compile(r'<g id="[^"]*"')
_DECIMALS = re.compile(r"(\d+\.\d)\d+")
_ATTRIBUTE = re.compile(r'="[^"]*"')
_PATH_BREAKS = re.compile(r"\s*\n\s*(?=[LMCQZz\"])")


def compact_svg(svg: str, css_class: str, attributes: str = "") -> str:
    """matplotlib's SVG as an element of an HTML page, a third of its size: no prologue,
    metadata or group ids (many drawings share the page: an id must be unique there),
    coordinates to a tenth of a point, path data on one line; ``css_class`` and ``attributes``
    on the root."""
    svg = _PROLOGUE.sub("", svg, count=1)
    svg = _METADATA.sub("", svg)
    svg = _GROUP_ID.sub("<g", svg)
    svg = _ATTRIBUTE.sub(lambda m: _DECIMALS.sub(r"\1", m.group(0)), svg)  # numbers in text stay whole
    svg = _PATH_BREAKS.sub(" ", svg)
    svg = re.sub(r"\n\s+", "\n", svg)
    return svg.replace("<svg ", f'<svg class="{css_class}" role="img" {attributes}'.rstrip() + " ", 1).strip()


def _inline(svg: str, ident: str, differ: bool) -> str:
    flag = "true" if differ else "false"
    return compact_svg(svg, "plan-drawing", f'data-table="{html.escape(ident)}" data-differs="{flag}"')


__all__ = ["DIFF", "KIND_COLOURS", "compact_svg", "differs", "draw_pair", "group_label", "kind_colour", "marks"]
