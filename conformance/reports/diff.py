"""What a change introduced: two ``check`` reports compared finding by finding.

A *finding* is a record's ``(clause, mode, signature)``. A finding is
**present** in a report when its record's status is one of :data:`PRESENT`:

- ``fail``: the engine violates the clause with that signature;
- ``xfail``: the same, known and still reproduced by its pinned witness;
- ``error``: the kit could not judge (its own exception, or a worker that hung
  or crashed on the engine). A change that makes the engine hang is one to
  gate on, and a kit error that appears only on one side is worth a look.

Not present: ``pass``, ``skip`` and ``xpass`` (a known finding whose witness no
longer fails: fixed). A clause x mode that one report judged (any status but
``skip``) and the other skipped or never ran is listed as *unjudged*: its
findings cannot be compared, which the summary says, but it does not gate.

:func:`compare` classifies every present finding as **new** (only in HEAD),
**fixed** (only in BASE) or **unchanged** (both); :attr:`DiffResult.exit_code`
is 1 exactly when something is new. Reports are read as JSON dictionaries
(schema ``check`` v2), not through the :class:`~kvcontract.conformance.reports.check.Report`
model, so a report written by another kit version still compares as long as
its records carry ``clause``, ``mode``, ``signature`` and ``status``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kvcontract.reports import write_atomic
from kvcontract.usage import UsageError

PRESENT: frozenset[str] = frozenset({"fail", "xfail", "error"})
"""Record statuses under which a finding counts as present in a report."""
DIFF_SCHEMA_VERSION = "1"
HEADER_FIELDS = ("engine", "engine_version", "profile", "seed", "kit_version", "engine_source")

Key = tuple[str, str, str]
"""``(clause, mode, signature)``."""


class ReportReadError(UsageError):
    """A file that is not a readable ``check`` report (a usage error: exit 2)."""


@dataclasses.dataclass(frozen=True)
class Finding:
    """One present finding of a report."""

    clause: str
    mode: str
    signature: str
    status: str
    title: str = ""
    message: str = ""
    snippet: str = ""
    where: str = ""

    @property
    def key(self) -> Key:
        return (self.clause, self.mode, self.signature)

    @property
    def label(self) -> str:
        return f"{self.clause} [{self.mode}] [{self.signature}]"

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def subject(signature: str) -> str:
    """What a finding is about, across clauses, modes and kinds: the field(s) of an
    ``outcome:Kind:field`` signature (``field non_causal``), else its kinds (``kinds
    FullAttentionSpec>RSWASpec``), else the signature itself. ``optimized-only:CLAUSE:SIG``
    is about what ``SIG`` is about."""
    parts = signature.split(":")
    if parts[0] == "optimized-only" and len(parts) >= 4:
        return subject(":".join(parts[2:]))
    if len(parts) == 3 and parts[2]:
        return f"field {parts[2]}"
    if len(parts) == 2 and parts[1]:
        return f"kinds {parts[1]}"
    return signature or "(no signature)"


@dataclasses.dataclass
class DiffResult:
    """New, fixed and unchanged findings between a BASE and a HEAD report."""

    base: dict[str, Any]
    head: dict[str, Any]
    new: list[Finding]
    fixed: list[Finding]
    unchanged: list[Finding]
    unjudged: list[str]
    """``CLAUSE [mode]: judged in BASE|HEAD only`` (not compared, does not gate)."""
    warnings: list[str]

    @property
    def exit_code(self) -> int:
        return 1 if self.new else 0

    def new_by_subject(self) -> dict[str, list[Finding]]:
        """The new records grouped by :func:`subject`: one engine change usually
        shows under several clauses, modes and (inherited) kinds."""
        out: dict[str, list[Finding]] = {}
        for f in self.new:
            out.setdefault(subject(f.signature), []).append(f)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": DIFF_SCHEMA_VERSION,
            "kind": "diff",
            "base": self.base,
            "head": self.head,
            "present_statuses": sorted(PRESENT),
            "new": [f.to_json() for f in self.new],
            "new_subjects": {k: [f.label for f in v] for k, v in self.new_by_subject().items()},
            "fixed": [f.to_json() for f in self.fixed],
            "unchanged": [f.to_json() for f in self.unchanged],
            "unjudged": self.unjudged,
            "warnings": self.warnings,
            "exit_code": self.exit_code,
        }


def read_report(path: str | Path) -> dict[str, Any]:
    """A ``check`` report from a JSON file; :class:`ReportReadError` when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ReportReadError(f"cannot read report {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ReportReadError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    return validate_report(data, str(path))


def validate_report(data: Any, name: str) -> dict[str, Any]:
    if not isinstance(data, dict) or data.get("kind") != "check":
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise ReportReadError(f"{name} is not a kvcontract check report (kind {kind!r})")
    version = str(data.get("schema_version", ""))
    if version != "2":
        raise ReportReadError(f"{name} has check schema version {version!r}; this kit compares "
                              "version 2 (findings keyed by signature): re-run the check")
    records = data.get("records")
    if not isinstance(records, list):
        raise ReportReadError(f"{name} has no list of records")
    for index, r in enumerate(records):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("clause", "mode", "status")):
            raise ReportReadError(f"{name}: record {index} lacks clause, mode or status")
    return data


