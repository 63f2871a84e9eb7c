"""Defects, not signatures: a report's findings grouped by the engine code that causes them.

A *defect* is one engine function x one outcome class. Each finding (a record: clause x
mode x signature) is traced to its engine location in a worker
(:mod:`kvcontract.conformance.run.locate`); the outcome class comes from that location
(``assert-only``: an agreement check written as a bare ``assert``, gone under ``python
-O``; ``raises-X``; ``message-omits``) or, for a wrong answer, from the signature's outcome
(:data:`OUTCOME_CLASSES`). Signatures stay as the defect's evidence and the regression key.

A defect is *reachable* when a real model's layer table (the engine's own spec-building
code, :mod:`kvcontract.conformance.engines.vllm.tables`) shows one of its findings, else
*latent*, with the reason. Its level is the strictest of its clauses' (a finding that rests
only on advisory fields is SHOULD).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kvcontract.conformance.reports.check import STATUS_RANK, Defect, Record

OUTCOME_CLASSES: dict[str, str] = {
    "accepted": "accepts-disagreement",
    "uniform-true": "accepts-disagreement",
    "incompatible-group": "accepts-disagreement",
    "mixed-allocation": "accepts-disagreement",
    "changed": "wrong-value",
    "wrong-value": "wrong-value",
    "capability-not-unioned": "wrong-value",
    "wrong-group-spec": "wrong-value",
    "wrong-page": "wrong-value",
    "unequal-pages": "wrong-value",
    "page-not-by-block-size": "wrong-value",
    "invalid-result": "wrong-value",
    "uniform-false": "rejects-agreement",
    "per-member-mixed-manager": "accepts-disagreement",
    "per-member-mixed-type": "accepts-disagreement",
    "hidden-state-not-alone": "wrong-plan",
    "hybrid-off-not-one-group": "wrong-plan",
    "hybrid-off-local-kept": "wrong-plan",
    "tensor-sizes-differ": "wrong-plan",
    "over-budget": "wrong-plan",
    "layer-not-backed": "wrong-plan",
    "budget-unused": "wrong-plan",
    "layer-not-in-one-tensor": "wrong-plan",
    "tensor-mixes-groups": "wrong-plan",
    "tensor-mixes-pages": "wrong-plan",
}
"""A wrong answer's signature outcome -> its defect class (what the deciding function gets wrong)."""

_SUMMARIES: dict[str, str] = {
    "assert-only": "checks agreement with bare asserts that python -O removes",
    "message-omits": "raises an error that names neither the field nor the values",
    "accepts-disagreement": "accepts members that disagree",
    "wrong-value": "builds a wrong merged value",
    "rejects-agreement": "rejects members the contract merges",
    "wrong-plan": "plans groups, blocks or tensors the PLAN chapter forbids",
    "advisory-accepts-disagreement": "accepts members that disagree in an advisory field (nothing reads it)",
    "advisory-wrong-value": "builds a wrong value of an advisory field (nothing reads it)",
    "advisory-rejects-agreement": "rejects members that differ only in an advisory field",
}
ADVISORY_CLASSES = frozenset({"accepts-disagreement", "wrong-value", "rejects-agreement"})
"""Wrong-answer classes that a SHOULD finding (one that rests on advisory fields or a SHOULD
clause) makes a defect of its own: it is not the MUST defect of the same function."""
FINDING_STATUSES = ("fail", "xfail")
"""Records that are findings a defect is made of (an ``xpass`` no longer reproduces)."""


def outcome_class(location: Mapping[str, Any], level: str = "MUST") -> str:
    """The defect class of a located finding; a SHOULD finding's wrong answer is ``advisory-*``."""
    outcome = str(location.get("outcome", ""))
    cls = OUTCOME_CLASSES.get(outcome, outcome)
    return f"advisory-{cls}" if level != "MUST" and cls in ADVISORY_CLASSES else cls


