"""A ``check`` report as SARIF 2.1.0: one result per defect, placed on the engine line it was
traced to, for code-scanning tools (GitHub's ``upload-sarif``, IDE viewers).

:func:`build_sarif` is a pure function from a report's JSON dictionary (schema ``check`` v2,
as ``--json`` writes it; optionally a baseline report's) to the SARIF log's dictionary;
:func:`write_sarif` writes it atomically. The report is read defensively: every field a defect
carries goes into its result's ``properties.defect`` whatever its name (the repro as the
result's attached artifact), so a field added to
:class:`~kvcontract.conformance.reports.check.Defect` flows through without an edit here.

The mapping (``docs/ci-recipe.md`` says it for users):

- one **rule** per clause of the catalogue (``id`` the clause ID, the title, the normative
  paragraph and the whole SPEC.md section as its help, its level as the default level);
- one **result** per defect, not per defect x clause: a defect is one engine function x one
  outcome class, one thing to fix, while its findings often span many clauses (an ``assert``
  that ``python -O`` removes breaks clauses across chapters); one alert per clause would stack
  them all on one line. The ``ruleId`` is the defect's strictest clause (MUST before SHOULD before MAY, then
  SPEC.md order), so it is stable while the defect's clauses are; every clause is in
  ``properties.clauses``;
- ``level``: ``error`` for a MUST defect, ``warning`` for a SHOULD one, ``note`` for one that
  rests on advisory fields only (``advisory-*`` outcomes: nothing reads the value);
- the location: the defect's ``file:line``, relative to the engine's source root (the folder
  that holds its package, the root of the engine's repository), under ``uriBaseId``
  ``%SRCROOT%`` (``originalUriBaseIds`` gives that root when the report knows it); the other
  lines of the function where its findings arise are ``relatedLocations``;
- ``partialFingerprints["kvcontractDefect/v1"]``: a digest of the defect's id (function and
  outcome class), never of line numbers, so an alert follows the defect when code moves;
- the message: the summary, reachability (the real model tables that show it, or why it is
  latent), the clauses and the repro snippet; the repro is also a run artifact (``contents``)
  attached to the result, named as ``--repro-dir`` names its file;
- with a baseline: ``baselineState`` ``new`` (a defect with a new finding, unknown to the
  baseline), ``updated`` (a known defect with a new finding), ``unchanged`` (no new finding).
  Defects of the baseline that are gone are listed in ``run.properties.fixedDefects``, not as
  ``absent`` results: code scanning reads every result as an open alert, whatever its
  ``baselineState``, and closes an alert that an upload no longer has.

Kit errors, known findings that no longer fail (``xpass``), findings not traced to a defect,
a defect with no engine location (code scanning refuses a whole upload with a result it cannot
place: listed in ``run.properties.unplacedDefects``), the report's warnings and an interrupted
run are ``toolExecutionNotifications`` (an interrupted run's invocation is not
``executionSuccessful``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kvcontract.conformance.reports.diff import compare
from kvcontract.conformance.reports.gate import defect_repro_name
from kvcontract.reports import write_atomic
from kvcontract.spec import Clause, clause_sections, load_catalogue

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
"""The ``$schema`` of the log: the OASIS SARIF 2.1.0 schema (errata 01)."""
SRCROOT = "%SRCROOT%"
"""The ``uriBaseId`` of engine locations: the engine's source root."""
REPRODIR = "REPRODIR"
"""The ``uriBaseId`` of the repro artifacts: where ``check --repro-dir`` writes them."""
FINGERPRINT = "kvcontractDefect/v1"
"""The ``partialFingerprints`` key: a digest of the defect's id."""
TOOL_NAME = "kvcontract"
LEVELS = {"MUST": "error", "MUST NOT": "error", "SHOULD": "warning", "SHOULD NOT": "warning", "MAY": "note"}
"""RFC 2119 level -> SARIF level."""
SEVERITY = {"error": "error", "warning": "warning", "note": "recommendation"}
"""SARIF level -> the ``problem.severity`` code scanning shows for a rule."""
_STRICTNESS = {"MUST": 0, "MUST NOT": 0, "SHOULD": 1, "SHOULD NOT": 1, "MAY": 2}
REPRO_INLINE_LIMIT = 16000
"""A repro longer than this (characters) is not repeated in the message, only attached."""
TAG_FIELDS = ("tier", "level", "category", "input", "outcome")
"""Defect fields whose value is a result's tag (to filter alerts by), where the defect has them."""
SHOWN_FIELDS = frozenset({"id", "location", "lines", "function", "outcome", "summary", "level", "tier", "models",
                          "latent_reason", "clauses", "modes", "signatures", "findings", "status", "repro",
                          "representative", "review"})
