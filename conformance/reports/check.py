"""The ``check`` report: findings keyed by signature, per-clause runs, the terminal table.

Schema ``check`` version 2 (version 1 had one record per clause x mode):

- the header of every kvcontract report (:class:`kvcontract.reports.ReportHeader`);
- ``records``: one per *finding* — clause x mode x signature — with status
  ``fail`` (new), ``xfail`` (known, its pinned witness still fails with that
  signature) or ``xpass`` (known, its witness no longer does); one ``error``
  per distinct failure of the kit's own code (or a hung / crashed worker),
  naming the example; a ``pass`` or ``skip`` record for a clause with
  nothing else;
- ``clauses``: one :class:`ClauseRun` per clause x mode (examples, systematic
  examples, (kind, field) pairs exercised of the total, time);
- ``coverage``: ``"Kind.field"`` -> the clauses whose examples exercised it;
- ``engine_log``: per mode, the last lines the engine printed (captured, not shown).
- ``complete`` (default true) and ``not_run``: a run stopped by SIGINT or SIGTERM
  writes what ran, with ``complete`` false and the clause x mode runs it did not finish.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal
from xml.sax.saxutils import escape, quoteattr

import pydantic

from kvcontract.conformance.reports.witness import WitnessData
from kvcontract.reports import ReportHeader, text_table, write_atomic

SCHEMA_VERSION = "2"
Status = Literal["pass", "fail", "skip", "xfail", "xpass", "error"]
Mode = Literal["normal", "optimized"]
FAILING: frozenset[str] = frozenset({"fail", "xpass", "error"})
STATUS_RANK: dict[str, int] = {"error": 5, "fail": 4, "xpass": 3, "xfail": 2, "pass": 1, "skip": 0}
"""How bad each status is (the one ranking: a clause's cell, a run's status, the report's order)."""
OPTIMIZE_CHOICES = ("off", "on", "both")
"""``--optimize``: the normal interpreter only, ``python -O`` only, or both."""


def optimize_modes(optimize: str) -> list[Mode]:
    """The interpreter modes of an ``--optimize`` value (``off``/``on``/``both``), normal first."""
    if optimize not in OPTIMIZE_CHOICES:
        raise ValueError(f"optimize must be one of {', '.join(OPTIMIZE_CHOICES)}, not {optimize!r}")
    modes: list[Mode] = []
    if optimize in ("off", "both"):
        modes.append("normal")
    if optimize in ("on", "both"):
        modes.append("optimized")
    return modes


class Record(pydantic.BaseModel):
    """One finding (or the outcome of a clause with none) in one interpreter mode."""

    clause: str
    title: str
    level: str
    mode: Mode
    status: Status
    signature: str = ""
    """What went wrong in engine terms: ``outcome:Kind+Kind:field,field``."""
    examples: int = 0
    seconds: float = 0.0
    message: str = ""
    snippet: str = ""
    witness: WitnessData = None
    """The example that shows it (:class:`~kvcontract.conformance.reports.witness.Witness`'s shape)."""
    phase: str = ""
    """Where the witness comes from: systematic, random (shrunk), witness (pinned)."""
    where: str = ""
    """For an error: the last frame of the kit's exception."""
    defect: str = ""
    """For a finding: the id of its :class:`Defect` (the engine code that causes it)."""
    location: str = ""
    """For a finding: ``file:line`` in the engine where it arises."""
    models: list[str] = []
    """The corpus tables that show this finding (each stands for the tables a planner cannot tell apart)."""
    input: str = ""
    """The best input that shows it in this run: ``corpus`` (a corpus table, a spec or group of one),
    ``variation`` (one field of one corpus layer changed to a value the corpus has), ``synthetic``
    (the contract's own inputs): :mod:`kvcontract.conformance.contract.inputs`."""


class ClauseRun(pydantic.BaseModel):
    """One clause's run in one mode."""

    clause: str
    mode: Mode
    status: Status
    examples: int = 0
    driven: int = 0
    """Examples the engine was driven with (it answered or rejected them)."""
    not_driven: int = 0
    """Examples the kit could not take to the engine (its own code failed): never a pass."""
    systematic_examples: int = 0
    seconds: float = 0.0
    findings: int = 0
    covered_pairs: int = 0
    """The domain's (kind, field) pairs that can vary which the examples exercised (of ``total_pairs``)."""
    total_pairs: int = 0
    exercised: list[str] = []
    """Every (kind, field) the examples exercised, a field the domain fixes (a real model's) included."""


class Defect(pydantic.BaseModel):
    """One root in the engine's code, with its findings as evidence
    (:mod:`kvcontract.conformance.reports.defects`)."""

    id: str
    """``function:class`` (+ ``:kinds`` for a wrong answer), e.g. ``MLAAttentionSpec.merge:assert``,
    ``FullAttentionSpec.merge:mishandles:FullAttentionSpec+RSWASpec``: stable across releases while
    the function keeps its name."""
    location: str
    """``file:line`` of the statement (an assert, a raise) or the function that decides."""
    lines: list[int] = []
    """Every line of the function where its findings arise (several asserts of one merge)."""
    function: str
    outcome: str
    summary: str
    level: str
    """The strictest level of its clauses (``MUST``, ``SHOULD``)."""
    category: str = "must"
    """``must`` (a MUST rule broken on a producible input: what the headline counts), ``synthetic``
    (a MUST rule broken only on inputs the engine never builds), ``advice`` (a SHOULD rule)."""
    input: str = ""
    """The best input its findings rest on: ``corpus``, ``variation``, ``synthetic``."""
    tier: str
    """``reachable`` (a corpus table's plan shows harm), ``reached`` (corpus tables reach it, no
    plan differs) or ``latent``."""
    option: str = ""
    """For a reachable defect: what the harm needs beyond the engine's own settings (``python -O``,
    ``hybrid manager off``, ...); empty: the settings the engine picks."""
    harm: str = ""
    """For a reachable defect: what its representative finding says of the engine's plan."""
    harm_models: list[str] = []
    """The corpus tables whose plan shows the harm."""
    models: list[str] = []
    """The corpus tables that reach it (any finding on a corpus input)."""
    latent_reason: str = ""
    kinds: list[str] = []
    clauses: list[str]
    modes: list[str]
    signatures: list[str]
    findings: int
    status: str
    """The worst status of its findings (``fail``: some finding is new)."""
    repro: str = ""
    """The snippet of its representative finding (a harm finding's first, the normal mode's first)."""
    representative: str = ""
    """``clause/mode[signature]`` of that finding."""
    review: str = ""


class Summary(pydantic.BaseModel):
    counts: dict[str, int]
    failed: list[str]
    """``CLAUSE/mode[signature]`` of every record whose status fails the run."""
    seconds: float


class NotRun(pydantic.BaseModel):
    """A clause x mode an interrupted run did not run to its end."""

    clause: str
    mode: Mode


class Report(ReportHeader):
    """A whole ``kvcontract check`` run."""

    schema_version: str = SCHEMA_VERSION
    kind: str = "check"
    modes: list[Mode]
    expectations: str | None = None
    engine_source: dict[str, str] | None = None
    """For an engine checked from a source tree: ``path``, ``describe`` (``git
    describe --tags --always``, or ``not a git tree``) and ``dirty`` (yes/no/unknown)."""
    records: list[Record]
    clauses: list[ClauseRun] = []
    coverage: dict[str, list[str]] = {}
    coverage_summary: str = ""
    """One line: how much of the engine's surface the contract classifies (ROLE-COVER-1)."""
    engine_log: dict[str, list[str]] = {}
    warnings: list[str] = []
    """What the reader must know, e.g. an expectations file made for another release."""
    summary: Summary
    complete: bool = True
    """False for a run stopped by a signal (SIGINT, SIGTERM): ``records`` hold what ran."""
    not_run: list[NotRun] = []
    """For an incomplete run: each clause x mode that did not run (or did not finish)."""
    defects: list[Defect] = []
    """The findings grouped by the engine code that causes them (reachable first)."""
    domain: str = ""
    """The input domain drawn from: ``producible`` (what the engine builds) or ``constructor``."""
    tables: list[str] = []
    """The real model tables the run fed the engine (what makes a defect reachable)."""
    table_kinds: dict[str, list[str]] = {}
    """Per real model table, the spec kinds of its layers."""

    @property
    def ok(self) -> bool:
        return not self.summary.failed and self.complete


def summarize(records: Iterable[Record], seconds: float) -> Summary:
    records = list(records)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    failed = [f"{r.clause}/{r.mode}[{r.signature}]" for r in records if r.status in FAILING]
    return Summary(counts=counts, failed=failed, seconds=round(seconds, 3))


def write_json(report: Report, path: str | Path) -> None:
    write_atomic(path, report.model_dump_json(indent=2) + "\n")


def write_junit(report: Report, path: str | Path, *, attention: Sequence[Record] | None = None,
                known: Sequence[Record] | None = None, repros: Mapping[tuple[str, str, str], str] | None = None,
                known_as: str = "xfail", label: str = "") -> None:
    """One testsuite per mode, one testcase per clause x mode (classname
    ``kvcontract.<engine>.<mode>``, name the clause ID). A case fails when it has a finding
    that needs attention (``attention``, default the failing ones; an ``error`` element when
    all of those are kit errors), is skipped when it has only ``known`` findings (default
    xfail) or the clause was skipped, and passes otherwise. The failure lists each finding's
    signature and its repro file (``repros``)."""
    def key(r: Record) -> tuple[str, str, str]:
        return (r.clause, r.mode, r.signature)

    attention = [r for r in report.records if r.status in FAILING] if attention is None else attention
    known = [r for r in report.records if r.status == "xfail"] if known is None else known
    repros = repros or {}
    wanted, expected = {key(r) for r in attention}, {key(r) for r in known}
    seconds = {(run.clause, run.mode): run.seconds for run in report.clauses}
    cells: dict[tuple[str, str], list[Record]] = {}
    for r in report.records:
        cells.setdefault((r.clause, r.mode), []).append(r)
    engine = re.sub(r"[^A-Za-z0-9_-]+", "_", report.engine)
    parts = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>"]
    for mode in report.modes:
        cases: list[str] = []
        totals = {"failures": 0, "errors": 0, "skipped": 0}
        classname = quoteattr(f"kvcontract.{engine}.{mode}")
        for (clause, cell_mode), records in cells.items():
            if cell_mode != mode:
                continue
            head = (f"    <testcase classname={classname} name={quoteattr(clause)} "
                    f'time="{seconds.get((clause, mode), sum(r.seconds for r in records)):.3f}"')
            bad = [r for r in records if key(r) in wanted]
            ok_known = [r for r in records if key(r) in expected]
            if bad:
                kind = "error" if all(r.status == "error" for r in bad) else "failure"
                totals["errors" if kind == "error" else "failures"] += 1
                named = ", ".join(r.signature for r in bad[:10])
                more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
                message = f"{len(bad)} finding(s) need attention: {named}{more}"
                body = "\n".join(f"{label}{r.status} {r.clause} [{r.mode}] {r.signature}  "
                                 f"repro: {repros.get(key(r), '(none)')}\n    {r.message}" for r in bad)
                cases.append(f"{head}>\n      <{kind} message={quoteattr(message)}>{escape(body)}</{kind}>\n"
                             "    </testcase>")
            elif ok_known:
                totals["skipped"] += 1
                cases.append(f"{head}>\n      <skipped message="
                             f"{quoteattr(f'known: {len(ok_known)} finding{_s(ok_known)} ({known_as})')}/>\n    </testcase>")
            elif all(r.status == "skip" for r in records):
                totals["skipped"] += 1
                reason = next((r.message for r in records if r.message), "skipped")
                cases.append(f"{head}>\n      <skipped message={quoteattr(f'skip: {reason}')}/>\n    </testcase>")
            else:
                cases.append(f"{head}/>")
        name = quoteattr(f"kvcontract.{engine}.{mode}")
        parts.append(f'  <testsuite name={name} tests="{len(cases)}" failures="{totals["failures"]}" '
                     f'errors="{totals["errors"]}" skipped="{totals["skipped"]}">')
        parts += cases
        parts.append("  </testsuite>")
    parts.append("</testsuites>")
    write_atomic(path, "\n".join(parts) + "\n")


def _s(items: Sequence[object]) -> str:
    return "" if len(items) == 1 else "s"


def _status(records: list[Record]) -> str:
    """A clause's status in one mode, with its number of findings: ``fail(3)``."""
    if not records:
        return "-"
    worst = max(records, key=lambda r: STATUS_RANK[r.status]).status
    findings = sum(r.status in ("fail", "xfail", "xpass", "error") for r in records)
    return f"{worst}({findings})" if findings > 1 else worst


def render_header(report: Report) -> list[str]:
    """The engine line, source, expectations, coverage, then the table: clause | level |
    normal | optimized | examples | covered | time (each cell the worst status, with the
    number of findings)."""
    by_clause: dict[str, dict[str, list[Record]]] = {}
    for r in report.records:
        by_clause.setdefault(r.clause, {}).setdefault(r.mode, []).append(r)
    runs: dict[str, list[ClauseRun]] = {}
    for run in report.clauses:
        runs.setdefault(run.clause, []).append(run)
    lines = [f"kvcontract check: {report.engine} {report.engine_version} "
             f"(profile {report.profile}, seed {report.seed})"]
    if report.engine_source:
        lines.append("source: " + ", ".join(f"{k} {v}" for k, v in report.engine_source.items()))
    if report.expectations:
        lines.append(f"expectations: {report.expectations}")
    if report.coverage_summary:
        lines.append(report.coverage_summary)
    rows = []
    for clause, modes in by_clause.items():
        level = next(iter(modes.values()))[0].level
        clause_runs = runs.get(clause, [])
        examples = sum(r.examples for r in clause_runs) or sum(r.examples for rs in modes.values() for r in rs)
        seconds = sum(r.seconds for r in clause_runs)
        pairs = max((f"{r.covered_pairs}/{r.total_pairs}" for r in clause_runs if r.total_pairs), default="-")
        rows.append([clause, level, _status(modes.get("normal", [])), _status(modes.get("optimized", [])),
                     examples, pairs, f"{seconds:.2f}s"])
    if rows:
        lines += ["", *text_table(["clause", "level", "normal", "optimized", "examples", "pairs", "time"], rows,
                                  align="<<<<>>>")]
    else:
        lines += ["", "no clause was run"]
    return lines


def render_findings(records: Iterable[Record], xfail_heading: str) -> list[str]:
    """Every failing record with its message and repro, then the known failures, one a line
    (shared by the check and symbolic reports)."""
    records = list(records)
    lines: list[str] = []
    for r in records:
        if r.status in FAILING:
            lines += ["", f"=== {r.status.upper()} {r.clause} [{r.mode}] [{r.signature}] {r.title}", r.message]
            if r.where:
                lines.append(f"at {r.where}")
            if r.snippet:
                lines += ["--- repro ---", r.snippet.rstrip()]
    xfails = [r for r in records if r.status == "xfail"]
    if xfails:
        lines += ["", xfail_heading]
        lines += [f"  {r.clause} [{r.mode}] [{r.signature}]" for r in xfails]
    return lines