def _fields(signatures: Iterable[str]) -> list[str]:
    """The fields the signatures name; where none names a field, the kinds they pair."""
    fields: set[str] = set()
    kinds: set[str] = set()
    for sig in signatures:
        parts = sig.split(":")
        if sig.startswith("optimized-only:"):
            parts = parts[2:]
        if len(parts) >= 3:
            fields |= {f for f in parts[2].split(",") if f and f != "kind"}
        if len(parts) >= 2 and (">" in parts[1] or "+" in parts[1]):
            kinds |= set(parts[1].replace(">", "+").split("+"))
    return sorted(fields) or sorted(kinds)


def _summary(function: str, outcome: str, signatures: Sequence[str], lines: Sequence[int]) -> str:
    text = _SUMMARIES.get(outcome) or (f"raises {outcome.removeprefix('raises-')}" if outcome.startswith("raises-")
                                        else outcome)
    fields = _fields(signatures)
    shown = ", ".join(fields[:6]) + (f" +{len(fields) - 6}" if len(fields) > 6 else "")
    where = f" (l.{', '.join(str(n) for n in lines[:6])})" if outcome == "assert-only" and len(lines) > 1 else ""
    return f"{function or '(engine)'} {text}{where}" + (f": {shown}" if shown else "")


def _rank(r: Record) -> tuple[int, int, int]:
    return (0 if r.models else 1, 0 if r.mode == "normal" else 1, 0 if r.level == "MUST" else 1)


def build_defects(records: Sequence[Record], locations: Mapping[int, Mapping[str, Any]], *,
                  tables: Sequence[str] = (), reviews: Mapping[str, str] | None = None,
                  table_kinds: Mapping[str, Sequence[str]] | None = None) -> list[Defect]:
    """Group the findings among ``records`` (``locations``: index in ``records`` -> where the
    finding comes from) into defects, set each record's ``defect``; reachable defects first.
    ``tables``: the real model tables the run fed the engine (named in a latent reason)."""
    groups: dict[str, list[tuple[Record, Mapping[str, Any]]]] = {}
    for i, r in enumerate(records):
        loc = locations.get(i)
        if loc is None or r.status not in FINDING_STATUSES:
            continue
        function = str(loc.get("function") or "")
        defect_id = f"{function or 'unlocated'}:{outcome_class(loc, r.level)}"
        r.defect = defect_id
        r.location = str(loc.get("location") or "")
        groups.setdefault(defect_id, []).append((r, loc))
    defects = []
    for defect_id, members in groups.items():
        recs = [r for r, _ in members]
        lines = sorted({int(str(loc["location"]).rsplit(":", 1)[1]) for _, loc in members
                        if str(loc.get("location", "")).rpartition(":")[2].isdigit()})
        counts: dict[str, int] = {}
        for _, loc in members:
            counts[str(loc.get("location", ""))] = counts.get(str(loc.get("location", "")), 0) + 1
        location = max(counts, key=lambda k: counts[k])
        function, _, outcome = defect_id.rpartition(":")
        signatures = sorted({r.signature for r in recs})
        models = sorted({m for r in recs for m in r.models})
        best = min(recs, key=_rank)
        defects.append(Defect(
            id=defect_id, location=location, lines=lines, function=function if function != "unlocated" else "",
            outcome=outcome, summary=_summary(function, outcome, signatures, lines),
            level="MUST" if any(r.level == "MUST" for r in recs) else "SHOULD",
            tier="reachable" if models else "latent", models=models,
            latent_reason="" if models else _latent_reason(tables, table_kinds or {}, signatures, function),
            clauses=sorted({r.clause for r in recs}), modes=sorted({r.mode for r in recs}),
            signatures=signatures, findings=len(recs),
            status=max((r.status for r in recs), key=lambda s: STATUS_RANK[s]),
            repro=best.snippet, representative=f"{best.clause}/{best.mode}[{best.signature}]",
            review=(reviews or {}).get(defect_id, "")))
    defects.sort(key=lambda d: (d.tier != "reachable", d.level != "MUST", -d.findings, d.id))
    return defects