"""Defect fields the message says in its own words; any other short one is a ``name: value`` line."""
NOTIFICATION_LIMIT = 50
"""Kit errors (and untraced findings) named one per notification; the rest counted in one."""


# -- the rules ----------------------------------------------------------------------------------


def _pascal(title: str) -> str:
    """``A group's spec is the merge`` -> ``GroupSpecIsTheMerge`` (no one-letter words, which would
    put two capitals together)."""
    words = [w for w in re.findall(r"[A-Za-z0-9]+", title.replace("'", "")) if len(w) > 1 or w.isdigit()]
    return "".join(w[:1].upper() + w[1:] for w in words) or "Clause"


def _first_paragraph(markdown: str) -> str:
    return markdown.split("\n\n", 1)[0].replace("\n", " ").strip()


def _plain(markdown: str) -> str:
    """Markdown without emphasis and code marks (the rule's help as plain text)."""
    return re.sub(r"\*\*|(?<!\w)\*(?!\s)|(?<!\s)\*(?!\w)|`", "", markdown)


def _rule(clause: Clause, section: str) -> dict[str, Any]:
    level = LEVELS.get(clause.level, "warning")
    heading = f"{clause.id} — {clause.title} ({clause.level})"
    section = section or f"**{clause.level}.** {clause.title}"
    return {
        "id": clause.id,
        "name": _pascal(clause.title),
        "shortDescription": {"text": f"{clause.title} ({clause.level})"},
        "fullDescription": {"text": _plain(_first_paragraph(section))},
        "help": {"text": f"{heading}\n\n{_plain(section)}", "markdown": f"**{heading}**\n\n{section}"},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["kvcontract", clause.chapter, clause.level], "level": clause.level,
                       "chapter": clause.chapter, "problem.severity": SEVERITY[level]},
    }


def _unknown_rule(clause_id: str) -> dict[str, Any]:
    """A rule for a clause the catalogue does not have (a report of another kit version)."""
    return {"id": clause_id, "name": _pascal(clause_id), "shortDescription": {"text": clause_id},
            "fullDescription": {"text": f"{clause_id}: not in this kit's catalogue (spec/clauses.toml)"},
            "defaultConfiguration": {"level": "warning"}, "properties": {"tags": ["kvcontract"]}}


