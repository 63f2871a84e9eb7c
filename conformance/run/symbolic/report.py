"""The symbolic search's report: per-group stats (:class:`OperationStats`, the one stats
model of the worker's groups and of the report), the report (:class:`SymbolicReport`),
written as it grows (:class:`LiveReport`), and its terminal rendering (:func:`render`)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pydantic

from kvcontract.conformance.reports.check import (
    FAILING,
    Mode,
    Record,
    Summary,
    render_findings,
    summarize,
)
from kvcontract.conformance.run.symbolic.values import proof_line
from kvcontract.reports import ReportHeader, write_atomic

Progress = Callable[[str], None]

XFAIL_PROGRESS_S = 10.0
"""At most one progress line per this many seconds for known failures found again."""


class OperationStats(pydantic.BaseModel):
    """What one search group explored in one mode: how many paths reached the engine.

    The worker's :class:`~kvcontract.conformance.run.symbolic.search.Group` counts into
    one as it searches; the report lists them (``searched``) as they come."""

    mode: Mode
    operation: str
    kind: str = ""
    paths: int = 0
    """Paths CrossHair explored in this group."""
    reached_engine: int = 0
    """Paths whose input was built and judged by at least one oracle (the engine was called)."""
    rejected: int = 0
    """Paths whose input could not be built (rejected before the engine: a search bug)."""
    skipped: int = 0
    """Paths whose clauses all skip on this engine (e.g. routing without a router)."""
    kit_errors: int = 0
    findings: int = 0
    exhausted: bool = False
    """CrossHair's path tree is fully explored: every input of the group was judged."""
    cpu_seconds: float = 0.0
    features: int = 0
    """Distinct coverage features seen (kinds x fields exercised, shapes, outcomes)."""
    first_finding_s: float | None = None
    unconfirmed: int = 0
    """Value groups: paths whose oracle saw a difference that no clause confirmed on the
    realized input."""
    bounds: str = ""
    """Value groups: the values the group explores, in words (what an exhausted tree proves)."""
    replay_failures: int = 0
    """Batches CrossHair could not replay (the same choices took another path): each is
    diagnosed concretely and the group's path tree started afresh; the run goes on."""

    @property
    def name(self) -> str:
        return f"{self.operation}:{self.kind}" if self.kind else self.operation


class SymbolicReport(ReportHeader):
    """A ``kvcontract symbolic`` run (schema ``symbolic`` version 2).

    ``records`` are findings in the model of ``check`` (clause x mode x
    signature, status ``fail``/``xfail``/``error``, witness, snippet, phase
    ``symbolic``), and the expectations whose pinned witness no longer fails
    (``xpass``, phase ``witness``; :mod:`kvcontract.conformance.run.verdicts`).
    The file is rewritten after every new finding with ``complete`` false, so a
    run that is stopped leaves a valid partial report.
    """

    schema_version: str = "2"
    kind: str = "symbolic"
    modes: list[Mode]
    budget_s: float | None
    """CPU seconds of search per mode (None: paths only)."""
    iterations: int | None
    """Paths per mode (None: seconds only)."""
    wall_s: float | None = None
    """Wall seconds for the whole run (None: no wall limit); the search stops short of it."""
    ended_by: dict[str, str] = {}
    """Per mode, what ended its search: ``budget``, ``paths``, ``wall``, ``exhausted``, ``finding``."""
    cpu_s: dict[str, float] = {}
    """Per mode, the CPU seconds its worker spent on the search (the wall time is ``summary.seconds``)."""
    operations: list[str]
    kinds: list[str] | None = None
    expectations: str | None = None
    corpus: str | None = None
    """The corpus file the ``corpus`` group's tables came from (None: no corpus, that group left out)."""
    complete: bool = False
    stopped: str = ""
    """Why the run ended early (interrupted, a worker's hang or crash), or ""."""
    records: list[Record] = []
    searched: list[OperationStats] = []
    skipped_clauses: dict[str, str] = {}
    summary: Summary

    @property
    def failing(self) -> list[Record]:
        return [r for r in self.records if r.status in FAILING]


