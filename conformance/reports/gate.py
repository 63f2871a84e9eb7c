"""What a ``check`` run tells a person or a CI job: the findings that need attention,
their repro files, the terse console summary with its verdict line, and the JUnit file.

A finding *needs attention* when its status fails the run (``fail``, ``xpass``,
``error``: :data:`~kvcontract.conformance.reports.check.FAILING`), or, with
``--baseline``, when it is *new* (:mod:`kvcontract.conformance.reports.diff`). Known
findings (``xfail``, or unchanged from the baseline) are counted, not listed.

The console shows the clause table, a summary line that states its units, one line per
finding that needs attention (at most :data:`CONSOLE_LIMIT`) with the path of its repro
file, and, last, the verdict in words. Each repro file holds the finding's snippet
(:func:`write_repros`, at most :data:`REPRO_LIMIT` files); the snippets also stay in the
JSON report. ``--verbose`` adds every message and snippet and the list of known findings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from kvcontract.conformance.reports.check import (
    FAILING,
    STATUS_RANK,
    Record,
    Report,
    render_findings,
    render_header,
)
from kvcontract.conformance.reports.check import write_junit as check_junit
from kvcontract.conformance.reports.defects_text import defect_line, headline, short_outcome
from kvcontract.conformance.reports.diff import DiffResult, subject_lines
from kvcontract.reports import write_atomic

CONSOLE_LIMIT = 10
"""Findings that need attention listed on the console (the rest: the index, the JSON)."""
REPRO_LIMIT = 200
"""Repro files written per run."""
INDEX_NAME = "INDEX.txt"
FINDING_STATUSES = ("xfail", "fail", "xpass", "error")
"""Statuses of records that are findings (``pass`` and ``skip`` records are not)."""
_REPRO_NAME = re.compile(r"^([A-Za-z0-9-]+-(normal|optimized)-[0-9a-f]{10}|defect-[A-Za-z0-9_.-]+)\.py$")
DEFECT_LIMIT = 40
"""Defects listed on the console (the rest: the JSON, ``--verbose``)."""

Key = tuple[str, str, str]


def key(r: Record) -> Key:
    return (r.clause, r.mode, r.signature)


@dataclasses.dataclass
class Gate:
    """One run's story: the report, what needs attention, where each repro went."""

    report: Report
    attention: list[Record]
    delta: DiffResult | None = None
    repros: dict[Key, str] = dataclasses.field(default_factory=dict)
    defect_repros: dict[str, str] = dataclasses.field(default_factory=dict)
    repro_dir: str = ""
    repros_skipped: int = 0
    output_errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def known(self) -> list[Record]:
        """Findings that are known: xfail, or (with a baseline) present and not new."""
        wanted = {key(r) for r in self.attention}
        if self.delta is None:
            return [r for r in self.report.records if r.status == "xfail"]
        unchanged = {f.key for f in self.delta.unchanged}
        return [r for r in self.report.records if key(r) in unchanged and key(r) not in wanted]

    @property
    def exit_code(self) -> int:
        if self.output_errors:
            return 2
        if not self.report.clauses:
            return 1
        if self.delta is not None:
            return self.delta.exit_code
        return 0 if self.report.ok else 1


def needing_attention(report: Report, delta: DiffResult | None = None) -> list[Record]:
    """The findings that need attention, in the report's order: failing ones, or with a
    baseline comparison the new ones (the first record of each new finding)."""
    if delta is None:
        return [r for r in report.records if r.status in FAILING]
    new = {f.key for f in delta.new}
    out: list[Record] = []
    for r in report.records:
        if key(r) in new:
            new.discard(key(r))
            out.append(r)
    return out


def repro_name(r: Record) -> str:
    digest = hashlib.sha1(f"{r.clause}|{r.mode}|{r.signature}".encode()).hexdigest()[:10]
    return f"{r.clause}-{r.mode}-{digest}.py"


def defect_repro_name(number: int, defect_id: str) -> str:
    """``defect-D04-MLAAttentionSpec.merge-accepts-disagreement.py``: one file per defect,
    numbered as the console lists it."""
    return f"defect-D{number:02d}-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", defect_id).strip("-") + ".py"


def write_repros(gate: Gate, directory: str | Path, limit: int = REPRO_LIMIT) -> None:
    """One file per defect (its representative finding's snippet), one per finding that
    needs attention and has a snippet (the first ``limit``), plus ``INDEX.txt`` listing the
    findings. Repro files of an earlier run in
    ``directory`` (named as this function names them) are removed first, so the folder
    never shows a stale finding. Nothing is created when nothing needs attention."""
    directory = Path(directory)
    if directory.is_dir():
        for old in directory.iterdir():
            if old.is_file() and (_REPRO_NAME.match(old.name) or old.name == INDEX_NAME):
                old.unlink()
    gate.repro_dir = str(directory)
    for number, d in enumerate(gate.report.defects, 1):
        if d.repro:
            target = directory / defect_repro_name(number, d.id)
            write_atomic(target, d.repro.rstrip() + "\n")
            gate.defect_repros[d.id] = str(target)
    if not gate.attention:
        return
    index = [f"# findings that need attention: {len(gate.attention)} "
             f"({gate.report.engine} {gate.report.engine_version}); "
             "status clause mode signature file",
             "# an optimized-mode repro runs under python -O"]
    written = 0
    for r in gate.attention:
        path = "-"
        if r.snippet and written < limit:
            target = directory / repro_name(r)
            write_atomic(target, r.snippet.rstrip() + "\n")
            path = str(target)
            gate.repros[key(r)] = path
            written += 1
        elif r.snippet:
            gate.repros_skipped += 1
            path = "(not written: limit)"
        index.append(f"{r.status}\t{r.clause}\t{r.mode}\t{r.signature}\t{path}")
    write_atomic(directory / INDEX_NAME, "\n".join(index) + "\n")


