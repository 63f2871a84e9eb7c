"""A check report as one self-contained HTML page (jinja2 templates, the package's data).

The page needs nothing at view time: its style is inline, its drawings are inline SVG
(:mod:`.drawing`, :mod:`.history`), it has no script and links only to its own anchors. Its
sections: the header (engine, release, profile, verdict), the clause table, one section per
defect (linked from a summary table), the corpus tables' plans, the release history, and how to
read it. :func:`build_page` gathers what the template shows; :func:`render_page` renders it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic

from kvcontract.conformance.reports.check import STATUS_RANK, Record, Report

SECTIONS = ("summary", "clauses", "defects", "plans", "history", "reading")
"""Every section's anchor, in page order (the browser test checks each is there)."""


CATEGORY = {"must": "counted: a MUST rule broken on an input the engine builds",
            "synthetic": "on synthetic input only", "advice": "advice (a SHOULD rule)"}
"""A defect's category in words (the headline counts ``must``)."""


class NotACheckReport(ValueError):
    """A file that is not a ``kvcontract check --json`` report (the message is one line)."""


def load_check(path: str | Path) -> Report:
    """The check report at ``path``; :class:`NotACheckReport` saying why it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise NotACheckReport(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    except json.JSONDecodeError as exc:
        raise NotACheckReport(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("kind") != "check":
        kind = data.get("kind") if isinstance(data, dict) else None
        raise NotACheckReport(f"{path}: not a check report (kind {kind!r}; write one with "
                              "kvcontract check --json FILE)")
    try:
        return Report.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise NotACheckReport(f"{path}: a malformed check report: {where}: {first['msg']} "
                              f"({exc.error_count()} problem{'s' * (exc.error_count() != 1)})") from None


class Anchors:
    """Unique, readable HTML ids."""

    def __init__(self) -> None:
        self._used: set[str] = set(SECTIONS)
        self._given: dict[tuple[str, str], str] = {}

    def __call__(self, prefix: str, text: str) -> str:
        key = (prefix, text)
        if key not in self._given:
            base = f"{prefix}-{re.sub(r'[^A-Za-z0-9]+', '-', text).strip('-').lower() or 'x'}"
            anchor, n = base, 2
            while anchor in self._used:
                anchor, n = f"{base}-{n}", n + 1
            self._used.add(anchor)
            self._given[key] = anchor
        return self._given[key]


def _cell(records: Sequence[Record]) -> tuple[str, int]:
    if not records:
        return "-", 0
    worst = max(records, key=lambda r: STATUS_RANK[r.status]).status
    return worst, sum(r.status in ("fail", "xfail", "xpass", "error") for r in records)


def clause_rows(report: Report) -> list[dict[str, Any]]:
    """One row per clause: level, title, per mode the worst status and findings, examples, pairs, time."""
    by_clause: dict[str, list[Record]] = {}
    for r in report.records:
        by_clause.setdefault(r.clause, []).append(r)
    runs: dict[str, list[Any]] = {}
    for run in report.clauses:
        runs.setdefault(run.clause, []).append(run)
    rows = []
    for clause, records in by_clause.items():
        clause_runs = runs.get(clause, [])
        cells = {mode: _cell([r for r in records if r.mode == mode]) for mode in report.modes}
        pairs = max((f"{r.covered_pairs}/{r.total_pairs}" for r in clause_runs if r.total_pairs), default="-")
        rows.append({"clause": clause, "level": records[0].level, "title": records[0].title, "cells": cells,
                     "examples": sum(r.examples for r in clause_runs) or sum(r.examples for r in records),
                     "pairs": pairs, "seconds": sum(r.seconds for r in clause_runs),
                     "worst": max(STATUS_RANK[c[0]] if c[0] in STATUS_RANK else -1 for c in cells.values())})
    return rows


def verdict(report: Report) -> tuple[str, str]:
    """``(word, sentence)``: PASS / FAIL / INCOMPLETE and why."""
    counts = report.summary.counts
    failing = len(report.summary.failed)
    if not report.complete:
        return "INCOMPLETE", (f"the run was stopped: {len(report.not_run)} clause x mode runs did not finish; "
                              f"{failing} findings need attention in what ran")
    if failing:
        parts = ", ".join(f"{counts[s]} {s}" for s in ("fail", "xpass", "error") if counts.get(s))
        return "FAIL", f"{failing} findings need attention ({parts})"
    known = counts.get("xfail", 0)
    return "PASS", "nothing needs attention" + (f" ({known} known findings, xfail)" if known else "")


def _defects(report: Report, anchors: Anchors, plan_anchor: Mapping[str, str], history: Any,
             source: Mapping[str, Any]) -> list[dict[str, Any]]:
    from kvcontract.conformance.reports.defects_text import CATEGORY_WORDS, short_outcome, tier_text
    from kvcontract.conformance.reports.html.history import for_defect
    from kvcontract.conformance.reports.html.source import excerpt

    out = []
    for number, d in enumerate(report.defects, 1):
        lines = excerpt(d.location, d.lines, engine=report.engine, version=report.engine_version,
                        given=source.get("dir"), engine_source=report.engine_source)
        harm_links = [(m, plan_anchor[m]) for m in d.harm_models if m in plan_anchor]
        reach_links = [(m, plan_anchor[m]) for m in d.models if m in plan_anchor]
        out.append({"number": f"D{number:02d}", "d": d, "anchor": anchors("defect", d.id),
                    "category": CATEGORY.get(d.category, d.category), "tier": tier_text(d),
                    "category_short": CATEGORY_WORDS.get(d.category, d.category),
                    "what": short_outcome(d.outcome), "excerpt": lines,
                    "harm_links": _first_distinct(harm_links), "reach_links": _first_distinct(reach_links),
                    "history": for_defect(history, d.clauses, d.signatures, d.id) if history is not None else None})
    return out


def _first_distinct(links: Sequence[tuple[str, str]], limit: int = 8) -> list[tuple[str, str]]:
    """The first table of each plan drawing linked, at most ``limit``."""
    seen: dict[str, str] = {}
    for name, anchor in links:
        seen.setdefault(anchor, name)
    return [(name, anchor) for anchor, name in list(seen.items())[:limit]]


def _plan_groups(cases: Sequence[Mapping[str, Any]], corpus: Any, anchors: Anchors, engine_title: str,
                 agreement: Any = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Cases by table (drawn), tables with a difference first (a group's, then the blocks', then a
    refusal); and each corpus table's anchor."""
    from kvcontract.conformance.reports.html.drawing import differs as marked
    from kvcontract.conformance.reports.html.drawing import draw_pair, marks

    by_name = corpus.by_name() if corpus is not None else {}
    tables: dict[str, dict[str, Any]] = {}
    table_anchor: dict[str, str] = {}
    for case in cases:
        name = case["table"]
        held = tables.get(name)
        if held is None:
            table = by_name.get(name)
            anchor = anchors("plan", name)
            layers = [(n, type(s).__name__) for n, s in table.layers] if table is not None else \
                [(str(n), str(k)) for n, k in case.get("layers", [])]
            kinds: dict[str, int] = {}
            for _, kind in layers:
                kinds[kind] = kinds.get(kind, 0) + 1
            held = tables[name] = {"name": name, "anchor": anchor, "stands_for": case.get("stands_for", [name]),
                                   "kinds": kinds, "layers": layers, "cases": [], "differs": False}
            held["agreement"] = agreement.rows(held["stands_for"]) if agreement is not None else []
            for member in held["stands_for"]:
                table_anchor.setdefault(member, anchor)
        engine = case.get("engine")
        flags = marks(case["reference"], engine)
        svg = draw_pair(case["reference"], engine, held["layers"], f"{held['anchor']}-{len(held['cases'])}",
                        engine_title) if held["layers"] else ""
        differs = engine is not None and marked(flags)
        held["differs"] = held["differs"] or differs
        if differs:  # what the reader should see first: groups or their pages, then blocks, then refusals
            weight = 3 if any(flags["ref"]) or any(flags["eng"]) or any(flags["fields"]) else 2 if flags["blocks"] else 1
            held["weight"] = max(held.get("weight", 0), weight)
        held["cases"].append({"label": case.get("label", ""), "why": case.get("why", []), "svg": svg,
                              "differences": case.get("differences", []), "differs": differs,
                              "engine_planned": engine is not None})
    ordered = sorted(tables.values(), key=lambda t: (-t.get("weight", 0), t["name"]))
    return ordered, table_anchor


