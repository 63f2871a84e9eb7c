"""``kvcontract check`` as a CI gate: terse console ending in the verdict, repro files,
JUnit per clause x mode, and bad arguments refused before any worker starts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvcontract.conformance.contract.laws import known_clauses
from kvcontract.conformance.reports.check import ClauseRun, Record, Report, summarize
from kvcontract.conformance.reports.diff import compare
from kvcontract.conformance.reports.expectations import toml_value
from kvcontract.conformance.reports.gate import (
    Gate,
    needing_attention,
    render_console,
    write_junit,
    write_repros,
)
from kvcontract.conformance.run import session as runner

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvcontract", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def _cases(path: Path) -> list[ET.Element]:
    return list(ET.parse(path).getroot().iter("testcase"))


def test_a_failing_run_is_short_ends_in_the_verdict_and_writes_runnable_repros(tmp_path):
    # bare-assert under -O: more findings in two clauses than the 200 repro files
    result = _cli("check", "--engine", "mutant:bare-assert", "--profile", "quick", "--optimize", "on",
                  "--quiet", "--clauses", "ERROR-DETECT-1,ERROR-TYPE-1", "--json", str(tmp_path / "r.json"),
                  "--junit", str(tmp_path / "r.xml"))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.rstrip().splitlines()
    report = Report.model_validate_json((tmp_path / "r.json").read_text())
    failing = [r for r in report.records if r.status == "fail"]
    assert len(failing) > 100 and len(lines) < 60
    assert lines[-1].startswith(f"verdict: FAIL — {len(failing)} findings of {len(report.defects)} defect")
    assert lines[-1].endswith(f" need attention ({len(failing)} fail) (exit 1)")
    assert "clause x mode: " in result.stdout and "findings: " in result.stdout
    assert "--- repro ---" not in result.stdout and result.stderr == ""
    assert all(r.snippet for r in failing)  # the snippets stay in the JSON
    repros = sorted(p for p in (tmp_path / "r-repros").glob("*.py") if not p.name.startswith("defect-"))
    assert len(repros) == 200 < len(failing)
    defects = sorted((tmp_path / "r-repros").glob("defect-D*.py"))  # one per defect, besides the limit
    assert defects and len(defects) == len(report.defects) < 10
    assert f"{len(failing) - len(repros)} more not written" in result.stdout
    index = (tmp_path / "r-repros" / "INDEX.txt").read_text().splitlines()
    assert len([line for line in index if not line.startswith("#")]) == len(failing)
    first = next(line for line in lines if line.strip().startswith("FAIL"))
    path = Path(first.split()[-1])
    path = path if path.is_absolute() else ROOT / path
    assert path.exists()
    run = subprocess.run([sys.executable, "-O", str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode != 0 and "VIOLATION" in run.stderr.strip().splitlines()[-1]
    cases = [c for c in _cases(tmp_path / "r.xml") if c.find("failure") is not None]
    assert sorted(c.get("name") for c in cases) == ["ERROR-DETECT-1", "ERROR-TYPE-1"]
    assert {c.get("classname") for c in cases} == {"kvcontract.mutant_bare-assert.optimized"}


def test_a_second_run_replaces_the_repros_of_the_first(tmp_path):
    stale = tmp_path / "repros" / "MERGE-ORDER-1-normal-0123456789.py"
    stale.parent.mkdir()
    stale.write_text("old")
    keep = tmp_path / "repros" / "mine.py"
    keep.write_text("not the kit's")
    result = _cli("check", "--engine", "reference", "--profile", "quick", "--optimize", "off", "--quiet",
                  "--clauses", "merge-order-1", "--repro-dir", str(tmp_path / "repros"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().splitlines()[-1] == "verdict: PASS — nothing failed (exit 0)"
    assert "MERGE-ORDER-1" in result.stdout
    assert not stale.exists() and keep.exists()


def _report_and_baseline() -> tuple[Report, dict]:
    report = runner.run_check("mutant:drops-capability", profile="quick",
                              clauses=["MERGE-UNION-1", "MERGE-IDENTITY-1"])
    base = report.model_dump(mode="json")
    # the base lacks MERGE-UNION-1's findings in the normal mode: they are new in this report
    base["records"] = [r for r in base["records"] if not (r["clause"] == "MERGE-UNION-1" and r["mode"] == "normal")]
    base["records"].append({**report.records[0].model_dump(mode="json"), "clause": "MERGE-UNION-1",
                            "mode": "normal", "status": "pass", "signature": ""})
    return report, base


def test_junit_with_a_baseline_fails_only_the_cells_with_new_findings(tmp_path):
    report, base = _report_and_baseline()
    delta = compare(base, report.model_dump(mode="json"))
    gate = Gate(report=report, attention=needing_attention(report, delta), delta=delta)
    assert delta.new and len(gate.attention) == len(delta.new)
    write_junit(gate, tmp_path / "r.xml")
    root = ET.parse(tmp_path / "r.xml").getroot()
    cases = _cases(tmp_path / "r.xml")
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert len(failed) == len({(f.clause, f.mode) for f in delta.new}) == 1
    assert failed[0].get("name") == "MERGE-UNION-1" and failed[0].get("classname").endswith(".normal")
    assert all(f.signature in failed[0].find("failure").get("message") for f in delta.new)
    skipped = [c.find("skipped").get("message") for c in cases if c.find("skipped") is not None]
    assert skipped and all(m.startswith("known: ") for m in skipped)
    assert all("[" not in c.get("name") and c.get("classname") for c in cases)
    for suite in root:
        own = list(suite.iter("testcase"))
        assert int(suite.get("tests")) == len(own)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in own)
        assert int(suite.get("errors")) == sum(c.find("error") is not None for c in own)
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in own)
    text = render_console(gate)
    last = text.splitlines()[-1]
    assert last.startswith(f"verdict: FAIL — {len(delta.new)} new findings") and last.endswith(
        " need attention (exit 1)")
    assert "NEW fail" in text


def test_check_with_a_baseline_exits_1_on_new_and_lists_only_them(tmp_path):
    report, base = _report_and_baseline()
    (tmp_path / "base.json").write_text(json.dumps(base))
    result = _cli("check", "--engine", "mutant:drops-capability", "--profile", "quick", "--quiet",
                  "--clauses", "MERGE-UNION-1,MERGE-IDENTITY-1", "--baseline", str(tmp_path / "base.json"),
                  "--junit", str(tmp_path / "r.xml"), "--repro-dir", str(tmp_path / "repros"))
    assert result.returncode == 1, result.stderr
    new = [line for line in result.stdout.splitlines() if line.strip().startswith("NEW ")]
    assert new and all("MERGE-UNION-1 [normal]" in line for line in new)
    assert len([p for p in (tmp_path / "repros").glob("*.py") if not p.name.startswith("defect-")]) == len(new)
    failures = sum(c.find("failure") is not None for c in _cases(tmp_path / "r.xml"))
    assert failures == 1


@pytest.mark.parametrize(("option", "make"), [
    ("--json", lambda tmp: str(tmp)),  # a directory
    ("--junit", lambda tmp: str(tmp) + "/"),
    ("--json", lambda tmp: str(tmp / "afile" / "r.json")),  # its parent is a file
    ("--repro-dir", lambda tmp: str(tmp / "afile")),  # a file, not a directory
])
def test_a_bad_output_path_exits_2_before_any_worker_starts(tmp_path, option, make):
    (tmp_path / "afile").write_text("x")
    start = time.perf_counter()
    result = _cli("check", "--engine", "vllm", "--profile", "quick", option, make(tmp_path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert time.perf_counter() - start < 20  # no engine was loaded (vLLM alone takes longer)
    assert len(result.stderr.strip().splitlines()) == 1 and option in result.stderr
    assert result.stdout == ""


def test_unknown_clauses_list_the_valid_ids():
    result = _cli("check", "--engine", "reference", "--clauses", "nope-1,merge-order-1")
    assert result.returncode == 2
    assert "nope-1" in result.stderr and "valid IDs" in result.stderr
    assert all(c in result.stderr for c in known_clauses())


def test_an_expectations_file_for_another_release_is_a_loud_warning(tmp_path):
    xfails = tmp_path / "x.toml"
    witness = {"specs": [], "field": ""}
    xfails.write_text('engine = "vllm"\nversion = "0.29.0"\n[[xfail]]\nclause = "ERROR-EMPTY-1"\n'
                      f'mode = "normal"\nreason = "pretend"\nsignature = "x"\nwitness = {toml_value(witness)}\n')
    result = _cli("check", "--engine", "reference", "--profile", "quick", "--optimize", "off", "--quiet",
                  "--clauses", "UNIFORM-EMPTY-1", "--xfails", str(xfails), "--json", str(tmp_path / "r.json"))
    assert "WARNING: expectations file" in result.stderr and "vllm 0.29.0" in result.stderr
    report = Report.model_validate_json((tmp_path / "r.json").read_text())
    assert report.warnings and "0.29.0" in report.warnings[0]
    assert "warning: expectations file" in result.stdout


def _record(clause: str, mode: str, status: str, signature: str = "") -> Record:
    return Record(clause=clause, title="t", level="MUST", mode=mode, status=status, signature=signature,
                  snippet="raise SystemExit('VIOLATION')" if signature else "")


def test_the_summary_states_its_units_and_known_findings_are_counted_per_clause(tmp_path):
    records = [_record("MERGE-ORDER-1", "normal", "pass"), _record("MERGE-ORDER-1", "optimized", "skip"),
               *[_record("ERROR-DETECT-1", m, "xfail", f"accepted:FullAttentionSpec:f{i}")
                 for m in ("normal", "optimized") for i in range(3)]]
    report = Report(kit_version="0", engine="e", engine_version="1", profile="quick", seed=0,
                    modes=["normal", "optimized"], records=records, summary=summarize(records, 1.0),
                    clauses=[ClauseRun(clause="MERGE-ORDER-1", mode="normal", status="pass")])
    gate = Gate(report=report, attention=needing_attention(report))
    write_repros(gate, tmp_path / "repros")
    assert not (tmp_path / "repros").exists()  # nothing needs attention: nothing written
    lines = render_console(gate).splitlines()
    assert "clause x mode: 1 pass, 1 skip, 2 xfail; findings: 6 xfail, 0 fail in 1.0s" in lines
    assert "known (xfail), per clause: ERROR-DETECT-1 6" in lines
    assert lines[-1] == "verdict: PASS — nothing failed; 6 known findings still reproduce (exit 0)"
    assert not any("accepted:" in line for line in lines)
    assert any("accepted:FullAttentionSpec:f0" in line for line in render_console(gate, verbose=True).splitlines())
    write_junit(gate, tmp_path / "r.xml")
    skipped = [c.find("skipped").get("message") for c in _cases(tmp_path / "r.xml") if c.find("skipped") is not None]
    assert sorted(skipped) == ["known: 3 findings (xfail)", "known: 3 findings (xfail)", "skip: skipped"]
