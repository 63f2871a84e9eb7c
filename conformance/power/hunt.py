"""The mutant hunt behind ``kvcontract mutants``: the suite against the mutant catalogue —
evidence that it fails engines that are wrong.

Each mutant (:mod:`kvcontract.conformance.engines.mutants`) is the reference with one
realistic defect. The run hunts every mutant to its first failing MUST clause
(a SHOULD clause's failure is noted on the way), in this interpreter's mode and under ``python -O`` (each mode in its own
supervised worker, concurrently), and prints one row per mutant: killed or
survived, the clause(s) that killed it, in which mode, and the time to the
first failure. The unmutated reference runs first in each mode as the
control: no clause may fail on it. A clause whose law calls none of the
operations a mutant overrides is not rerun on it (there the mutant is the
reference); ``--exhaustive`` runs every clause on every mutant.

The command line is :mod:`kvcontract.conformance.cli.mutants`; the symbolic mode's hunt on
the same catalogue (``--symbolic``) is :mod:`kvcontract.conformance.power.symbolic`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pydantic

import kvcontract
from kvcontract.conformance.contract.laws import CLAUSE_ORDER, DERIVED, LAWS, law
from kvcontract.conformance.contract.model import ENGINE_OPERATIONS
from kvcontract.conformance.engines.mutants import KNOWN_SURVIVORS, MUTANTS, Mutant, mutant_class
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.reports.check import optimize_modes
from kvcontract.conformance.reports.witness import WitnessData
from kvcontract.conformance.run.session import CLAUSE_TIMEOUT_S, EXAMPLE_TIMEOUT_S
from kvcontract.conformance.run.tasks import LAW_TASK
from kvcontract.conformance.run.verdicts import failure_record
from kvcontract.conformance.run.worker import Worker
from kvcontract.reports import ReportHeader, markdown_table, text_table

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
    """Failing clauses: the first MUST one first, then the SHOULD ones met on the way (every one,
    when exhaustive)."""
    signatures: list[str] = []
    seconds: float = 0.0
    """Time to the first failure; the whole pass when nothing failed."""
    laws_run: int = 0
    passed: list[str] = []
    """Clauses that held (or were skipped by their law), including the unaffected ones."""
    unaffected: list[str] = []
    message: str = ""
    snippet: str = ""
    witness: WitnessData = None
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
         example_timeout: float = EXAMPLE_TIMEOUT_S, corpus: str | None = None) -> ModeOutcome:
    """Run the laws against ``engine`` in ``worker``, in SPEC.md order, to the first
    failing MUST clause (every clause when ``exhaustive``); SHOULD failures on the way count.
    ``corpus``: the corpus file the laws are fed first (every engine gets the same)."""
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
        result = worker.run(LAW_TASK,
                            {"engine": engine, "clause": law_.clause, "profile": profile,
                             "seed": seed_value, "xfails": None, "corpus": corpus},
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
        # A SHOULD clause's failure is a kill, but not the defect the mutant plants: the hunt
        # goes on to the first MUST clause that fails (or an error), so a mutant that also
        # breaks a recommendation is still shown dying of its own defect.
        if (errors or any(r.get("level") != "SHOULD" for r in fails)) and not exhaustive:
            break
    total = time.perf_counter() - start
    status: Verdict = "killed" if failed else "error" if errors else "survived"
    must = [r for r in failed if r.get("level") != "SHOULD"]
    failed = must + [r for r in failed if r.get("level") == "SHOULD"]  # the planted defect first
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
               seed_value: int, exhaustive: bool, progress: Progress | None, corpus: str | None) -> None:
    with Worker(optimized=mode == "optimized") as worker:
        for name in [CONTROL_NAME, *names]:
            engine = CONTROL_NAME if name == CONTROL_NAME else f"mutant:{name}"
            mutated = frozenset() if name == CONTROL_NAME else mutated_operations(mutant_class(name))
            outcome = hunt(worker, engine, mode, profile=profile, seed_value=seed_value,
                           exhaustive=exhaustive or name == CONTROL_NAME, mutated=mutated, corpus=corpus)
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
                progress: Progress | None = None, corpus: str | None = "auto") -> MutantsReport:
    """Hunt every mutant in ``names`` (default: the catalogue) in the modes of
    ``optimize`` (off/on/both), with the control, and combine the outcomes; every mutant is fed the
    corpus every engine is (``auto``: the pinned vLLM release's; a path; None: none)."""
    names = list(MUTANTS) if names is None else [n.removeprefix("mutant:") for n in names]
    for name in names:
        mutant_class(name)
    if corpus == "auto":
        from kvcontract.conformance.engines.corpora import resolve

        chosen = resolve(CONTROL_NAME, "auto").path
        corpus = str(chosen) if chosen else None
    start = time.perf_counter()
    modes: list[Mode] = optimize_modes(optimize)
    per_mode: dict[Mode, dict[str, ModeOutcome]] = {m: {} for m in modes}
    threads = [threading.Thread(target=_hunt_mode, args=(m, names, per_mode[m]),
                                kwargs={"profile": profile, "seed_value": seed_value, "exhaustive": exhaustive,
                                        "progress": progress, "corpus": corpus}) for m in modes]
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


# -- rendering ----------------------------------------------------------------------------


def _killers(result: MutantResult) -> str:
    per_mode = {o.mode: o.clauses for o in result.outcomes if o.status == "killed"}
    if len(per_mode) == 2 and per_mode["normal"] != per_mode["optimized"]:
        return "; ".join(f"{', '.join(c)} ({m})" for m, c in per_mode.items())
    return ", ".join(result.killed_by) or "-"


def _killed_in(result: MutantResult) -> str:
    if len(result.killed_in) == 2:
        return "both"
    return result.killed_in[0] if result.killed_in else "-"


def render_table(report: MutantsReport) -> str:
    """Mutant | verdict | mode | time to first failure | killed by; then the control
    and the details of every survivor or error."""
    rows = [[r.mutant, r.verdict if r.verdict != "survived" else "SURVIVED", _killed_in(r),
             f"{r.seconds:.2f}s" if r.seconds is not None else "-", _killers(r)] for r in report.mutants]
    lines = [f"kvcontract mutants: {len(report.mutants)} mutants (profile {report.profile}, "
             f"seed {report.seed}, modes {'+'.join(report.modes)})", "",
             *text_table(["mutant", "verdict", "mode", "first failure", "killed by"], rows, align="<<<><")]
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


def render_markdown(report: MutantsReport, others: Sequence[MutantsReport] = ()) -> str:
    """``docs/mutants.md``, generated from a ``kvcontract mutants --json`` report; ``others``:
    runs at other profiles and seeds, shown as one verdict column each (first failing clause)."""
    lines = ["# Mutant catalogue: what the suite kills", "",
             f"Generated by `python scripts/mutants_doc.py` from `kvcontract mutants --profile {report.profile} "
             f"--seed {report.seed} --json` (kvcontract {report.kit_version}, modes "
             f"{' + '.join(report.modes)}, {report.seconds:.0f} s). Do not edit by hand.", "",
             f"{sum(r.verdict == 'killed' for r in report.mutants)}/{len(report.mutants)} mutants killed; "
             f"control ({report.control.engine}): "
             f"{'no clause fails' if report.control.verdict == 'survived' else report.control.verdict.upper()}.", "",
             *markdown_table(
                 ["mutant", "defect", "imitates", "verdict", "mode", "first failure", "killed by"],
                 [[f"`{r.mutant}`", r.description, r.imitates or "-", r.verdict, _killed_in(r),
                   f"{r.seconds:.2f} s" if r.seconds is not None else "-", _killers(r)]
                  for r in report.mutants])]
    if KNOWN_SURVIVORS:
        lines += ["", "Known survivors, outside the catalogue (the property suite cannot reach them; "
                  "`kvcontract mutants --symbolic` hunts them too): "
                  + "; ".join(f"`{k}` ({cls.gap})" for k, cls in KNOWN_SURVIVORS.items()) + "."]
    if others:
        lines += ["", *_across_runs([report, *others])]
    return "\n".join(lines) + "\n"


def _run_name(report: MutantsReport) -> str:
    return f"{report.profile}, seed {report.seed}"


def _across_runs(reports: Sequence[MutantsReport]) -> list[str]:
    """One column per run (profile, seed): each mutant's verdict and its first failing clause."""
    names = list(dict.fromkeys(m.mutant for r in reports for m in r.mutants))
    by_run = [{m.mutant: m for m in r.mutants} for r in reports]

    def cell(result: MutantResult | None) -> str:
        if result is None:
            return "not run"
        if result.verdict == "killed" and result.killed_by:
            return f"killed ({result.killed_by[0]})"
        return result.verdict

    summary = "; ".join(f"{_run_name(r)}: {sum(m.verdict == 'killed' for m in r.mutants)}/{len(r.mutants)} killed, "
                        f"control {'clean' if r.control.verdict == 'survived' else r.control.verdict}, "
                        f"{r.seconds:.0f} s" for r in reports)
    return ["## Across profiles and seeds", "",
            "The catalogue hunted at each profile and seed (`kvcontract mutants --profile P --seed S`); "
            "a cell is the verdict and the first clause that failed. The quick profile has no random "
            "phase, so its seeds differ only in name.", "",
            f"{summary}.", "",
            *markdown_table(["mutant", *(_run_name(r) for r in reports)],
                            [[f"`{n}`", *(cell(run.get(n)) for run in by_run)] for n in names])]