def _kinds_of(signatures: Iterable[str]) -> set[str]:
    kinds: set[str] = set()
    for sig in signatures:
        parts = sig.split(":")
        if sig.startswith("optimized-only:"):
            parts = parts[2:]
        if len(parts) >= 2 and parts[1][:1].isupper() and " " not in parts[1]:
            kinds |= set(parts[1].replace(">", "+").split("+"))
    return kinds


def _latent_reason(tables: Sequence[str], table_kinds: Mapping[str, Sequence[str]],
                   signatures: Sequence[str], function: str = "") -> str:
    """Why no real model table reaches a defect: the kinds its findings need that no table has,
    else that the tables with those kinds never make their layers differ as its witnesses do."""
    if not tables:
        return "no real model table was checked in this run"
    needed = _kinds_of(signatures)
    owner = function.split(".", 1)[0]
    if owner in needed:  # the kind whose code it is (its findings may pair it with any other)
        needed = {owner}
    present = {k for kinds in table_kinds.values() for k in kinds}
    missing = sorted(needed - present) if table_kinds else []
    if missing:
        return (f"no real model table of the {len(tables)} built has {', '.join(missing)} layers "
                f"(its findings need them)")
    having = sorted(n for n, kinds in table_kinds.items() if needed & set(kinds)) if needed else []
    fields = _fields(signatures)
    if having:
        return (f"the tables with {', '.join(sorted(needed))} layers ({', '.join(having[:4])}"
                f"{' ...' if len(having) > 4 else ''}) never pair layers that differ "
                f"{'in ' + ', '.join(fields[:4]) if fields else 'as its witnesses do'}")
    return f"none of the {len(tables)} real model tables checked shows it; its findings rest on drawn inputs"


SHORT: dict[str, str] = {
    "advisory-accepts-disagreement": "accepts advisory disagreement",
    "advisory-wrong-value": "wrong advisory value",
    "advisory-rejects-agreement": "rejects on an advisory field",
    "assert-only": "asserts gone under -O",
    "message-omits": "error names no field",
    "accepts-disagreement": "accepts disagreeing members",
    "wrong-value": "wrong merged value",
    "rejects-agreement": "rejects agreeing members",
}
"""The outcome classes as the console's defects table says them."""


def short_outcome(outcome: str) -> str:
    return SHORT.get(outcome) or (f"raises {outcome.removeprefix('raises-')}" if outcome.startswith("raises-")
                                  else outcome)


def defect_line(number: int, d: Defect, status: str | None = None) -> str:
    """One console line: ``D01 xfail MUST reachable: <model> Function (file:line): what [fields] (n sigs)``
    (``status``: what to show instead of the defect's own, e.g. ``NEW`` against a baseline)."""
    tier = f"reachable: {d.models[0]}{f' +{len(d.models) - 1}' if len(d.models) > 1 else ''}" if d.models \
        else "latent"
    fields = _fields(d.signatures)
    shown = ",".join(fields[:2]) + (f" +{len(fields) - 2}" if len(fields) > 2 else "")
    return (f"  D{number:02d} {status or d.status:<5} {d.level:<6} {tier:<10} {d.function or '?'} "
            f"({d.location.rsplit('/', 1)[-1]}): {short_outcome(d.outcome)}"
            f"{f' [{shown}]' if shown else ''} ({len(d.signatures)} sig{'s' * (len(d.signatures) != 1)})")


# -- the defects document ----------------------------------------------------------------------

README_BEGIN = "<!-- defects:begin (generated by scripts/defects_doc.py; edit the reviews, not this) -->"
README_END = "<!-- defects:end -->"


def defects_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the docs say of a check report's defects (committed as data; the docs render it)."""
    keep = ("id", "location", "lines", "function", "outcome", "summary", "level", "tier", "models",
            "latent_reason", "clauses", "modes", "findings", "status", "representative", "review")
    return {"engine": report["engine"], "engine_version": report["engine_version"], "profile": report["profile"],
            "seed": report["seed"], "domain": report.get("domain", ""), "tables": list(report.get("tables", [])),
            "findings": sum(d["findings"] for d in report.get("defects", [])),
            "signatures": sum(len(d["signatures"]) for d in report.get("defects", [])),
            "defects": [{k: d.get(k) for k in keep} | {"signatures": len(d["signatures"])}
                        for d in report.get("defects", [])]}