# -- the console ------------------------------------------------------------------------------


def _cells(report: Report) -> dict[tuple[str, str], list[Record]]:
    cells: dict[tuple[str, str], list[Record]] = {}
    for r in report.records:
        cells.setdefault((r.clause, r.mode), []).append(r)
    return cells


def summary_line(report: Report) -> str:
    """``clause x mode: 24 pass, 1 skip, 25 xfail; findings: 1373 xfail, 0 fail in 12.3s``."""
    cell_counts: dict[str, int] = {}
    for records in _cells(report).values():
        worst = max(records, key=lambda r: STATUS_RANK[r.status]).status
        cell_counts[worst] = cell_counts.get(worst, 0) + 1
    order = ("pass", "skip", "xfail", "xpass", "fail", "error")
    cells = ", ".join(f"{cell_counts[s]} {s}" for s in order if cell_counts.get(s))
    found = {s: sum(r.status == s for r in report.records) for s in FINDING_STATUSES}
    findings = ", ".join(f"{found[s]} {s}" for s in FINDING_STATUSES if found[s] or s in ("xfail", "fail"))
    return f"clause x mode: {cells or 'none'}; findings: {findings} in {report.summary.seconds:.1f}s"


def _per_clause(records: Iterable[Record]) -> str:
    counts: dict[str, int] = {}
    for r in records:
        counts[r.clause] = counts.get(r.clause, 0) + 1
    return ", ".join(f"{c} {n}" for c, n in counts.items())


def _wrap(prefix: str, text: str, width: int = 100) -> list[str]:
    lines, line = [], prefix
    for word in text.split(", "):
        piece = word if line == prefix else ", " + word
        if len(line) + len(piece) > width and line != prefix:
            lines.append(line + ",")
            line = "  " + word
        else:
            line += piece
    return [*lines, line]


def attention_line(gate: Gate, r: Record) -> str:
    label = "NEW " + r.status if gate.delta is not None else r.status.upper()
    return f"  {label:<9} {r.clause} [{r.mode}] {r.signature or '(no signature)'}  " \
           f"{gate.repros.get(key(r), '(no repro)')}"


def verdict(gate: Gate) -> str:
    code = gate.exit_code
    n = len(gate.attention)
    known = len(gate.known)
    if gate.output_errors:
        return f"verdict: ERROR — {'; '.join(gate.output_errors)} (exit {code})"
    if not gate.report.clauses:
        return f"verdict: FAIL — no clause was run (exit {code})"
    if gate.delta is not None:
        if n:
            return (f"verdict: FAIL — {n} new finding{'s' * (n != 1)}{_of_defects(gate)} "
                    f"need{'s' * (n == 1)} attention (exit {code})")
        return (f"verdict: PASS — nothing new; {len(gate.delta.unchanged)} unchanged, "
                f"{len(gate.delta.fixed)} fixed (exit {code})")
    if n:
        by_status = ", ".join(f"{sum(r.status == s for r in gate.attention)} {s}" for s in sorted(FAILING)
                              if any(r.status == s for r in gate.attention))
        return (f"verdict: FAIL — {n} finding{'s' * (n != 1)}{_of_defects(gate)} need{'s' * (n == 1)} "
                f"attention ({by_status}) (exit {code})")
    tail = f"; {known} known findings still reproduce" if known else ""
    return f"verdict: PASS — nothing failed{tail} (exit {code})"


def _of_defects(gate: Gate, limit: int = 2) -> str:
    """`` of 1 defect (D02 MLAAttentionSpec.merge)``: the defects of the findings that need
    attention, as the defects table numbers them; empty when none was traced."""
    wanted = {r.defect for r in gate.attention if r.defect}
    named = [f"D{i:02d} {d.function or d.id}" for i, d in enumerate(gate.report.defects, 1) if d.id in wanted]
    if not named:
        return ""
    more = f", +{len(named) - limit}" if len(named) > limit else ""
    return f" of {len(named)} defect{'s' * (len(named) != 1)} ({', '.join(named[:limit])}{more})"