def _rules(used: Iterable[str]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every clause of the catalogue, in SPEC.md order, then any ``used`` clause it lacks."""
    sections = clause_sections()
    catalogue = load_catalogue()
    rules = [_rule(c, sections.get(c.id, "")) for c in catalogue]
    known = {c.id for c in catalogue}
    rules += [_unknown_rule(c) for c in dict.fromkeys(used) if c not in known]
    return rules, {r["id"]: i for i, r in enumerate(rules)}


def rule_clause(clauses: Sequence[str]) -> str:
    """A defect's rule: its strictest clause (MUST, SHOULD, MAY), the first in SPEC.md order."""
    catalogue = {c.id: (i, c.level) for i, c in enumerate(load_catalogue())}

    def rank(clause_id: str) -> tuple[int, int, str]:
        order, level = catalogue.get(clause_id, (len(catalogue), ""))
        return (_STRICTNESS.get(level, 3), order, clause_id)

    return min(clauses, key=rank) if clauses else "kvcontract"


# -- the results --------------------------------------------------------------------------------


def result_level(defect: Mapping[str, Any]) -> str:
    """``note`` for an advisory defect (nothing reads the value), else by the defect's level."""
    if str(defect.get("outcome", "")).startswith("advisory-"):
        return "note"
    return LEVELS.get(str(defect.get("level", "")), "warning")


def fingerprint(defect_id: str) -> str:
    return hashlib.sha256(defect_id.encode()).hexdigest()[:32]


def _split_location(location: str) -> tuple[str, int | None]:
    """``vllm/v1/kv_cache_interface.py:814`` -> (path, line); a path without a line -> (path, None)."""
    path, _, line = location.rpartition(":")
    if path and line.isdigit() and int(line) >= 1:
        return path, int(line)
    return location, None


def _uri(path: str) -> str:
    """A relative path as a URI reference (``/`` separators, percent-encoded where needed)."""
    return quote(path.replace("\\", "/").lstrip("/"), safe="/-_.~")


def _physical(path: str, line: int | None, base: str = SRCROOT) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(path), "uriBaseId": base}}
    if line is not None:
        physical["region"] = {"startLine": line}
    return physical


def _names(items: Sequence[str], limit: int = 6) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _reach(defect: Mapping[str, Any]) -> str:
    tier = str(defect.get("tier") or "")
    models = [str(m) for m in defect.get("models") or []]
    if models:
        return f"{tier.capitalize() or 'Reachable'}: the real model table{'s' * (len(models) != 1)} " \
               f"{_names(models)} (built by the engine's own code) show{'s' * (len(models) == 1)} it."
    reason = str(defect.get("latent_reason") or "").rstrip(".")
    if reason and (not tier or reason.lower().startswith(tier.lower())):  # "reached, no harm: ..."
        return f"{reason[:1].upper()}{reason[1:]}."
    return f"{tier.capitalize() or 'Latent'}{': ' + reason if reason else ''}."


def _other_fields(defect: Mapping[str, Any], width: int = 300) -> list[str]:
    """``Needs option: --x`` for each field the message does not know (one the defect model gained
    since), when it is a short text, a number or a list of texts."""
    lines = []
    for key, value in defect.items():
        if key in SHOWN_FIELDS or value in (None, "", [], False):
            continue
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            value = ", ".join(str(v) for v in value)
        if isinstance(value, str | int | float) and len(str(value)) <= width:
            lines.append(f"{str(key).replace('_', ' ').capitalize()}: {value}")
    return lines


def _message(defect: Mapping[str, Any], rule_id: str, state: str | None, related: Sequence[int],
             repro_name: str) -> dict[str, str]:
    clauses = [str(c) for c in defect.get("clauses") or []]
    modes = [str(m) for m in defect.get("modes") or []]
    others = [c for c in clauses if c != rule_id]
    head = {"new": "New in this change: ", "updated": "New findings of a known defect: "}.get(state or "", "")
    lines = [f"{head}{str(defect.get('summary') or defect.get('id') or 'defect').rstrip('.')}.",
             _reach(defect),
             f"Clause {rule_id}{' (also ' + _names(others) + ')' if others else ''}; "
             f"modes {', '.join(modes) or '?'}; {defect.get('findings', '?')} finding(s), "
             f"{len(defect.get('signatures') or [])} signature(s)."]
    lines += _other_fields(defect)
    if defect.get("review"):
        lines.append(f"Review: {defect['review']}")
    if related:
        lines.append("Also at " + ", ".join(f"[line {n}]({i})" for i, n in enumerate(related, 1)) + ".")
    repro = str(defect.get("repro") or "").rstrip()
    markdown = "\n\n".join(lines)
    if not repro:
        return {"text": "\n".join(lines), "markdown": markdown}
    how = "python -O" if modes and all(m == "optimized" for m in modes) else "python"
    if len(repro) > REPRO_INLINE_LIMIT:
        where = (f"Repro: {repro_name}, {len(repro.splitlines())} lines (run it with {how}): attached to this "
                 "result, and in the check's --repro-dir.")
        return {"text": "\n".join([*lines, where]), "markdown": f"{markdown}\n\n{where}"}
    lines.append(f"Repro ({repro_name}; run it with {how}):")
    return {"text": "\n".join(lines) + "\n" + repro + "\n",
            "markdown": f"{markdown}\n\nRepro (`{repro_name}`; run it with `{how}`):\n\n```python\n{repro}\n```\n"}