def _model_list(models: Sequence[str]) -> str:
    return ", ".join(models[:4]) + (f" and {len(models) - 4} more" if len(models) > 4 else "")


def render_readme_block(summary: Mapping[str, Any]) -> str:
    """The README's account of what the pinned release breaks: reachable MUST defects first,
    each with the models that reach it; then the rest, counted."""
    defects = summary["defects"]
    reachable = [d for d in defects if d["tier"] == "reachable"]
    must = [d for d in defects if d["level"] == "MUST"]
    lines = [README_BEGIN,
             f"What vLLM {summary['engine_version']} breaks ({summary['profile']} profile, seed {summary['seed']}, "
             f"{summary['domain'] or 'producible'} domain): **{len(defects)} defects** — {len(reachable)} reachable "
             f"by one of the {len(summary['tables'])} real model tables built with the release's own code, "
             f"{len(defects) - len(reachable)} latent; {len(must)} MUST, {len(defects) - len(must)} SHOULD — "
             f"behind {summary['findings']} findings ({summary['signatures']} signatures). Each defect is one "
             "engine function × one outcome class, traced from its findings; `docs/vllm-defects.md` has "
             "every one with its review.", ""]
    for d in defects:
        if d["tier"] == "reachable" and d["level"] == "MUST":
            lines.append(f"- **{d['summary']}** (`{d['location']}`) — reached by {_model_list(d['models'])}.")
    latent_must = [d for d in defects if d["tier"] == "latent" and d["level"] == "MUST"]
    if latent_must:
        lines += ["", f"Latent MUST defects ({len(latent_must)}; no real model table reaches them):"]
        lines += [f"- {d['summary']} (`{d['location']}`)" for d in latent_must]
    should = [d for d in defects if d["level"] != "MUST"]
    if should:
        classes: dict[str, int] = {}
        for d in should:
            classes[short_outcome(d["outcome"])] = classes.get(short_outcome(d["outcome"]), 0) + 1
        lines += ["", f"SHOULD defects ({len(should)}): "
                  + ", ".join(f"{n} {c}" for c, n in classes.items()) + "."]
    lines.append(README_END)
    return "\n".join(lines)


def render_document(summary: Mapping[str, Any]) -> str:
    """``docs/vllm-defects.md``: every defect of the pinned release, reachable first."""
    lines = [f"# What vLLM {summary['engine_version']} breaks: defects", "",
             "Generated by `scripts/defects_doc.py` from a `kvcontract check --engine vllm --no-xfails` report "
             f"({summary['profile']} profile, seed {summary['seed']}, {summary['domain'] or 'producible'} domain); "
             "counts are the report's. A defect is one engine function × one outcome class: each finding is "
             "traced to the engine line that causes it (an exception's innermost engine frame; for a "
             "`python -O`-only finding, the `assert` that fires without `-O`; for a wrong answer, the function "
             "that decided it). *Reachable*: a real model table (built with the release's own spec-building "
             "code) shows it.", "",
             f"Real model tables checked: {', '.join(summary['tables']) or 'none'}.", ""]
    for number, d in enumerate(summary["defects"], 1):
        reach = f"reachable — {_model_list(d['models'])}" if d["tier"] == "reachable" else \
            f"latent — {d['latent_reason']}"
        lines += [f"## D{number:02d} {d['summary']}", "",
                  f"- where: `{d['location']}` (lines {', '.join(str(n) for n in d['lines'])}), {d['level']}, {reach}",
                  f"- clauses: {', '.join(d['clauses'])}; modes: {', '.join(d['modes'])}; "
                  f"{d['findings']} findings, {d['signatures']} signatures; repro: the finding "
                  f"`{d['representative']}`",
                  f"- review: {d['review'] or '(none)'}", ""]
    return "\n".join(lines).rstrip() + "\n"
