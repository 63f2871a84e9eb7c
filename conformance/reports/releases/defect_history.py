"""The release history told in defects: per defect of the engine, the releases that have it, the
first bad one, the one it is gone in, and where a real model of that release shows its harm.

A defect is a root in the engine's code (:mod:`kvcontract.conformance.reports.defects`: a
function and what it does wrong), named the same in every release that keeps the function, so
the rows line up across releases. What each release's check said of it is kept per release:
its category (MUST, synthetic input only, advice), its tier (reachable: a corpus model's plan
differs from the reference's; reached with no harm; latent) and the model and option that show
the harm. **Gone in** is the first release checked after the last one that has the defect whose
check judged one of the defect's clauses and does not have it (a rename of the function is
also "gone": the row of the new name starts there).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["GRID_MARKS", "defect_rows", "judged_clauses", "release_counts", "render_grid", "render_rows", "span"]

GRID_MARKS = {"reachable": "**R**", "reached": "r", "latent": "L", "synthetic": "s", "advice": "a"}
"""One cell of the grid: how the release has the defect (MUST reachable / reached with no harm /
latent; synthetic input only; advice), ``·`` where it does not, ``–`` where it was not judged."""


def _listed(value: Any) -> list[str]:
    """A report's list field (a list, or a list's repr in the flat JUnit-shaped form)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value.startswith("["):
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return [value]
        return [str(v) for v in parsed] if isinstance(parsed, list | tuple) else [value]
    return [str(value)] if value else []


def _category(d: Mapping[str, Any]) -> str:
    if d.get("category"):
        return str(d["category"])
    return "must" if d.get("level") == "MUST" else "advice"


def judged_clauses(report: Mapping[str, Any]) -> set[str]:
    """The clauses a release's check judged (any record not a skip)."""
    return {r["clause"] for r in report.get("records", []) if r.get("status") != "skip"}


def _mark(d: Mapping[str, Any]) -> str:
    category = _category(d)
    return str(d.get("tier") or "latent") if category == "must" else category


def defect_rows(versions: Sequence[str], reports: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per defect id seen in any release: per release how it shows (``marks``), the
    releases that have it, first bad, gone in, where it is reachable and by what."""
    by_release = {v: {str(d["id"]): d for d in reports[v].get("defects") or []} for v in versions}
    judged = {v: judged_clauses(reports[v]) for v in versions}
    ids = {i for v in versions for i in by_release[v]}
    rows = []
    for defect_id in ids:
        have = [v for v in versions if defect_id in by_release[v]]
        newest = by_release[have[-1]][defect_id]
        clauses = {c for v in have for c in _listed(by_release[v][defect_id].get("clauses"))}
        later = [v for v in versions[versions.index(have[-1]) + 1:] if clauses & judged[v]]
        marks = {}
        for v in versions:
            if v in have:
                marks[v] = _mark(by_release[v][defect_id])
            elif not clauses & judged[v]:
                marks[v] = "not judged"
        reach = {}
        for v in have:
            d = by_release[v][defect_id]
            if _category(d) == "must" and d.get("tier") == "reachable":
                models = _listed(d.get("harm_models")) or _listed(d.get("models"))
                reach[v] = {"model": models[0] if models else "", "models": len(models),
                            "option": str(d.get("option") or "")}
        row: dict[str, Any] = {
            "id": defect_id, "category": _category(newest), "level": str(newest.get("level") or ""),
            "function": str(newest.get("function") or ""), "outcome": str(newest.get("outcome") or ""),
            "summary": str(newest.get("summary") or ""), "location": str(newest.get("location") or ""),
            "releases": have, "first_bad": have[0], "gone_in": later[0] if later else None,
            "marks": marks, "reachable": reach, "ever_must": any(_category(by_release[v][defect_id]) == "must"
                                                                 for v in have),
        }
        rows.append(row)
    order = {v: i for i, v in enumerate(versions)}
    rows.sort(key=lambda r: (not r["ever_must"], not r["reachable"], order[str(r["first_bad"])], str(r["id"])))
    return rows


def release_counts(report: Mapping[str, Any]) -> dict[str, int]:
    """Per release: its MUST defects by tier, synthetic, advice, and the kit's own errors."""
    defects = report.get("defects") or []
    must = [d for d in defects if _category(d) == "must"]
    return {"must": len(must),
            "reachable": sum(d.get("tier") == "reachable" for d in must),
            "reached": sum(d.get("tier") == "reached" for d in must),
            "synthetic": sum(_category(d) == "synthetic" for d in defects),
            "advice": sum(_category(d) == "advice" for d in defects),
            "kit_errors": sum(r.get("status") == "error" for r in report.get("records", [])),
            "tables": len(report.get("tables") or [])}


def span(have: Sequence[str], versions: Sequence[str]) -> str:
    """``0.20.0–0.25.0, 0.34.0``: runs of consecutive checked releases."""
    runs: list[list[str]] = []
    for v in have:
        if runs and versions.index(v) == versions.index(runs[-1][-1]) + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


def _short(version: str) -> str:
    return version.removeprefix("0.")


def render_grid(rows: Sequence[Mapping[str, Any]], versions: Sequence[str]) -> list[str]:
    """The defects x releases grid (markdown): one mark per cell."""
    from kvcontract.reports import markdown_table

    table = []
    for row in rows:
        cells = [GRID_MARKS.get(row["marks"][v], "–") if v in row["marks"] else "·" for v in versions]
        table.append([f"`{row['id']}`", *cells])
    return markdown_table(["defect", *(_short(v) for v in versions)], table, align="<" + "^" * len(versions))


def render_rows(rows: Sequence[Mapping[str, Any]], versions: Sequence[str]) -> list[str]:
    """The affected-versions table: first bad, gone in, present in, reachable in (by which model)."""
    from kvcontract.reports import markdown_table

    table = []
    for row in rows:
        reach = row["reachable"]
        if reach:
            first = next(iter(reach))
            option = f" ({reach[first]['option']})" if reach[first]["option"] else ""
            reach_text = f"{span(list(reach), versions)}: {reach[first]['model']}{option}"
        elif reached := [v for v in row["releases"] if row["marks"].get(v) == "reached"]:
            reach_text = f"none; reached with no harm in {span(reached, versions)}"
        else:
            reach_text = "no corpus model"
        table.append([f"`{row['id']}`", row["first_bad"], row["gone_in"] or "—", span(row["releases"], versions),
                      reach_text, f"`{row['location']}`"])
    return markdown_table(["defect", "first bad", "gone in", "present in", "reachable in (first model)",
                           "where (newest)"], table)
