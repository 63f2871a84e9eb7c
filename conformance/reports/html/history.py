"""The release history a report shows: whatever history data is given, said for what it is.

The data is ``docs/vllm-history/findings.json`` by default (``scripts/vllm_history.py``): one
row per finding (clause x signature) with the releases that have it, ``first_bad`` and
``fixed_in``; its ``reports/index.json`` beside it says when and how it was made. A dict with a
``findings`` list (and optionally ``date``, ``checked``, ``command``, ``engine``) is read the same
way. The section says which releases it covers, how old it is, and that its rows are findings,
not defects; each defect of the report is matched to the rows of its signatures, and to its own
row where ``defects.json`` (the history told in defects) lies beside the data.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "docs" / "vllm-history" / "findings.json"
"""The committed history of vLLM releases (in a checkout of the kit)."""


class HistoryFileError(ValueError):
    """A ``--history`` file that is not history data."""


@dataclass
class History:
    path: str
    rows: list[dict[str, Any]]
    releases: list[str]
    date: str = ""
    date_how: str = ""
    command: str = ""
    engine: str = "vllm"
    notes: list[str] = field(default_factory=list)
    defects: list[dict[str, Any]] = field(default_factory=list)
    """The history told in defects (``defects.json`` beside the findings, when there): per defect
    id, the releases that have it, first bad, gone in, reachable in."""

    def age_days(self, today: dt.date | None = None) -> int | None:
        try:
            made = dt.date.fromisoformat(self.date[:10])
        except ValueError:
            return None
        return ((today or dt.date.today()) - made).days


def version_key(version: str) -> tuple[Any, ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.\-+]", version))


def read_history(path: str | Path) -> History:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HistoryFileError(f"{path}: not readable as JSON ({exc})") from None
    meta: Mapping[str, Any] = {}
    if isinstance(data, dict):
        meta, data = data, data.get("findings")
    if not isinstance(data, list) or not all(isinstance(r, dict) and "releases" in r for r in data):
        raise HistoryFileError(f"{path}: not history data (a list of findings with clause, signature and "
                               "releases, as scripts/vllm_history.py writes docs/vllm-history/findings.json)")
    index = path.parent / "reports" / "index.json"
    if not meta and index.is_file():
        try:
            meta = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            meta = {}
    releases = [str(v) for v in meta.get("checked", [])] or sorted(
        {str(v) for r in data for v in r.get("releases", [])}, key=version_key)
    date, how = str(meta.get("date") or ""), "as recorded with the data"
    if not date:
        date = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).date().isoformat()
        how = "the file's modification time (the data records no date)"
    shown = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
    defects: list[dict[str, Any]] = []
    beside = path.parent / "defects.json"
    if beside.is_file():
        try:
            loaded = json.loads(beside.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            loaded = []
        defects = [d for d in loaded if isinstance(d, dict) and "id" in d and "releases" in d] \
            if isinstance(loaded, list) else []
    return History(shown, list(data), releases, date, how, str(meta.get("command") or ""),
                   str(meta.get("engine") or "vllm"), defects=defects)


def per_release(history: History) -> list[dict[str, Any]]:
    """Per release checked: the findings present, first seen there, and gone there."""
    out = []
    for version in history.releases:
        present = sum(version in r.get("releases", []) for r in history.rows)
        new = sum(r.get("first_bad") == version for r in history.rows)
        fixed = sum(r.get("fixed_in") == version for r in history.rows)
        out.append({"release": version, "present": present, "new": new, "fixed": fixed})
    return out


def for_defect(history: History, clauses: Sequence[str], signatures: Sequence[str],
               defect_id: str = "") -> dict[str, Any]:
    """The history's rows of one defect's findings (its clauses x signatures): how many, the first
    release any was seen in, the releases that have any, and whether one is still present; and
    the defect's own row where the history is told in defects (``defect``)."""
    wanted, clause_set = set(signatures), set(clauses)
    rows = [r for r in history.rows if r.get("signature") in wanted and r.get("clause") in clause_set]
    own = next((d for d in history.defects if d.get("id") == defect_id), None) if defect_id else None
    if not rows:
        return {"rows": 0, "defect": own}
    firsts = sorted({str(r["first_bad"]) for r in rows if r.get("first_bad")}, key=version_key)
    seen = sorted({str(v) for r in rows for v in r.get("releases", [])}, key=version_key)
    return {"rows": len(rows), "first": firsts[0] if firsts else "", "releases": seen,
            "open": sum(not r.get("fixed_in") for r in rows),
            "fixed": sorted({str(r["fixed_in"]) for r in rows if r.get("fixed_in")}, key=version_key),
            "defect": own}


def chart(history: History) -> str:
    """The findings per release checked as an inline SVG: present (those first seen there
    darker), and those gone there below the axis."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = per_release(history)
    x = list(range(len(rows)))
    carried = [r["present"] - r["new"] for r in rows]
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "history", "font.size": 8}):
        fig, ax = plt.subplots(figsize=(10, 3.2))
        try:
            ax.bar(x, carried, color="#90a4ae", label="present, seen before")
            ax.bar(x, [r["new"] for r in rows], bottom=carried, color="#c62828", label="first seen in this release")
            ax.bar(x, [-r["fixed"] for r in rows], color="#2e7d32", label="gone in this release")
            ax.axhline(0, color="#263238", linewidth=0.8)
            ax.set_xticks(x, [r["release"] for r in rows], rotation=0)
            ax.set_ylabel("findings (clause x signature)")
            ax.legend(loc="upper left", frameon=False)
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            fig.tight_layout()
            buffer = io.StringIO()
            fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(fig)
    from kvcontract.conformance.reports.html.drawing import compact_svg

    return compact_svg(buffer.getvalue(), "history-chart")


__all__ = ["DEFAULT", "History", "HistoryFileError", "chart", "for_defect", "per_release", "read_history",
           "version_key"]
