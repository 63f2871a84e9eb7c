"""``kvcontract mutants``: the suite against the mutant catalogue — evidence that it fails
engines that are wrong.

Each mutant (:mod:`kvcontract.conformance.engines.mutants`) is the reference with one
realistic defect. The run hunts every mutant to its first failing clause, in
this interpreter's mode and under ``python -O`` (each mode in its own
supervised worker, concurrently), and prints one row per mutant: killed or
survived, the clause(s) that killed it, in which mode, and the time to the
first failure. The unmutated reference runs first in each mode as the
control: no clause may fail on it. A clause whose law calls none of the
operations a mutant overrides is not rerun on it (there the mutant is the
reference); ``--exhaustive`` runs every clause on every mutant.

Exit codes: 0 every mutant killed and the control clean, 1 otherwise, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pydantic

import kvcontract
from kvcontract.conformance.contract.laws import (
    CLAUSE_ORDER,
    DERIVED,
    LAWS,
    SEARCH_OPERATIONS_OF,
    law,
)
from kvcontract.conformance.contract.model import ENGINE_OPERATIONS
from kvcontract.conformance.engines.mutants import KNOWN_SURVIVORS, MUTANTS, Mutant, mutant_class
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.run.session import (
    CLAUSE_TIMEOUT_S,
    EXAMPLE_TIMEOUT_S,
    PROFILES,
    failure_record,
)
from kvcontract.conformance.run.worker import Worker
from kvcontract.reports import ReportHeader, write_atomic
from kvcontract.usage import UsageError

Mode = Literal["normal", "optimized"]
Verdict = Literal["killed", "survived", "error"]
Progress = Callable[[str], None]

CONTROL_NAME = "reference"
CONTROL_DESCRIPTION = "the reference, unmutated (control: no clause may fail on it)"

OPERATIONS: tuple[str, ...] = tuple(op for op in ENGINE_OPERATIONS if op != "introspect")
"""The engine operations the laws call that a mutant may override."""


def mutated_operations(cls: type[Mutant]) -> frozenset[str] | None:
    """The operations in which mutant ``cls`` differs from the reference engine, or
    None when it changes what the laws draw or skip (then every clause runs)."""
    if cls.supports_empty_merge != ReferenceEngine.supports_empty_merge or any(
            getattr(cls, n) is not getattr(ReferenceEngine, n)
            for n in ("unsupported_kinds", "unsupported_fields")):
        return None
    return frozenset(op for op in OPERATIONS
                     if getattr(cls, op, None) is not getattr(Mutant, op, getattr(ReferenceEngine, op, None)))


def affected(clause: str, mutated: frozenset[str] | None) -> bool:
    if mutated is None or clause not in CLAUSE_ORDER:
        return True
    return bool(law(clause).operations & mutated)


class ModeOutcome(pydantic.BaseModel):
    """The suite against one engine in one interpreter mode."""

    mode: Mode
    status: Verdict
    clauses: list[str] = []
    """Failing clauses: the first one (every one, when exhaustive)."""
    signatures: list[str] = []
    seconds: float = 0.0
    """Time to the first failure; the whole pass when nothing failed."""
    laws_run: int = 0
    passed: list[str] = []
    """Clauses that held (or were skipped by their law), including the unaffected ones."""
    unaffected: list[str] = []
    message: str = ""
    snippet: str = ""
    witness: dict[str, Any] | None = None
    errors: list[str] = []
    """``CLAUSE: message`` of laws that could not judge (status error)."""


class MutantResult(pydantic.BaseModel):
    """One mutant (or the control) across the modes."""

    mutant: str
    engine: str
    description: str
    imitates: str
    expected_clauses: list[str]
    known_gap: str = ""
    verdict: Verdict
    killed_by: list[str]
    killed_in: list[Mode]
    seconds: float | None
    outcomes: list[ModeOutcome]


class MutantsReport(ReportHeader):
    """A whole ``kvcontract mutants`` run (schema ``mutants`` version 2)."""

    schema_version: str = "2"
    kind: str = "mutants"
    modes: list[Mode]
    exhaustive: bool
    mutants: list[MutantResult]
    control: MutantResult
    seconds: float

    @property
    def survivors(self) -> list[str]:
        return [m.mutant for m in self.mutants if m.verdict == "survived"]

    @property
    def ok(self) -> bool:
        """Every mutant killed, and the control not."""
        return all(m.verdict == "killed" for m in self.mutants) and self.control.verdict == "survived"


# -- the hunt, supervised ----------------------------------------------------------------


def hunt(worker: Worker, engine: str, mode: Mode, *, profile: str, seed_value: int, exhaustive: bool,
         mutated: frozenset[str] | None, clause_timeout: float = CLAUSE_TIMEOUT_S,
         example_timeout: float = EXAMPLE_TIMEOUT_S) -> ModeOutcome:
    """Run the laws against ``engine`` in ``worker``, in SPEC.md order, to the first
    failing clause (every clause when ``exhaustive``)."""
    start = time.perf_counter()
    failed: list[Any] = []
    passed: list[str] = []
    unaffected: list[str] = []
    errors: list[Any] = []
    first_failure: float | None = None
    for law_ in LAWS:
        if not exhaustive and not affected(law_.clause, mutated):
            unaffected.append(law_.clause)
            continue
        result = worker.run("kvcontract.conformance.run.session:law_task",
                            {"engine": engine, "clause": law_.clause, "profile": profile,
                             "seed": seed_value, "xfails": None},
                            timeout=clause_timeout, heartbeat=example_timeout)
        records = ([r for r in result.value["records"]] if result.ok
                   else [failure_record(law_.clause, mode, result).model_dump()])
        fails = [r for r in records if r["status"] == "fail"]
        errs = [r for r in records if r["status"] == "error"]
        if fails:
            failed += fails
            if first_failure is None:
                first_failure = time.perf_counter() - start
        elif errs:
            errors += errs
        else:
            passed.append(law_.clause)
        if (failed or errors) and not exhaustive:
            break
    total = time.perf_counter() - start
    status: Verdict = "killed" if failed else "error" if errors else "survived"
    head = failed[0] if failed else errors[0] if errors else None
    clauses = list(dict.fromkeys(r["clause"] for r in failed))
    return ModeOutcome(
        mode=mode, status=status, clauses=clauses, signatures=[r["signature"] for r in failed],
        seconds=round(first_failure if first_failure is not None else total, 3),
        laws_run=len(clauses) + len(passed) + len({r["clause"] for r in errors}),
        passed=sorted([*passed, *unaffected], key=CLAUSE_ORDER.__getitem__), unaffected=unaffected,
        message=head["message"] if head else "", snippet=head.get("snippet", "") if head else "",
        witness=head.get("witness") if head else None,
        errors=[f"{r['clause']}: {r['message']}" for r in errors])


def _hunt_mode(mode: Mode, names: Sequence[str], out: dict[str, ModeOutcome], *, profile: str,
               seed_value: int, exhaustive: bool, progress: Progress | None) -> None:
    with Worker(optimized=mode == "optimized") as worker:
        for name in [CONTROL_NAME, *names]:
            engine = CONTROL_NAME if name == CONTROL_NAME else f"mutant:{name}"
            mutated = frozenset() if name == CONTROL_NAME else mutated_operations(mutant_class(name))
            outcome = hunt(worker, engine, mode, profile=profile, seed_value=seed_value,
                           exhaustive=exhaustive or name == CONTROL_NAME, mutated=mutated)
            out[name] = outcome
            if progress:
                what = f"{outcome.status} by {', '.join(outcome.clauses)}" if outcome.clauses else outcome.status
                progress(f"[{mode}] {name}: {what} ({outcome.seconds:.2f}s, {outcome.laws_run} laws run)")


def combine(name: str, outcomes: Sequence[ModeOutcome]) -> MutantResult:
    """One result from the per-mode outcomes of mutant ``name`` (or the control)."""
    by_mode = {o.mode: o for o in outcomes}
    normal, optimized = by_mode.get("normal"), by_mode.get("optimized")
    if normal is not None and optimized is not None and optimized.status == "killed":
        for derived, sources in DERIVED.items():
            if any(c in sources and c in normal.passed for c in optimized.clauses) \
                    and derived not in optimized.clauses:
                by_mode["optimized"] = optimized.model_copy(
                    update={"clauses": [*optimized.clauses, derived]})
    ordered = [by_mode[m] for m in ("normal", "optimized") if m in by_mode]
    order = dict(CLAUSE_ORDER)
    killing = [o for o in ordered if o.status == "killed"]
    verdict: Verdict = ("killed" if killing else
                        "error" if any(o.status == "error" for o in ordered) else "survived")
    if name == CONTROL_NAME:
        engine, description, imitates, expected, gap = CONTROL_NAME, CONTROL_DESCRIPTION, "", [], ""
    else:
        cls = mutant_class(name)
        engine, description, imitates, gap = f"mutant:{cls.key}", cls.description, cls.imitates, cls.gap
        expected = list(cls.expected_clauses)
    return MutantResult(
        mutant=name, engine=engine, description=description, imitates=imitates,
        expected_clauses=expected, known_gap=gap, verdict=verdict,
        killed_by=sorted({c for o in killing for c in o.clauses}, key=lambda c: order.get(c, len(order))),
        killed_in=[o.mode for o in killing],
        seconds=killing[0].seconds if killing else None, outcomes=ordered)


def run_mutants(names: Sequence[str] | None = None, *, profile: str = "default", seed_value: int = 0,
                optimize: str = "both", exhaustive: bool = False,
                progress: Progress | None = None) -> MutantsReport:
    """Hunt every mutant in ``names`` (default: the catalogue) in the modes of
    ``optimize`` (off/on/both), with the control, and combine the outcomes."""
    names = list(MUTANTS) if names is None else [n.removeprefix("mutant:") for n in names]
    for name in names:
        mutant_class(name)
    start = time.perf_counter()
    wanted: list[tuple[Mode, bool]] = [("normal", optimize in ("off", "both")),
                                       ("optimized", optimize in ("on", "both"))]
    modes: list[Mode] = [m for m, on in wanted if on]
    per_mode: dict[Mode, dict[str, ModeOutcome]] = {m: {} for m in modes}
    threads = [threading.Thread(target=_hunt_mode, args=(m, names, per_mode[m]),
                                kwargs={"profile": profile, "seed_value": seed_value, "exhaustive": exhaustive,
                                        "progress": progress}) for m in modes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = {n: combine(n, [per_mode[m][n] for m in modes if n in per_mode[m]])
               for n in [CONTROL_NAME, *names]}
    return MutantsReport(
        kit_version=kvcontract.__version__, engine="mutant catalogue", engine_version=kvcontract.__version__,
        profile=profile, seed=seed_value, modes=modes, exhaustive=exhaustive,
        mutants=[results[n] for n in names], control=results[CONTROL_NAME],
        seconds=round(time.perf_counter() - start, 3))


# -- the verb ----------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mutants", help="run the suite against the mutant catalogue; every mutant must be killed",
        description="Hunt each catalogue mutant (the reference with one realistic defect) to its first "
                    "failing clause, in both interpreter modes, after a control run of the reference. "
                    "Exit 0 when every mutant is killed and the control is clean, 1 otherwise.")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES),
                   help="examples per clause: quick (systematic phase only), default (+100 random), "
                        "thorough (+1000 random); default: default")
    p.add_argument("--optimize", default="both", choices=("off", "on", "both"),
                   help="interpreter modes: off (normal), on (python -O), both (default)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (schema 'mutants' v2)")
    p.add_argument("--seed", type=int, default=0, help="hypothesis seed of the random phase (default 0)")
    p.add_argument("--mutants", metavar="NAMES",
                   help="comma-separated mutant names (default: the catalogue; see --list)")
    p.add_argument("--exhaustive", action="store_true",
                   help="run every clause on every mutant, not only to the first failure (slow)")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--symbolic", action="store_true",
                   help="also hunt every mutant (catalogue and known survivors) with the symbolic mode and print "
                        "found by property / found by symbolic / time to first finding "
                        "(--json: schema 'mutants-symbolic')")
    p.add_argument("--symbolic-budget", type=float, default=SYMBOLIC_BUDGET_S,
                   help=f"CPU seconds of symbolic search per mutant and mode (default {SYMBOLIC_BUDGET_S:g})")
    p.set_defaults(func=run)


def _selected(spec: str | None) -> list[str]:
    if not spec:
        return list(MUTANTS)
    names = [n.strip().removeprefix("mutant:") for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in MUTANTS and n not in KNOWN_SURVIVORS]
    if unknown or not names:
        raise UsageError(f"unknown mutant(s) {', '.join(unknown) or repr(spec)}; known: "
                         f"{', '.join([*MUTANTS, *KNOWN_SURVIVORS])}")
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> int:
    names = _selected(args.mutants)
    if args.list:
        print(render_catalogue())
        return 0
    if args.symbolic:
        return run_symbolic_verb(args, names if args.mutants else [*MUTANTS, *KNOWN_SURVIVORS])
    report = run_mutants(names, profile=args.profile, seed_value=args.seed, optimize=args.optimize,
                         exhaustive=args.exhaustive, progress=None if args.quiet else _stderr)
    print(render_table(report))
    if args.json:
        write_atomic(args.json, report.model_dump_json(indent=2) + "\n")
    return 0 if report.ok else 1


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- rendering ----------------------------------------------------------------------------


def _killers(result: MutantResult) -> str:
    per_mode = {o.mode: o.clauses for o in result.outcomes if o.status == "killed"}
    if len(per_mode) == 2 and per_mode["normal"] != per_mode["optimized"]:
        return "; ".join(f"{', '.join(c)} ({m})" for m, c in per_mode.items())
    return ", ".join(result.killed_by) or "-"


def _mode_cell(result: MutantResult) -> str:
    if len(result.killed_in) == 2:
        return "both"
    return result.killed_in[0] if result.killed_in else "-"


def render_table(report: MutantsReport) -> str:
    """Mutant | verdict | mode | time to first failure | killed by; then the control
    and the details of every survivor or error."""
    width = max([24, *(len(r.mutant) for r in report.mutants)])
    header = f"{'mutant':<{width}} {'verdict':<9} {'mode':<9} {'first failure':>13}  killed by"
    lines = [f"kvcontract mutants: {len(report.mutants)} mutants (profile {report.profile}, "
             f"seed {report.seed}, modes {'+'.join(report.modes)})", "", header, "-" * len(header)]
    for r in report.mutants:
        verdict = r.verdict if r.verdict != "survived" else "SURVIVED"
        seconds = f"{r.seconds:.2f}s" if r.seconds is not None else "-"
        lines.append(f"{r.mutant:<{width}} {verdict:<9} {_mode_cell(r):<9} {seconds:>13}  {_killers(r)}")
    control = report.control
    clean = control.verdict == "survived"
    lines += ["", f"control ({control.engine}): "
              + ("no clause fails in " + "+".join(report.modes) if clean
                 else f"{control.verdict.upper()}: {_killers(control)}")]
    killed = sum(r.verdict == "killed" for r in report.mutants)
    lines.append(f"{killed}/{len(report.mutants)} killed in {report.seconds:.1f}s")
    for r in report.mutants:
        if r.verdict == "survived":
            lines += ["", f"=== SURVIVED {r.mutant}: {r.description}",
                      f"expected to fail: {', '.join(r.expected_clauses)}"]
            if r.known_gap:
                lines.append(f"known gap: {r.known_gap}")
        elif r.verdict == "error":
            lines += ["", f"=== ERROR {r.mutant}: " + "; ".join(e for o in r.outcomes for e in o.errors)]
    for o in control.outcomes:
        if o.status != "survived":
            lines += ["", f"=== CONTROL {o.status.upper()} [{o.mode}] {', '.join(o.clauses)}: "
                      f"{o.message or '; '.join(o.errors)}"]
            if o.snippet:
                lines += ["--- repro ---", o.snippet.rstrip()]
    return "\n".join(lines)


def render_catalogue() -> str:
    """Every mutant: name, defect, what it imitates, the clauses it should fail."""
    lines = []
    for title, registry in (("catalogue", MUTANTS), ("known survivors", KNOWN_SURVIVORS)):
        lines.append(f"{title}:")
        for key, cls in registry.items():
            lines.append(f"  {key}: {cls.description}")
            if cls.imitates:
                lines.append(f"      imitates: {cls.imitates}")
            lines.append(f"      should fail: {', '.join(cls.expected_clauses)}")
            if cls.gap:
                lines.append(f"      gap: {cls.gap}")
    return "\n".join(lines)


def render_markdown(report: MutantsReport) -> str:
    """``docs/mutants.md``, generated from a ``kvcontract mutants --json`` report."""
    lines = ["# Mutant catalogue: what the suite kills", "",
             f"Generated by `python scripts/mutants_doc.py` from `kvcontract mutants --profile {report.profile} "
             f"--seed {report.seed} --json` (kvcontract {report.kit_version}, modes "
             f"{' + '.join(report.modes)}, {report.seconds:.0f} s). Do not edit by hand.", "",
             f"{sum(r.verdict == 'killed' for r in report.mutants)}/{len(report.mutants)} mutants killed; "
             f"control ({report.control.engine}): "
             f"{'no clause fails' if report.control.verdict == 'survived' else report.control.verdict.upper()}.", "",
             "| mutant | defect | imitates | verdict | mode | first failure | killed by |",
             "|---|---|---|---|---|---|---|"]
    for r in report.mutants:
        seconds = f"{r.seconds:.2f} s" if r.seconds is not None else "-"
        cells = [f"`{r.mutant}`", r.description, r.imitates or "-", r.verdict, _mode_cell(r), seconds,
                 _killers(r)]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"


# -- --symbolic: the symbolic mode's power on the catalogue, next to the property suite's ----------

SYMBOLIC_BUDGET_S = 60.0
"""CPU seconds of symbolic search per mutant and mode (it stops at the first finding)."""

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
    seconds: float


def symbolic_operations(cls: type[Mutant]) -> list[str]:
    """The symbolic operation groups that can see mutant ``cls``'s defect."""
    from kvcontract.conformance.run.symbolic.search import OPERATIONS as SYMBOLIC_OPS

    mutated = mutated_operations(cls)
    if mutated is None:
        return list(SYMBOLIC_OPS)
    wanted = {op for m in mutated for op in SEARCH_OPERATIONS_OF.get(m, ())}
    return [op for op in SYMBOLIC_OPS if op in wanted] or list(SYMBOLIC_OPS)


