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
"""

from __future__ import annotations

from collections.abc import Iterable
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
    total_pairs: int = 0
    exercised: list[str] = []


class Summary(pydantic.BaseModel):
    counts: dict[str, int]
    failed: list[str]
    """``CLAUSE/mode[signature]`` of every record whose status fails the run."""
    seconds: float


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
    summary: Summary

    @property
    def ok(self) -> bool:
        return not self.summary.failed


def summarize(records: Iterable[Record], seconds: float) -> Summary:
    records = list(records)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    failed = [f"{r.clause}/{r.mode}[{r.signature}]" for r in records if r.status in FAILING]
    return Summary(counts=counts, failed=failed, seconds=round(seconds, 3))


def write_json(report: Report, path: str | Path) -> None:
    write_atomic(path, report.model_dump_json(indent=2) + "\n")


def write_junit(report: Report, path: str | Path) -> None:
    """One testsuite per mode, one testcase per finding (or per clause without one)."""
    parts = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>"]
    for mode in report.modes:
        records = [r for r in report.records if r.mode == mode]
        failures = sum(r.status in ("fail", "xpass") for r in records)
        errors = sum(r.status == "error" for r in records)
        skipped = sum(r.status in ("skip", "xfail") for r in records)
        name = quoteattr(f"kvcontract.{report.engine}.{mode}")
        parts.append(f'  <testsuite name={name} tests="{len(records)}" failures="{failures}" '
                     f'errors="{errors}" skipped="{skipped}">')
        for r in records:
            case = f"{r.clause}[{r.signature}]" if r.signature else r.clause
            parts.append(f'    <testcase classname={quoteattr(f"kvcontract.{mode}")} '
                         f'name={quoteattr(case)} time="{r.seconds:.3f}">')
            body = escape(f"{r.message}\n\n{r.snippet}")
            if r.status in ("fail", "xpass"):
                parts.append(f'      <failure message={quoteattr(r.message)}>{body}</failure>')
            elif r.status == "error":
                parts.append(f'      <error message={quoteattr(r.message)}>{body}</error>')
            elif r.status in ("skip", "xfail"):
                parts.append(f'      <skipped message={quoteattr(f"{r.status}: {r.message}")}/>')
            parts.append("    </testcase>")
        parts.append("  </testsuite>")
    parts.append("</testsuites>")
    write_atomic(path, "\n".join(parts) + "\n")


def _status(records: list[Record]) -> str:
    """A clause's status in one mode, with its number of findings: ``fail(3)``."""
    if not records:
        return "-"
    worst = max(records, key=lambda r: STATUS_RANK[r.status]).status
    findings = sum(r.status in ("fail", "xfail", "xpass", "error") for r in records)
    return f"{worst}({findings})" if findings > 1 else worst


def render_table(report: Report) -> str:
    """Clause | level | normal | optimized | examples | covered | time, then each failure's snippet."""
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
    lines += ["", *text_table(["clause", "level", "normal", "optimized", "examples", "pairs", "time"], rows,
                              align="<<<<>>>")]
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.summary.counts.items()))
    lines += ["", f"{counts} in {report.summary.seconds:.1f}s"]
    if not report.clauses and not report.records:
        lines.append("no clause was run")
    lines += render_findings(report.records, "known failures (xfail, each with a pinned witness):")
    return "\n".join(lines)


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
