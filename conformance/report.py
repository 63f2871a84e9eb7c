"""The conformance report: a versioned pydantic schema, JSON/JUnit writers, the terminal table.

Schema (``schema_version`` "1"): engine name and version, profile, seed, modes,
one :class:`Record` per clause x mode (status pass/fail/skip/xfail/xpass/error,
examples, seconds, message, repro snippet, witness), and a :class:`Summary`.
Files are written atomically: a temp file in the same folder, then a rename.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal
from xml.sax.saxutils import escape, quoteattr

import pydantic

SCHEMA_VERSION = "1"
Status = Literal["pass", "fail", "skip", "xfail", "xpass", "error"]
Mode = Literal["normal", "optimized"]
FAILING: frozenset[str] = frozenset({"fail", "xpass", "error"})


class Record(pydantic.BaseModel):
    """The outcome of one clause in one interpreter mode."""

    clause: str
    title: str
    level: str
    mode: Mode
    status: Status
    examples: int = 0
    seconds: float = 0.0
    message: str = ""
    snippet: str = ""
    witness: dict[str, Any] | None = None


class Summary(pydantic.BaseModel):
    counts: dict[str, int]
    failed: list[str]
    """``CLAUSE/mode`` of every record whose status fails the run."""
    seconds: float


class Report(pydantic.BaseModel):
    """A whole ``kvcontract check`` run."""

    schema_version: str = SCHEMA_VERSION
    kvcontract_version: str
    engine: str
    engine_version: str
    profile: str
    seed: int
    modes: list[Mode]
    expectations: str | None = None
    records: list[Record]
    summary: Summary

    @property
    def ok(self) -> bool:
        return not self.summary.failed


def summarize(records: Iterable[Record], seconds: float) -> Summary:
    records = list(records)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    failed = [f"{r.clause}/{r.mode}" for r in records if r.status in FAILING]
    return Summary(counts=counts, failed=failed, seconds=round(seconds, 3))


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that no reader ever sees a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(report: Report, path: str | Path) -> None:
    write_atomic(path, report.model_dump_json(indent=2) + "\n")


def write_junit(report: Report, path: str | Path) -> None:
    """One testsuite per mode, one testcase per clause."""
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
            parts.append(f'    <testcase classname={quoteattr(f"kvcontract.{mode}")} '
                         f'name={quoteattr(r.clause)} time="{r.seconds:.3f}">')
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


def render_table(report: Report) -> str:
    """Clause | level | normal | optimized | examples | time, then each failure's snippet."""
    by_clause: dict[str, dict[str, Record]] = {}
    for r in report.records:
        by_clause.setdefault(r.clause, {})[r.mode] = r
    header = f"{'clause':<20} {'level':<6} {'normal':<8} {'optimized':<9} {'examples':>8} {'time':>7}"
    lines = [f"kvcontract check: {report.engine} {report.engine_version} "
             f"(profile {report.profile}, seed {report.seed})"]
    if report.expectations:
        lines.append(f"expectations: {report.expectations}")
    lines += ["", header, "-" * len(header)]
    for clause, modes in by_clause.items():
        any_record = next(iter(modes.values()))
        cells = [modes[m].status if m in modes else "-" for m in ("normal", "optimized")]
        examples = sum(r.examples for r in modes.values())
        seconds = sum(r.seconds for r in modes.values())
        lines.append(f"{clause:<20} {any_record.level:<6} {cells[0]:<8} {cells[1]:<9} "
                     f"{examples:>8} {seconds:>6.2f}s")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.summary.counts.items()))
    lines += ["", f"{counts} in {report.summary.seconds:.1f}s"]
    for r in report.records:
        if r.status in FAILING:
            lines += ["", f"=== {r.status.upper()} {r.clause} [{r.mode}] {r.title}", r.message]
            if r.snippet:
                lines += ["--- repro ---", r.snippet.rstrip()]
    xfails = [r for r in report.records if r.status == "xfail"]
    if xfails:
        lines += ["", "known failures (xfail, each with a pinned witness):"]
        lines += [f"  {r.clause} [{r.mode}]: {r.message}" for r in xfails]
    return "\n".join(lines)
