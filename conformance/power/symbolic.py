"""``kvcontract mutants --symbolic``: the symbolic mode's power on the mutant catalogue,
next to the property suite's.

Every mutant (the catalogue and the known survivors of the property suite) is hunted
twice: by the property suite (:func:`kvcontract.conformance.power.hunt.run_mutants`, both
interpreter modes) and by the symbolic search
(:func:`kvcontract.conformance.run.symbolic.search.run_symbolic`, restricted to the
operation groups that can see the mutant's defect, stopping at the first finding). The
unmutated reference is searched too, as the control: no finding may show on it.
The report (schema ``mutants-symbolic`` version 1) renders as a terminal table here and
as ``docs/symbolic-vs-property.md`` (``scripts/symbolic_vs_property.py``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pydantic

import kvcontract
from kvcontract.conformance.contract.laws import SEARCH_OPERATIONS_OF
from kvcontract.conformance.engines.mutants import Mutant, mutant_class
from kvcontract.conformance.power.hunt import (
    CONTROL_NAME,
    Mode,
    Progress,
    Verdict,
    mutated_operations,
    run_mutants,
)
from kvcontract.conformance.run.symbolic.values import proof_line
from kvcontract.reports import ReportHeader, text_table

__all__ = [
    "SYMBOLIC_BUDGET_S",
    "SymbolicPowerReport",
    "SymbolicRow",
    "render_symbolic_table",
    "run_symbolic_power",
    "symbolic_hunt",
    "symbolic_operations",
]

SYMBOLIC_BUDGET_S = 60.0
"""CPU seconds of symbolic search per mutant and mode (it stops at the first finding)."""
PROOF_BUDGET_S = 150.0
"""CPU seconds for the reference's value groups (every kind's tree is exhausted in about 60)."""


class SymbolicRow(pydantic.BaseModel):
    """One mutant: found by property / found by symbolic / time to first finding."""

    mutant: str
    description: str
    known_gap: str = ""
    property_verdict: Verdict
    property_killed_by: list[str]
    property_modes: list[Mode]
    property_seconds: float | None
    symbolic_found: bool
    symbolic_mode: Mode | None = None
    symbolic_clauses: list[str] = []
    symbolic_signature: str = ""
    symbolic_seconds: float | None = None
    """CPU seconds of search to the first finding (in the mode that found it)."""
    symbolic_paths: int = 0
    """Paths explored up to the first finding (all paths when nothing was found)."""
    symbolic_operations: list[str] = []
    symbolic_snippet: str = ""


class SymbolicPowerReport(ReportHeader):
    """``kvcontract mutants --symbolic`` (schema ``mutants-symbolic`` version 1)."""

    schema_version: str = "1"
    kind: str = "mutants-symbolic"
    budget_s: float
    rows: list[SymbolicRow]
    control_findings: list[str]
    """Signatures the symbolic search found on the unmutated reference (must be empty)."""
    control_proofs: list[str] = []
    """The value groups on the reference, one line each: explored exhaustively within its
    bounds (a bounded proof of the role rules), or how far it got."""
    control_proofs_short: list[str] = []
    """The same lines without the bounds (the console's)."""
    seconds: float


def symbolic_operations(cls: type[Mutant]) -> list[str]:
    """The symbolic operation groups that can see mutant ``cls``'s defect."""
    from kvcontract.conformance.run.symbolic.search import OPERATIONS as SYMBOLIC_OPS
    from kvcontract.conformance.run.symbolic.values import VALUE_OPERATIONS

    mutated = mutated_operations(cls)
    if mutated is None:
        return list(SYMBOLIC_OPS)
    wanted = {op for m in mutated for op in SEARCH_OPERATIONS_OF.get(m, ())}
    wanted |= {op for op, base in VALUE_OPERATIONS.items() if base in wanted}  # the value groups too
    return [op for op in SYMBOLIC_OPS if op in wanted] or list(SYMBOLIC_OPS)


def symbolic_hunt(name: str, budget_s: float, progress: Progress | None = None) -> dict[str, Any]:
    """The symbolic search on mutant ``name`` to its first finding: the normal mode
    first, then (when it found nothing) ``python -O``."""
    from kvcontract.conformance.run.symbolic.session import run_symbolic

    ops = symbolic_operations(mutant_class(name))
    paths = 0
    for optimize, mode in (("off", "normal"), ("on", "optimized")):
        report = run_symbolic(f"mutant:{name}", budget_s=budget_s, optimize=optimize, operations=ops,
                              use_default_xfails=False, stop_on_finding=True)
        paths += sum(s.paths for s in report.searched)
        fails = [r for r in report.records if r.status == "fail"]
        if fails:
            first = min(fails, key=lambda r: r.seconds)
            if progress:
                progress(f"[symbolic] {name}: found by {first.clause} [{first.signature}] ({mode}, "
                         f"{first.seconds:.2f}s)")
            return {"symbolic_found": True, "symbolic_mode": mode,
                    "symbolic_clauses": sorted({r.clause for r in fails}), "symbolic_signature": first.signature,
                    "symbolic_seconds": first.seconds, "symbolic_paths": paths, "symbolic_operations": ops,
                    "symbolic_snippet": first.snippet}
    if progress:
        progress(f"[symbolic] {name}: not found ({paths} paths)")
    return {"symbolic_found": False, "symbolic_paths": paths, "symbolic_operations": ops}


def run_symbolic_power(names: Sequence[str], *, budget_s: float = SYMBOLIC_BUDGET_S, profile: str = "default",
                       seed_value: int = 0, progress: Progress | None = None) -> SymbolicPowerReport:
    """Property hunt (both modes) and symbolic hunt of every mutant in ``names``, and a
    symbolic control run on the reference."""
    from kvcontract.conformance.run.symbolic.session import run_symbolic

    start = time.perf_counter()
    prop = run_mutants(names, profile=profile, seed_value=seed_value, optimize="both", progress=progress)
    control = run_symbolic(CONTROL_NAME, budget_s=budget_s, optimize="both", use_default_xfails=False)
    proofs = run_symbolic(CONTROL_NAME, budget_s=max(budget_s, PROOF_BUDGET_S), optimize="off",
                          operations=["value-merge", "value-group"], use_default_xfails=False)
    rows = []
    for result in prop.mutants:
        found = symbolic_hunt(result.mutant, budget_s, progress)
        rows.append(SymbolicRow(
            mutant=result.mutant, description=result.description, known_gap=result.known_gap,
            property_verdict=result.verdict, property_killed_by=result.killed_by,
            property_modes=result.killed_in, property_seconds=result.seconds, **found))
    return SymbolicPowerReport(
        kit_version=kvcontract.__version__, engine="mutant catalogue", engine_version=kvcontract.__version__,
        profile=profile, seed=seed_value, budget_s=budget_s, rows=rows,
        control_findings=[f"{r.clause}/{r.mode}[{r.signature}]" for r in [*control.failing, *proofs.failing]],
        control_proofs=[proof_line(s.name, s.bounds, s.exhausted, s.paths, s.findings, s.unconfirmed)
                        for s in proofs.searched],
        control_proofs_short=[proof_line(s.name, s.bounds, s.exhausted, s.paths, s.findings, s.unconfirmed,
                                         short=True) for s in proofs.searched],
        seconds=round(time.perf_counter() - start, 3))


def render_symbolic_table(report: SymbolicPowerReport) -> str:
    """Mutant | property verdict and time | symbolic verdict, time and paths | the clauses
    the symbolic search failed; then the totals and the symbolic control."""
    rows = [[r.mutant, r.property_verdict if r.property_verdict != "survived" else "SURVIVED",
             f"{r.property_seconds:.2f}s" if r.property_seconds is not None else "-",
             f"found ({r.symbolic_mode})" if r.symbolic_found else "NOT FOUND",
             f"{r.symbolic_seconds:.2f}s" if r.symbolic_seconds is not None else "-",
             r.symbolic_paths, ", ".join(r.symbolic_clauses) or "-"] for r in report.rows]
    lines = [f"kvcontract mutants --symbolic: {len(report.rows)} mutants (property profile {report.profile}, "
             f"symbolic budget {report.budget_s:g} CPU s per mode)", "",
             *text_table(["mutant", "property", "first", "symbolic", "first", "paths", "clauses (symbolic)"],
                         rows, align="<<><>><")]
    found = sum(r.symbolic_found for r in report.rows)
    killed = sum(r.property_verdict == "killed" for r in report.rows)
    lines += ["", f"property: {killed}/{len(report.rows)} killed; symbolic: {found}/{len(report.rows)} found; "
              f"symbolic control (reference): "
              + ("no finding" if not report.control_findings else "FINDINGS " + ", ".join(report.control_findings)),
              *(f"  {p}" for p in report.control_proofs_short),
              *(["  (each value group's bounds: --json, 'control_proofs')"] if report.control_proofs else []),
              f"{report.seconds:.0f}s in all"]
    return "\n".join(lines)