def _properties(defect: Mapping[str, Any], state: str | None, new_findings: int) -> dict[str, Any]:
    tags = ["kvcontract", *(str(defect[k]) for k in TAG_FIELDS if isinstance(defect.get(k), str) and defect[k])]
    props: dict[str, Any] = {"tags": list(dict.fromkeys(tags)),
                             "defect": {k: v for k, v in defect.items() if k != "repro"},
                             "clauses": list(defect.get("clauses") or [])}
    if state is not None:
        props["newFindings"] = new_findings
    return props


def _result(defect: Mapping[str, Any], number: int, rule_index: Mapping[str, int],
            state: str | None, new_findings: int, artifact: int | None) -> dict[str, Any]:
    defect_id = str(defect.get("id") or f"defect-{number}")
    clauses = [str(c) for c in defect.get("clauses") or []]
    rule_id = rule_clause(clauses)
    path, line = _split_location(str(defect.get("location") or ""))
    lines = [n for n in defect.get("lines") or [] if isinstance(n, int) and n >= 1]
    related = [n for n in lines if n != line]
    repro_name = defect_repro_name(number, defect_id)
    result: dict[str, Any] = {
        "ruleId": rule_id,
        "level": result_level(defect),
        "kind": "fail",
        "message": _message(defect, rule_id, state, related, repro_name),
        "partialFingerprints": {FINGERPRINT: fingerprint(defect_id)},
    }
    if rule_id in rule_index:
        result["ruleIndex"] = rule_index[rule_id]
    location: dict[str, Any] = {"id": 0, "physicalLocation": _physical(path, line)}
    function = str(defect.get("function") or "")
    if function:
        location["logicalLocations"] = [{"fullyQualifiedName": function,
                                         "kind": "member" if "." in function else "function"}]
    result["locations"] = [location]
    if related:
        result["relatedLocations"] = [{"id": i, "physicalLocation": _physical(path, n),
                                       "message": {"text": f"{function or 'the function'}: also here (line {n})"}}
                                      for i, n in enumerate(related, 1)]
    if state is not None:
        result["baselineState"] = state
    if artifact is not None:
        result["attachments"] = [{"description": {"text": f"repro: {repro_name}"},
                                  "artifactLocation": {"uri": _uri(repro_name), "uriBaseId": REPRODIR,
                                                       "index": artifact}}]
    result["properties"] = _properties(defect, state, new_findings)
    return result


# -- the baseline -------------------------------------------------------------------------------


def _defect_ids(report: Mapping[str, Any]) -> set[str]:
    ids = {str(d.get("id")) for d in report.get("defects") or [] if isinstance(d, Mapping) and d.get("id")}
    return ids | {str(r.get("defect")) for r in report.get("records") or [] if isinstance(r, Mapping)
                  and r.get("defect")}


def baseline_states(report: Mapping[str, Any], baseline: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, int]]:
    """Each defect's ``baselineState`` against ``baseline`` and its number of new findings: new
    findings are :func:`~kvcontract.conformance.reports.diff.compare`'s (what the gate fails on)."""
    new = {f.key for f in compare(baseline, report).new}
    counts: dict[str, int] = {}
    for r in report.get("records") or []:
        key = (r.get("clause"), r.get("mode"), str(r.get("signature") or ""))
        if r.get("defect") and key in new:
            counts[str(r["defect"])] = counts.get(str(r["defect"]), 0) + 1
    known = _defect_ids(baseline)
    states = {}
    for d in report.get("defects") or []:
        defect_id = str(d.get("id"))
        states[defect_id] = ("updated" if defect_id in known else "new") if counts.get(defect_id) else "unchanged"
    return states, counts


