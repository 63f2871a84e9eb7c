"""Defects, not signatures: a report's findings grouped by their root in the engine's code.

Each finding (a record: clause x mode x signature) is traced to its engine location in a worker
(:mod:`kvcontract.conformance.run.locate`). Its *root* is the defect's key:

- an exception or an assert: the function and the statement kind — ``F:assert`` for an agreement
  check written as a bare ``assert`` (a ``python -O`` finding located at the assert that fires
  without ``-O``, and a normal-mode finding raised by that same assert: one defect with both
  modes), ``F:raises-X``, ``F:message-omits``;
- a wrong answer: the function, the outcome class (accepting members that disagree and building
  a wrong merged value are one class, ``mishandles``: one missing comparison seen from both
  sides), and the spec kinds the findings involve (a harmful kind pair is not lumped with a
  harmless one): ``F:mishandles:FullAttentionSpec+RSWASpec``. A SHOULD finding's wrong answer
  is ``advisory-*``, a defect of its own.

Signatures stay as the defect's evidence and the regression key.

**Category** (the headline counts ``must``): a MUST defect needs a finding on a producible input
(its record's ``input``: ``corpus`` or ``variation``, :mod:`kvcontract.conformance.contract.inputs`);
one whose findings rest only on synthetic inputs is ``synthetic``; a SHOULD defect (error wording,
advisory fields no code reads) is ``advice``.

**Tier**: ``reachable`` when a corpus table, planned by the engine with the settings it picks
or with a named option (``python -O``, the hybrid manager off, another layout), gives a plan the
PLAN chapter judges wrong — a plan that differs from the reference's or breaks its invariants
(harm shown, ``option`` says what it needs); ``reached`` when corpus tables reach its code but
no plan differs (reached, no harm); else ``latent``, with the reason computed
(:func:`latent_reason`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kvcontract.conformance.reports.check import STATUS_RANK, Defect, Record

OUTCOME_CLASSES: dict[str, str] = {
    "accepted": "mishandles",
    "uniform-true": "mishandles",
    "incompatible-group": "mishandles",
    "mixed-allocation": "mishandles",
    "changed": "mishandles",
    "wrong-value": "mishandles",
    "capability-not-unioned": "mishandles",
    "wrong-group-spec": "mishandles",
    "wrong-page": "mishandles",
    "unequal-pages": "mishandles",
    "page-not-by-block-size": "mishandles",
    "invalid-result": "mishandles",
    "uniform-false": "rejects-agreement",
    "per-member-mixed-manager": "mishandles",
    "per-member-mixed-type": "mishandles",
    "unclassified": "unclassified",
    "split-differs": "wrong-dispatch",
}
"""A wrong answer's signature outcome -> its defect class (what the deciding function gets wrong);
every other wrong answer (chapter PLAN's outcomes) is ``wrong-plan``."""
PLAN_OUTCOME = "wrong-plan"
ASSERT_ROOT = "assert"

_SUMMARIES: dict[str, str] = {
    ASSERT_ROOT: "checks agreement with bare asserts that python -O removes",
    "message-omits": "raises an error that names neither the field nor the values",
    "mishandles": "lets members that disagree through, or builds a wrong merged value",
    "rejects-agreement": "rejects members the contract merges",
    PLAN_OUTCOME: "plans groups, blocks or tensors the PLAN chapter forbids",
    "advisory-mishandles": "lets an advisory field disagree or builds a wrong advisory value (nothing reads it)",
    "advisory-rejects-agreement": "rejects members that differ only in an advisory field",
    "unclassified": "has a spec field the contract gives no role (the drift guard, ROLE-COVER-1)",
    "wrong-dispatch": "dispatches a batch (causal or not, split or not) other than the contract says",
}
ADVISORY_CLASSES = frozenset({"mishandles", "rejects-agreement"})
"""Wrong-answer classes that a SHOULD finding makes a defect of its own (``advisory-*``)."""
FINDING_STATUSES = ("fail", "xfail")
"""Records that are findings a defect is made of (an ``xpass`` no longer reproduces)."""
HARM_CLAUSES = ("PLAN-",)
"""Clauses whose finding on a corpus table is harm shown: the engine's plan of a real model."""
TIERS = ("reachable", "reached", "latent")
CATEGORIES = ("must", "synthetic", "advice")


def outcome_class(location: Mapping[str, Any], level: str = "MUST") -> str:
    """The root class of a located finding."""
    outcome = str(location.get("outcome", ""))
    if outcome == "assert-only" or (outcome == "raises-AssertionError"
                                    and str(location.get("statement", "")).startswith("assert")):
        return ASSERT_ROOT
    if outcome.startswith("raises-") or outcome == "message-omits":
        return outcome
    cls = OUTCOME_CLASSES.get(outcome, PLAN_OUTCOME)
    if cls == PLAN_OUTCOME and "." in str(location.get("function", "")):
        cls = "mishandles"  # a plan that differs because of what a spec's merge or type test let through: its root
    return f"advisory-{cls}" if level != "MUST" and cls in ADVISORY_CLASSES else cls


def _parts(signature: str) -> list[str]:
    parts = signature.split(":")
    return parts[2:] if signature.startswith("optimized-only:") else parts


def kinds_of(signatures: Iterable[str]) -> list[str]:
    """The spec kinds the signatures name (``Kind``, ``A>B``, ``A+B``)."""
    kinds: set[str] = set()
    for sig in signatures:
        parts = _parts(sig)
        if len(parts) >= 2 and parts[1][:1].isupper() and " " not in parts[1]:
            kinds |= set(parts[1].replace(">", "+").split("+"))
    return sorted(kinds)


def fields_of(signatures: Iterable[str]) -> list[str]:
    """The fields the signatures name; where none names a field, the kinds they pair."""
    fields: set[str] = set()
    for sig in signatures:
        parts = _parts(sig)
        if len(parts) >= 3:
            fields |= {f for f in parts[2].split(",") if f and f != "kind"}
    return sorted(fields) or kinds_of(s for s in signatures if ">" in s or "+" in s)


def defect_key(function: str, cls: str, signature: str) -> str:
    """The defect a finding belongs to: ``function:class``, and for a wrong answer on a pair of
    kinds (``A>B``, ``A+B``) the pair too: the same function may be right to put two kinds together
    and wrong to put two others, and the harm differs."""
    head = f"{function or 'unlocated'}:{cls}"
    if cls not in ADVISORY_CLASSES or _parts(signature)[0] not in OUTCOME_CLASSES:
        return head  # a plan's difference names the kinds of a whole group, not the pair a merge let through
    kinds = kinds_of([signature])
    return f"{head}:{'+'.join(kinds)}" if len(kinds) > 1 else head


def option_of(record: Record, settings: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """What a harm finding needs beyond the settings the engine picks for the table: ``python -O``,
    the hybrid manager off, the block-outermost layout ("" when nothing)."""
    needs = []
    if record.mode == "optimized":
        needs.append("python -O")
    table = (settings or {}).get(record.models[0], {}) if record.models else {}
    if record.clause == "PLAN-HYBRID-1" and table.get("hybrid", True):
        needs.append("hybrid manager off")
    if "block-outermost" in record.signature and not str(table.get("layout") or "").startswith("B"):
        needs.append("block-outermost layout")
    return ", ".join(needs)


def _summary(function: str, cls: str, signatures: Sequence[str], lines: Sequence[int]) -> str:
    text = _SUMMARIES.get(cls) or (f"raises {cls.removeprefix('raises-')}" if cls.startswith("raises-") else cls)
    fields = fields_of(signatures)
    shown = ", ".join(fields[:6]) + (f" +{len(fields) - 6}" if len(fields) > 6 else "")
    where = f" (l.{', '.join(str(n) for n in lines[:6])})" if cls == ASSERT_ROOT and len(lines) > 1 else ""
    return f"{function or '(engine)'} {text}{where}" + (f": {shown}" if shown else "")


def _rank(r: Record) -> tuple[int, int, int, int]:
    harm = r.clause.startswith(HARM_CLAUSES) and r.input == "corpus"
    return (0 if harm else 1, 0 if r.models else 1, 0 if r.mode == "normal" else 1, 0 if r.level == "MUST" else 1)


def _best_input(records: Sequence[Record]) -> str:
    from kvcontract.conformance.contract.inputs import best

    return best(*[r.input or ("corpus" if r.models else "synthetic") for r in records]) if records else "synthetic"


def build_defects(records: Sequence[Record], locations: Mapping[int, Mapping[str, Any]], *,
                  tables: Sequence[str] = (), reviews: Mapping[str, str] | None = None,
                  table_kinds: Mapping[str, Sequence[str]] | None = None,
                  settings: Mapping[str, Mapping[str, Any]] | None = None,
                  equivalents: Mapping[str, Sequence[str]] | None = None,
                  reach: Mapping[str, Mapping[str, Any]] | None = None) -> list[Defect]:
    """Group the findings among ``records`` (``locations``: index in ``records`` -> where the
    finding comes from) into defects, set each record's ``defect``; reachable MUST defects first.
    ``tables``/``table_kinds``/``settings``: the corpus the run fed (names, kinds, settings per
    table); ``equivalents``: per representative table, every table it stands for; ``reach``: per
    defect id, what tracing the corpus's plans found (:func:`latent_reason`)."""
    groups: dict[str, list[tuple[Record, Mapping[str, Any]]]] = {}
    for i, r in enumerate(records):
        loc = locations.get(i)
        if loc is None or r.status not in FINDING_STATUSES:
            continue
        function = str(loc.get("function") or "")
        defect_id = defect_key(function, outcome_class(loc, r.level), r.signature)
        r.defect = defect_id
        r.location = str(loc.get("location") or "")
        groups.setdefault(defect_id, []).append((r, loc))
    defects = [_defect(defect_id, members, tables, reviews or {}, table_kinds or {}, settings or {},
                       equivalents or {}, (reach or {}).get(defect_id, {}))
               for defect_id, members in groups.items()]
    order = {c: i for i, c in enumerate(CATEGORIES)}
    defects.sort(key=lambda d: (order.get(d.category, 3), TIERS.index(d.tier), -d.findings, d.id))
    return defects


def _expand(names: Iterable[str], equivalents: Mapping[str, Sequence[str]]) -> list[str]:
    out: list[str] = []
    for name in names:
        for n in equivalents.get(name, [name]):
            if n not in out:
                out.append(n)
    return out


def _defect(defect_id: str, members: list[tuple[Record, Mapping[str, Any]]], tables: Sequence[str],
            reviews: Mapping[str, str], table_kinds: Mapping[str, Sequence[str]],
            settings: Mapping[str, Mapping[str, Any]], equivalents: Mapping[str, Sequence[str]],
            reach: Mapping[str, Any]) -> Defect:
    recs = [r for r, _ in members]
    lines = sorted({int(str(loc["location"]).rsplit(":", 1)[1]) for _, loc in members
                    if str(loc.get("location", "")).rpartition(":")[2].isdigit()})
    counts: dict[str, int] = {}
    for _, loc in members:
        counts[str(loc.get("location", ""))] = counts.get(str(loc.get("location", "")), 0) + 1
    location = max(counts, key=lambda k: counts[k])
    function = defect_id.split(":", 1)[0]
    cls = defect_id.split(":")[1]
    signatures = sorted({r.signature for r in recs})
    level = "MUST" if any(r.level == "MUST" for r in recs) else "SHOULD"
    must_recs = [r for r in recs if r.level == "MUST"]
    input_class = _best_input(must_recs or recs)
    category = "advice" if level != "MUST" else "must" if input_class in ("corpus", "variation") else "synthetic"
    harm = [r for r in must_recs if r.clause.startswith(HARM_CLAUSES) and r.input == "corpus" and r.models]
    models = _expand(sorted({m for r in recs if r.input == "corpus" for m in r.models}) or
                     list(reach.get("reached", [])), equivalents)
    best = min(harm or recs, key=_rank)
    said = best.message.rsplit("[witness: ", 1)[-1].rstrip("]") if "[witness: " in best.message else best.message
    option = min((option_of(r, settings) for r in harm), key=len) if harm else ""
    tier = "reachable" if harm else "reached" if models or reach.get("reached") else "latent"
    return Defect(
        id=defect_id, location=location, lines=lines, function=function if function != "unlocated" else "",
        outcome=cls, summary=_summary(function, cls, signatures, lines), level=level, category=category,
        input=input_class, tier=tier, models=models,
        harm_models=_expand(sorted({m for r in harm for m in r.models}), equivalents), option=option,
        harm=said[:300] if harm else "",
        latent_reason="" if tier == "reachable" else latent_reason(
            tier, input_class, recs, tables, table_kinds, reach, models),
        kinds=kinds_of(signatures), clauses=sorted({r.clause for r in recs}),
        modes=sorted({r.mode for r in recs}), signatures=signatures, findings=len(recs),
        status=max((r.status for r in recs), key=lambda s: STATUS_RANK[s]),
        repro=best.snippet, representative=f"{best.clause}/{best.mode}[{best.signature}]",
        review=reviews.get(defect_id, ""))


def latent_reason(tier: str, input_class: str, records: Sequence[Record], tables: Sequence[str],
                  table_kinds: Mapping[str, Sequence[str]], reach: Mapping[str, Any],
                  models: Sequence[str]) -> str:
    """Why no corpus table's plan shows the defect, computed: no table holds such an input (and
    what is missing); tables hold it but planning them never calls the function (where the path
    stops); or planning reaches it with no harm."""
    if not tables:
        return "no corpus was fed to this run"
    if tier == "reached":
        who = ", ".join(list(models)[:3] or list(reach.get("reached", []))[:3])
        more = f" and {len(models) - 3} more" if len(models) > 3 else ""
        return (f"reached, no harm: {who}{more} reach{'es' if len(models) == 1 else ''} its code, and the "
                f"plan{'s' * (len(models) != 1)} the engine makes of {'it' if len(models) == 1 else 'them'} "
                "equal the reference's")
    present = {k for kinds in table_kinds.values() for k in kinds}
    per_finding = [set(kinds_of([r.signature])) for r in records]
    held = [k for k in per_finding if k <= present]
    needed = set().union(*held) if held else set().union(*per_finding)
    if not held and needed:
        missing = min((k - present for k in per_finding if k - present), key=len)
        return (f"no corpus table holds such an input: none of the {len(tables)} tables has "
                f"{' or '.join(sorted(missing))} layers")
    holding = reach.get("held_by", [])
    if holding:
        stops = reach.get("stops", "")
        return (f"{', '.join(holding[:3])}{' and more' if len(holding) > 3 else ''} hold such layers, but "
                f"planning them never calls {reach.get('function', 'its code')}" + (f" ({stops})" if stops else ""))
    fields = fields_of(r.signature for r in records)
    layers = f"{' and '.join(sorted(needed))} layers" if needed else "layers"
    what = f"{layers} that differ in {', '.join(fields[:4])}" if fields else f"the {layers} its witnesses hold"
    step = "one field away from a corpus layer" if input_class == "variation" else "synthetic"
    return f"no corpus table holds such an input: none has {what} (its inputs are {step})"


__all__ = ["ADVISORY_CLASSES", "FINDING_STATUSES", "HARM_CLAUSES", "build_defects", "defect_key", "fields_of", "kinds_of",
           "latent_reason", "option_of", "outcome_class"]