def defect_lines(gate: Gate, *, verbose: bool = False, limit: int = DEFECT_LIMIT) -> list[str]:
    """The defects table: status, category, tier (with the models and option that show the harm),
    location, summary, signatures; MUST defects first, reachable first."""
    defects = gate.report.defects
    if not defects:
        return []
    new_ids = {r.defect for r in gate.attention if r.defect}
    head = f"{headline(defects)}; {len(new_ids)} with new findings"
    baseline = gate.delta is not None
    # On the console: every defect with a finding that needs attention; without a baseline also
    # every MUST one; the rest (synthetic-input and advice defects; against a baseline, every
    # unchanged defect) counted unless --verbose.
    listed = [(i, d) for i, d in enumerate(defects, 1)
              if verbose or d.id in new_ids or (not baseline and d.category == "must")]
    numbers = {i for i, _ in listed}
    folded = [d for i, d in enumerate(defects, 1) if i not in numbers]
    shown = listed if verbose else listed[:limit]
    lines = ["", head, "  #   status class  tier | function (where): what is wrong [fields] (signatures)"]
    for i, d in shown:
        lines.append(defect_line(i, d, ("NEW" if d.id in new_ids else "known") if baseline else None))
        if verbose and d.tier != "reachable" and d.latent_reason:
            lines.append(f"        {d.latent_reason}")
    if folded and baseline:
        lines.append(f"  + {len(folded)} defects unchanged from the baseline ("
                     f"{sum(d.category == 'must' for d in folded)} MUST, "
                     f"{sum(d.tier == 'reachable' for d in folded)} reachable; --verbose lists them)")
    elif folded:
        for category, words in (("synthetic", "on synthetic inputs only"), ("advice", "advice (SHOULD)")):
            group = [d for d in folded if d.category == category]
            if not group:
                continue
            classes: dict[str, int] = {}
            for d in group:
                classes[short_outcome(d.outcome)] = classes.get(short_outcome(d.outcome), 0) + 1
            lines.append(f"  + {len(group)} known defects {words}: "
                         + ", ".join(f"{n} {c}" for c, n in classes.items()) + " (--verbose lists them)")
    if gate.defect_repros:
        lines.append(f"repro of each: {gate.repro_dir}/defect-D<#>-*.py (an -O finding's repro runs under python -O)")
    if len(shown) < len(listed):
        lines.append(f"  ... and {len(listed) - len(shown)} more in the JSON report (--verbose prints them all)")
    if not verbose and any(d.tier != "reachable" for _, d in shown):
        lines.append("why a defect shows no harm on a real model: the JSON (defects[].latent_reason), --verbose")
    return lines


def render_console(gate: Gate, *, verbose: bool = False, limit: int = CONSOLE_LIMIT) -> str:
    """The terse console output (``verbose``: with every message, snippet and known finding);
    its last line is :func:`verdict`."""
    report = gate.report
    lines = render_header(report)
    lines += [f"warning: {w}" for w in report.warnings]
    lines += ["", summary_line(report)]
    if gate.delta is not None:
        d = gate.delta
        lines.append(f"against {d.base.get('name', 'the baseline')}: new {len(d.new)}, fixed {len(d.fixed)}, "
                     f"unchanged {len(d.unchanged)}")
        lines += [f"warning: {w}" for w in d.warnings]
        if d.unjudged:
            lines.append(f"not compared (judged on one side only): {len(d.unjudged)} clause x mode")
        lines += subject_lines(d)
    lines += defect_lines(gate, verbose=verbose)
    known = gate.known
    if known and not verbose and gate.delta is None:  # against a baseline its count is on the line above
        lines += _wrap("known (xfail), per clause: ", _per_clause(known))
    if gate.attention:
        shown = gate.attention if verbose else gate.attention[:limit]
        lines += ["", f"needs attention ({len(gate.attention)}): status, clause [mode], signature, repro"]
        lines += [attention_line(gate, r) for r in shown]
        if len(shown) < len(gate.attention):
            where = f"{Path(gate.repro_dir) / INDEX_NAME}" if gate.repro_dir else "the JSON report"
            lines.append(f"  ... and {len(gate.attention) - len(shown)} more: all listed in {where} "
                         "(--verbose prints them all)")
        if gate.repros:
            skipped = f"; {gate.repros_skipped} more not written (at most {REPRO_LIMIT})" \
                if gate.repros_skipped else ""
            lines.append(f"repros: {len(gate.repros)} file{'s' * (len(gate.repros) != 1)} in {gate.repro_dir}{skipped}; "
                         "run an optimized-mode repro with python -O")
    if verbose:
        lines += render_findings(gate.attention + known if gate.delta is not None else report.records,
                                 "known failures (xfail, each with a pinned witness):")
    lines += ["", verdict(gate)]
    return "\n".join(lines)


# -- JUnit --------------------------------------------------------------------------------------


def write_junit(gate: Gate, path: str | Path) -> None:
    """:func:`kvcontract.conformance.reports.check.write_junit` with this run's story: what
    needs attention (with a baseline: the new findings), what is known, the repro paths."""
    check_junit(gate.report, path, attention=gate.attention, known=gate.known, repros=gate.repros,
                known_as="unchanged from the baseline" if gate.delta is not None else "xfail",
                label="NEW " if gate.delta is not None else "")