class LiveReport:
    """The report as it grows: findings from both modes' workers, written on every change."""

    def __init__(self, report: SymbolicReport, path: str | None, progress: Progress | None) -> None:
        self.report = report
        self.path = path
        self.progress = progress
        self.lock = threading.Lock()
        self.start = time.perf_counter()
        self.xfail_said = self.start - XFAIL_PROGRESS_S
        self.stats: dict[str, list[OperationStats]] = {}
        self.write()

    def write(self) -> None:
        r = self.report
        r.searched = [s for mode in ("normal", "optimized") for s in self.stats.get(mode, [])]
        r.summary = summarize(r.records, time.perf_counter() - self.start)
        if self.path:
            write_atomic(self.path, r.model_dump_json(indent=2) + "\n")

    def event(self, mode: Mode, event: Mapping[str, Any]) -> None:
        with self.lock:
            if "finding" in event:
                record = Record(**event["finding"])
                self.report.records.append(record)
                if self.progress and record.status != "xfail":
                    self.progress(f"[symbolic {mode}] {record.status} {record.clause} [{record.signature}] "
                                  f"after {record.seconds:.1f}s")
                elif self.progress and time.perf_counter() - self.xfail_said >= XFAIL_PROGRESS_S:
                    # known failures found again: a count now and then, not a line each
                    self.xfail_said = time.perf_counter()
                    known = sum(r.status == "xfail" for r in self.report.records)
                    self.progress(f"[symbolic {mode}] {known} known failures found again so far")
                self.write()
            elif "stats" in event:
                self.set_stats(mode, event["stats"])

    def set_stats(self, mode: Mode, stats: Iterable[Mapping[str, Any]]) -> None:
        """A worker's stats (JSON) as the mode's rows (the caller holds the lock)."""
        self.stats[mode] = [OperationStats.model_validate({**s, "mode": mode}) for s in stats]

    def add(self, records: Iterable[Record]) -> None:
        with self.lock:
            for record in records:
                if not any((r.clause, r.mode, r.signature) == (record.clause, record.mode, record.signature)
                           for r in self.report.records):
                    self.report.records.append(record)
            self.write()


def render(report: SymbolicReport, verbose: bool = False) -> str:
    """Per mode and operation group: paths, reached the engine, rejected; then each failure
    with its repro, and the known failures found again as a count per clause (``verbose``:
    one a line)."""
    budget = " and ".join(x for x in (f"{report.budget_s:g} CPU s" if report.budget_s else "",
                                      f"{report.iterations} paths" if report.iterations else "") if x)
    wall = f", {report.wall_s:g} s wall in all" if report.wall_s else ""
    lines = [f"kvcontract symbolic: {report.engine} {report.engine_version} "
             f"(modes {'+'.join(report.modes)}, budget {budget or 'none'} per mode{wall})"]
    if report.expectations:
        lines.append(f"expectations: {report.expectations}")
    if report.corpus:
        lines.append(f"corpus: {report.corpus}")
    header = (f"{'mode':<9} {'group':<36} {'paths':>6} {'engine':>6} {'rejected':>8} {'exhausted':>9} "
              f"{'findings':>8} {'cpu':>7}")
    lines += ["", header, "-" * len(header)]
    for s in report.searched:
        name = f"{s.operation}:{s.kind}" if s.kind else s.operation
        lines.append(f"{s.mode:<9} {name:<36} {s.paths:>6} {s.reached_engine:>6} {s.rejected:>8} "
                     f"{'yes' if s.exhausted else 'no':>9} {s.findings:>8} {s.cpu_seconds:>6.1f}s")
    for mode in report.modes:
        rows = [s for s in report.searched if s.mode == mode]
        paths = sum(s.paths for s in rows)
        reached = sum(s.reached_engine for s in rows)
        rejected = sum(s.rejected for s in rows)
        share = f"{100 * reached / paths:.0f}%" if paths else "-"
        spent = f"; {report.cpu_s[mode]:.1f} CPU s" if mode in report.cpu_s else ""
        ended = f", ended by {report.ended_by[mode]}" if report.ended_by.get(mode) else ""
        lines.append(f"{mode}: {paths} paths, {reached} reached the engine ({share}), {rejected} rejected "
                     f"before it{spent}{ended}")
    proofs = [proof_line(f"{s.mode:<9} {s.name}", s.bounds, s.exhausted, s.paths, s.findings, s.unconfirmed,
                         short=True) for s in report.searched if s.bounds]
    if proofs:
        lines += ["", "symbolic values (the engine's own branches solved; each group's bounds: "
                  "'bounds' in the JSON):", *(f"  {p}" for p in proofs)]
    for clause, why in sorted(report.skipped_clauses.items()):
        lines.append(f"skipped {clause}: {why}")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.summary.counts.items())) or "no finding"
    lines += ["", f"{counts} in {report.summary.seconds:.1f}s"
              + ("" if report.complete else f" (incomplete: {report.stopped or 'stopped'})")]
    if not report.failing and report.complete:
        proved = sum(1 for s in report.searched if s.bounds and s.exhausted and not s.findings)
        lines.append("no difference from the contract found within the budget (not a proof"
                     + (f"; the {proved} value group(s) explored exhaustively are, within their bounds)"
                        if proved else ")"))
    if verbose:
        lines += render_findings(report.records, "known failures found again (xfail):")
    else:
        lines += render_findings([r for r in report.records if r.status != "xfail"], "")
        xfails = collections.Counter(r.clause for r in report.records if r.status == "xfail")
        if xfails:
            lines += ["", f"known failures found again (xfail): {sum(xfails.values())} "
                      f"({', '.join(f'{c} {n}' for c, n in sorted(xfails.items()))}; --verbose lists them)"]
    return "\n".join(lines)