def _fixed_defects(report: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[dict[str, Any]]:
    now = _defect_ids(report)
    return [{k: d.get(k) for k in ("id", "location", "level", "tier", "clauses") if k in d}
            for d in baseline.get("defects") or [] if isinstance(d, Mapping) and str(d.get("id")) not in now]


# -- notifications ------------------------------------------------------------------------------


def _label(r: Mapping[str, Any]) -> str:
    return f"{r.get('clause')} [{r.get('mode')}] [{r.get('signature') or ''}]"


def _notification(level: str, text: str, rule: str | None = None) -> dict[str, Any]:
    note: dict[str, Any] = {"level": level, "message": {"text": text}}
    if rule:
        note["associatedRule"] = {"id": rule}
    return note


def _placed(defect: Mapping[str, Any]) -> bool:
    """Whether a defect has an engine file to place its result on (code scanning refuses a
    whole upload with a result that has no location)."""
    return bool(_split_location(str(defect.get("location") or ""))[0])


def _notifications(report: Mapping[str, Any], defects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    records = [r for r in report.get("records") or [] if isinstance(r, Mapping)]
    notes: list[dict[str, Any]] = []
    if report.get("complete") is False:
        not_run = report.get("not_run") or []
        notes.append(_notification("error", f"the check was interrupted: {len(not_run)} clause x mode run(s) did "
                                             "not finish and no finding was traced to a defect; this log is "
                                             "partial, not an analysis to upload"))
    notes += [_notification("warning", str(w)) for w in report.get("warnings") or []]
    errors = [r for r in records if r.get("status") == "error"]
    for r in errors[:NOTIFICATION_LIMIT]:
        where = f" at {r['where']}" if r.get("where") else ""
        notes.append(_notification("error", f"kit error (not a finding) in {_label(r)}: "
                                            f"{str(r.get('message') or '').strip()}{where}", str(r.get("clause"))))
    if len(errors) > NOTIFICATION_LIMIT:
        notes.append(_notification("error", f"{len(errors) - NOTIFICATION_LIMIT} more kit errors: see the JSON report"))
    xpass = [r for r in records if r.get("status") == "xpass"]
    if xpass:
        notes.append(_notification("warning", f"{len(xpass)} known finding(s) no longer fail (xpass): update the "
                                              f"expectations file: {_names([_label(r) for r in xpass], 10)}"))
    unplaced = [str(d.get("id")) for d in defects if not _placed(d)]
    if unplaced:
        notes.append(_notification("warning", f"{len(unplaced)} defect(s) have no engine location, so no result "
                                              f"places them (run.properties.unplacedDefects): {_names(unplaced)}"))
    traced = {str(d.get("id")) for d in defects}
    untraced = [r for r in records if r.get("status") in ("fail", "xfail")
                and str(r.get("defect") or "") not in traced]
    if untraced and report.get("complete") is not False:
        notes.append(_notification("warning", f"{len(untraced)} finding(s) were not traced to engine code, so no "
                                              f"result places them: {_names([_label(r) for r in untraced], 10)}"))
    return notes


# -- the log ------------------------------------------------------------------------------------


def _root_uri(report: Mapping[str, Any]) -> dict[str, Any]:
    root: dict[str, Any] = {"description": {"text": "the engine's source root: the folder that holds its "
                                                    "package, the root of the engine's repository"}}
    source = report.get("engine_source")
    if isinstance(source, Mapping) and source.get("path") and Path(str(source["path"])).is_absolute():
        root["uri"] = Path(str(source["path"])).as_uri().rstrip("/") + "/"
    return root


def _run_properties(report: Mapping[str, Any], baseline: Mapping[str, Any] | None,
                    baseline_name: str) -> dict[str, Any]:
    keep = ("schema_version", "kit_version", "engine", "engine_version", "profile", "seed", "domain", "modes",
            "expectations", "engine_source", "tables", "complete", "coverage_summary", "summary")
    props: dict[str, Any] = {k: report[k] for k in keep if report.get(k) is not None}
    if report.get("not_run"):
        props["not_run"] = report["not_run"]
    if baseline is not None:
        props["baseline"] = {"name": baseline_name, **{k: baseline[k] for k in ("engine", "engine_version",
                                                                               "profile", "seed") if k in baseline}}
        props["fixedDefects"] = _fixed_defects(report, baseline)
    return props


def build_sarif(report: Mapping[str, Any], *, baseline: Mapping[str, Any] | None = None,
                baseline_name: str = "", repro_dir: str | Path | None = None) -> dict[str, Any]:
    """The SARIF 2.1.0 log of a ``check`` report (its JSON dictionary); ``baseline``: a report to
    mark each result against (``baselineState``); ``repro_dir``: where the repro files were written
    (the artifacts' base)."""
    defects = [d for d in report.get("defects") or [] if isinstance(d, Mapping)]
    states, counts = baseline_states(report, baseline) if baseline is not None else ({}, {})
    rules, rule_index = _rules(rule_clause([str(c) for c in d.get("clauses") or []]) for d in defects)
    artifacts: list[dict[str, Any]] = []
    results = []
    for number, d in enumerate(defects, 1):
        if not _placed(d):
            continue
        artifact = None
        if d.get("repro"):
            artifact = len(artifacts)
            name = defect_repro_name(number, str(d.get("id") or f"defect-{number}"))
            artifacts.append({"location": {"uri": _uri(name), "uriBaseId": REPRODIR},
                              "description": {"text": f"repro of {d.get('id')}: a standalone program that "
                                                      "ends in a VIOLATION line"},
                              "roles": ["attachment"], "mimeType": "text/x-python",
                              "contents": {"text": str(d["repro"]).rstrip() + "\n"}})
        defect_id = str(d.get("id") or "")
        results.append(_result(d, number, rule_index, states.get(defect_id) if baseline is not None else None,
                               counts.get(defect_id, 0), artifact))
    version = str(report.get("kit_version") or "")
    driver: dict[str, Any] = {"name": TOOL_NAME, "fullName": "kvcontract: the KV-cache spec merge contract kit",
                              "rules": rules}
    if version:
        driver["version"] = version
        if re.fullmatch(r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?", version):
            driver["semanticVersion"] = version
    notes = _notifications(report, defects)
    invocation: dict[str, Any] = {"executionSuccessful": report.get("complete") is not False}
    if notes:
        invocation["toolExecutionNotifications"] = notes
    repro_base: dict[str, Any] = {"description": {"text": "the folder check --repro-dir writes the repro files to"}}
    if repro_dir is not None:
        repro_base["uri"] = Path(repro_dir).resolve().as_uri().rstrip("/") + "/"
    engine = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(report.get("engine") or "engine").split("@", 1)[0])
    properties = _run_properties(report, baseline, baseline_name)
    unplaced = [d for d in defects if not _placed(d)]
    if unplaced:
        properties["unplacedDefects"] = [{k: v for k, v in d.items() if k != "repro"} for d in unplaced]
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "automationDetails": {"id": f"kvcontract/{engine}/"},
        "originalUriBaseIds": {SRCROOT: _root_uri(report), REPRODIR: repro_base},
        "invocations": [invocation],
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": properties,
    }
    if artifacts:
        run["artifacts"] = artifacts
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def write_sarif(report: Mapping[str, Any], path: str | Path, **options: Any) -> None:
    """:func:`build_sarif` written to ``path`` (whole or not at all)."""
    write_atomic(path, json.dumps(build_sarif(report, **options), indent=2) + "\n")


__all__ = ["FINGERPRINT", "SARIF_SCHEMA", "SARIF_VERSION", "SRCROOT", "baseline_states", "build_sarif",
           "fingerprint", "result_level", "rule_clause", "write_sarif"]