def symbolic_hunt(name: str, budget_s: float, progress: Progress | None = None) -> dict[str, Any]:
    """The symbolic search on mutant ``name`` to its first finding: the normal mode
    first, then (when it found nothing) ``python -O``."""
    from kvcontract.conformance.run.symbolic.search import run_symbolic

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
    from kvcontract.conformance.run.symbolic.search import run_symbolic

    start = time.perf_counter()
    prop = run_mutants(names, profile=profile, seed_value=seed_value, optimize="both", progress=progress)
    control = run_symbolic(CONTROL_NAME, budget_s=budget_s, optimize="both", use_default_xfails=False)
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
        control_findings=[f"{r.clause}/{r.mode}[{r.signature}]" for r in control.failing],
        seconds=round(time.perf_counter() - start, 3))


def render_symbolic_table(report: SymbolicPowerReport) -> str:
    width = max([24, *(len(r.mutant) for r in report.rows)])
    header = (f"{'mutant':<{width}} {'property':<10} {'first':>8}  {'symbolic':<16} {'first':>8} {'paths':>6}  "
              "clauses (symbolic)")
    lines = [f"kvcontract mutants --symbolic: {len(report.rows)} mutants (property profile {report.profile}, "
             f"symbolic budget {report.budget_s:g} CPU s per mode)", "", header, "-" * len(header)]
    for r in report.rows:
        prop = r.property_verdict if r.property_verdict != "survived" else "SURVIVED"
        pfirst = f"{r.property_seconds:.2f}s" if r.property_seconds is not None else "-"
        sym = f"found ({r.symbolic_mode})" if r.symbolic_found else "NOT FOUND"
        sfirst = f"{r.symbolic_seconds:.2f}s" if r.symbolic_seconds is not None else "-"
        lines.append(f"{r.mutant:<{width}} {prop:<10} {pfirst:>8}  {sym:<16} {sfirst:>8} {r.symbolic_paths:>6}  "
                     f"{', '.join(r.symbolic_clauses) or '-'}")
    found = sum(r.symbolic_found for r in report.rows)
    killed = sum(r.property_verdict == "killed" for r in report.rows)
    lines += ["", f"property: {killed}/{len(report.rows)} killed; symbolic: {found}/{len(report.rows)} found; "
              f"symbolic control (reference): "
              + ("no finding" if not report.control_findings else "FINDINGS " + ", ".join(report.control_findings)),
              f"{report.seconds:.0f}s in all"]
    return "\n".join(lines)


def run_symbolic_verb(args: argparse.Namespace, names: Sequence[str]) -> int:
    if args.symbolic_budget <= 0:
        raise UsageError("--symbolic-budget must be positive")
    report = run_symbolic_power(names, budget_s=args.symbolic_budget, profile=args.profile, seed_value=args.seed,
                                progress=None if args.quiet else _stderr)
    print(render_symbolic_table(report))
    if args.json:
        write_atomic(args.json, report.model_dump_json(indent=2) + "\n")
    return 0 if all(r.symbolic_found for r in report.rows) and not report.control_findings else 1