def header(report: Mapping[str, Any], name: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name} if name else {}
    out.update({k: report.get(k) for k in HEADER_FIELDS if report.get(k) is not None})
    return out


def findings(report: Mapping[str, Any]) -> dict[Key, Finding]:
    """The present findings of a report, by key (the first record of a key wins)."""
    out: dict[Key, Finding] = {}
    for r in report.get("records", []):
        if r.get("status") not in PRESENT:
            continue
        f = Finding(clause=r["clause"], mode=r["mode"], signature=str(r.get("signature") or ""),
                    status=r["status"], title=str(r.get("title") or ""), message=str(r.get("message") or ""),
                    snippet=str(r.get("snippet") or ""), where=str(r.get("where") or ""))
        out.setdefault(f.key, f)
    return out


def known_signatures(report: Mapping[str, Any]) -> dict[tuple[str, str], list[str]]:
    """The report's present findings as (clause, mode) -> signatures: what a check against
    it as the baseline already knows (a new finding's witness avoids these)."""
    out: dict[tuple[str, str], list[str]] = {}
    for f in findings(report).values():
        out.setdefault((f.clause, f.mode), []).append(f.signature)
    return out


def _judged(report: Mapping[str, Any]) -> set[tuple[str, str]]:
    """Clause x mode pairs the report judged (a record with a status other than skip)."""
    return {(r["clause"], r["mode"]) for r in report.get("records", []) if r.get("status") != "skip"}