def build_page(report: Report, *, source_name: str, cases: Sequence[Mapping[str, Any]] | None, corpus: Any,
               plans_how: str, engine_title: str, missing: Sequence[str] = (), history: Any = None,
               history_note: str = "", source_dir: str | None = None, agreement: Any = None,
               agreement_note: str = "") -> dict[str, Any]:
    """Everything the template shows."""
    from kvcontract import __version__
    from kvcontract.conformance.reports.defects_text import headline
    from kvcontract.conformance.reports.html.drawing import KIND_COLOURS, OTHER_KIND
    from kvcontract.conformance.reports.html.history import chart, per_release

    anchors = Anchors()
    tables, plan_anchor = _plan_groups(cases or [], corpus, anchors, engine_title, agreement)
    word, why = verdict(report)
    kinds_seen = sorted({k for t in tables for k in t["kinds"]})
    hist = None
    if history is not None:
        hist = {"h": history, "rows": per_release(history), "chart": chart(history) if history.releases else "",
                "age": history.age_days(), "first": history.releases[0] if history.releases else "",
                "last": history.releases[-1] if history.releases else ""}
    return {
        "r": report, "source_name": source_name, "kit_version": __version__, "verdict": word, "verdict_why": why,
        "headline": headline(report.defects) if report.defects else "defects: none", "clauses": clause_rows(report),
        "defects": _defects(report, anchors, plan_anchor, history, {"dir": source_dir}),
        "tables": tables, "plans_how": plans_how, "missing": list(missing),
        "cases": sum(len(t["cases"]) for t in tables), "differing": sum(t["differs"] for t in tables),
        "engine_planned": any(c["engine_planned"] for t in tables for c in t["cases"]),
        "legend": [(k, KIND_COLOURS.get(k, OTHER_KIND)) for k in kinds_seen],
        "history": hist, "history_note": history_note, "sections": SECTIONS,
        "agreement": agreement, "agreement_note": agreement_note,
        "agreement_tables": sum(bool(t["agreement"]) for t in tables),
        "today": dt.date.today().isoformat(),
    }


def environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("kvcontract.conformance.reports.html", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["seconds"] = lambda s: f"{s:.2f} s" if s < 60 else f"{s / 60:.1f} min"
    return env


def render_page(page: Mapping[str, Any]) -> str:
    return str(environment().get_template("report.html.j2").render(**page))


__all__ = ["SECTIONS", "Anchors", "NotACheckReport", "build_page", "clause_rows", "load_check", "render_page",
           "verdict"]