def _warnings(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    out = []
    if base.get("engine") != head.get("engine"):
        out.append(f"the reports check different engines ({base.get('engine')} vs {head.get('engine')})")
    for key in ("profile", "seed"):
        if base.get(key) != head.get(key):
            out.append(f"the reports differ in {key} ({base.get(key)} vs {head.get(key)}): random-phase "
                       "findings may differ by sampling alone")
    base_modes, head_modes = set(base.get("modes") or []), set(head.get("modes") or [])
    if base_modes and head_modes and base_modes != head_modes:
        out.append(f"the reports ran different modes ({', '.join(sorted(base_modes))} vs "
                   f"{', '.join(sorted(head_modes))})")
    return out


def compare(base: Mapping[str, Any], head: Mapping[str, Any], *, base_name: str = "BASE",
            head_name: str = "HEAD") -> DiffResult:
    """Classify the present findings of two reports (dictionaries of schema ``check`` v2)."""
    old, now = findings(base), findings(head)
    judged_base, judged_head = _judged(base), _judged(head)
    unjudged = sorted(
        [f"{c} [{m}]: judged in {base_name} only" for c, m in judged_base - judged_head]
        + [f"{c} [{m}]: judged in {head_name} only" for c, m in judged_head - judged_base])
    # A finding of a clause the other side never judged is not new, nor fixed: unknown.
    new = [f for k, f in sorted(now.items()) if k not in old and (k[0], k[1]) in judged_base]
    fixed = [f for k, f in sorted(old.items()) if k not in now and (k[0], k[1]) in judged_head]
    unchanged = [f for k, f in sorted(now.items()) if k in old]
    return DiffResult(base=header(base, base_name), head=header(head, head_name), new=new, fixed=fixed,
                      unchanged=unchanged, unjudged=unjudged, warnings=_warnings(base, head))


def apply_baseline(report: Any, base_path: str | Path, *, base: Mapping[str, Any] | None = None) -> DiffResult:
    """``check --baseline``: the findings of a fresh report (a ``Report`` or its
    dictionary) against the report in ``base_path`` (``base``: already read)."""
    head = report.model_dump(mode="json") if hasattr(report, "model_dump") else dict(report)
    return compare(read_report(base_path) if base is None else base, validate_report(head, "this check"),
                   base_name=str(base_path), head_name="this check")


def _kinds(signature: str) -> list[str]:
    parts = signature.split(":")
    if parts[0] == "optimized-only" and len(parts) >= 4:
        parts = parts[2:]
    if len(parts) < 2:
        return []
    return [k for k in parts[1].replace(">", "+").split("+") if k[:1].isupper() and " " not in k]


def _describe(side: Mapping[str, Any]) -> str:
    parts = [f"{side.get('engine', '?')} {side.get('engine_version', '?')}"]
    source = side.get("engine_source")
    if isinstance(source, Mapping) and source.get("path"):
        describe = source.get("describe") or "not a git tree"
        parts.append(f"source {source['path']} ({describe}{', dirty' if source.get('dirty') == 'yes' else ''})")
    parts.append(f"profile {side.get('profile', '?')}, seed {side.get('seed', '?')}")
    return ", ".join(parts)


def subject_lines(result: DiffResult, limit: int | None = None) -> list[str]:
    """The new findings grouped by subject, one line each (none when nothing is new); at
    most ``limit`` subjects, then a count of the rest."""
    by_subject = result.new_by_subject()
    if not by_subject:
        return []
    lines = ["", f"new findings by subject ({len(by_subject)}):"]
    shown = list(by_subject.items())[:limit] if limit is not None else list(by_subject.items())
    for what, found in shown:
        clauses = sorted({f.clause for f in found})
        kinds = sorted({k for f in found for k in _kinds(f.signature)})
        modes = sorted({f.mode for f in found})
        lines.append(f"  {what}: {len(found)} record(s) — {', '.join(clauses)}"
                     f"{' on ' + ', '.join(kinds) if kinds else ''} ({', '.join(modes)})")
    if len(shown) < len(by_subject):
        lines.append(f"  ... and {len(by_subject) - len(shown)} more subjects (--verbose lists them)")
    return lines


LIST_LIMIT = 20
"""Terse output lists at most this many new (and fixed) findings; ``verbose`` lists all."""


def _one_line(text: str, width: int = 110) -> str:
    first = (text or "(no message)").strip().splitlines()[0] if (text or "").strip() else "(no message)"
    return first if len(first) <= width else first[: width - 1] + "…"


def render(result: DiffResult, *, verbose: bool = False) -> str:
    """The terminal summary: counts, the new findings by subject, then one line per new
    finding (the first :data:`LIST_LIMIT`); ``verbose``: every new finding in full, with its
    message and repro, and every fixed one."""
    lines = [f"kvcontract diff: {result.base.get('name', 'BASE')} -> {result.head.get('name', 'HEAD')}",
             f"  base: {_describe(result.base)}",
             f"  head: {_describe(result.head)}",
             f"new: {len(result.new)}, fixed: {len(result.fixed)}, unchanged: {len(result.unchanged)}"
             f" (present = {', '.join(sorted(PRESENT))})"]
    lines += [f"warning: {w}" for w in result.warnings]
    by_subject = result.new_by_subject()
    lines += subject_lines(result, None if verbose else LIST_LIMIT // 2)
    if verbose:
        for f in result.new:
            lines += ["", f"=== NEW {f.label} {f.title}".rstrip(), f.message or "(no message)"]
            if f.where:
                lines.append(f"at {f.where}")
            if f.snippet:
                lines += ["--- repro ---", f.snippet.rstrip()]
    elif result.new:
        lines += ["", "new findings (message; --verbose for each repro, or the head's --repro-dir):"]
        lines += [f"  NEW {f.label}: {_one_line(f.message)}" for f in result.new[:LIST_LIMIT]]
        if len(result.new) > LIST_LIMIT:
            lines.append(f"  ... and {len(result.new) - LIST_LIMIT} more (--verbose lists them)")
    if result.fixed:
        shown = result.fixed if verbose else result.fixed[:LIST_LIMIT]
        lines += ["", "fixed (in base, not in head):"] + [f"  {f.label}" for f in shown]
        if len(shown) < len(result.fixed):
            lines.append(f"  ... and {len(result.fixed) - len(shown)} more (--verbose lists them)")
    if result.unjudged:
        lines += ["", "not compared (judged on one side only):"] + [f"  {u}" for u in result.unjudged]
    lines += ["", "result: " + (f"{len(by_subject)} new finding(s) by subject, {len(result.new)} new record(s)"
                                if result.new else "nothing new")]
    return "\n".join(lines)


def write_json(result: DiffResult, path: str | Path) -> None:
    write_atomic(path, json.dumps(result.to_json(), indent=2) + "\n")


def new_labels(result: DiffResult) -> Iterable[str]:
    return (f.label for f in result.new)
