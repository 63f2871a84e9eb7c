"""kvcontract diff / check --baseline: findings classified new / fixed / unchanged by signature."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvcontract.cli import main
from kvcontract.conformance.reports.diff import (
    PRESENT,
    ReportReadError,
    apply_baseline,
    compare,
    read_report,
    render,
    subject,
)


def record(clause: str, status: str, signature: str = "", mode: str = "normal", **extra: Any) -> dict[str, Any]:
    return {"clause": clause, "title": f"{clause} title", "level": "MUST", "mode": mode, "status": status,
            "signature": signature, "message": extra.pop("message", f"{clause} {signature} message"),
            "snippet": extra.pop("snippet", ""), **extra}


def report(*records: dict[str, Any], **header: Any) -> dict[str, Any]:
    out = {"schema_version": "2", "kind": "check", "kit_version": "0", "engine": "vllm",
           "engine_version": "0.34.0", "profile": "quick", "seed": 0, "modes": ["normal", "optimized"],
           "records": list(records), "summary": {"counts": {}, "failed": [], "seconds": 0.0}}
    out.update(header)
    return out


BASE = report(
    record("MERGE-ANNOTATION-1", "fail", "dropped:MLAAttentionSpec:is_draft"),
    record("MERGE-ANNOTATION-1", "fail", "dropped:MLAAttentionSpec:alignment"),
    record("MERGE-IDENTITY-1", "xfail", "raised:SinkFullAttentionSpec"),
    record("GROUP-PAGE-1", "pass"),
    record("ERROR-TYPE-1", "error", "kit-error:TypeError"),
    record("DISPATCH-CAUSAL-1", "skip", message="no router"),
)


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_present_statuses_are_documented_and_exclude_xpass() -> None:
    assert {"fail", "xfail", "error"} == PRESENT
    assert "xpass" not in PRESENT and "pass" not in PRESENT and "skip" not in PRESENT


def test_classifies_new_fixed_unchanged_by_clause_mode_signature() -> None:
    head = report(
        record("MERGE-ANNOTATION-1", "fail", "dropped:MLAAttentionSpec:is_draft"),  # unchanged
        record("MERGE-ANNOTATION-1", "fail", "dropped:MLAAttentionSpec:non_causal_multi_token_decode"),  # new
        record("MERGE-ANNOTATION-1", "fail", "dropped:MLAAttentionSpec:is_draft", mode="optimized"),  # new mode
        record("MERGE-IDENTITY-1", "xpass", "raised:SinkFullAttentionSpec"),  # fixed (xpass = gone)
        record("GROUP-PAGE-1", "pass"),
        record("ERROR-TYPE-1", "error", "kit-error:TypeError"),  # unchanged
        record("DISPATCH-CAUSAL-1", "skip", message="no router"),
    )
    base = dict(BASE, records=[*BASE["records"], record("MERGE-ANNOTATION-1", "pass", mode="optimized")])
    result = compare(base, head)
    assert [(f.mode, f.signature) for f in result.new] == [
        ("normal", "dropped:MLAAttentionSpec:non_causal_multi_token_decode"),
        ("optimized", "dropped:MLAAttentionSpec:is_draft")]
    assert {f.signature for f in result.fixed} == {"dropped:MLAAttentionSpec:alignment",
                                                   "raised:SinkFullAttentionSpec"}
    assert {f.signature for f in result.unchanged} == {"dropped:MLAAttentionSpec:is_draft",
                                                       "kit-error:TypeError"}
    assert result.exit_code == 1


def test_xfail_and_fail_of_the_same_signature_are_the_same_finding() -> None:
    head = report(record("MERGE-IDENTITY-1", "fail", "raised:SinkFullAttentionSpec"),
                  record("MERGE-ANNOTATION-1", "fail", "dropped:MLAAttentionSpec:is_draft"),
                  record("MERGE-ANNOTATION-1", "fail", "dropped:MLAAttentionSpec:alignment"),
                  record("ERROR-TYPE-1", "error", "kit-error:TypeError"))
    result = compare(BASE, head)
    assert result.new == [] and result.fixed == [] and len(result.unchanged) == 4
    assert result.exit_code == 0


def test_only_fixed_findings_exit_0() -> None:
    head = report(record("MERGE-ANNOTATION-1", "pass"), record("MERGE-IDENTITY-1", "pass"),
                  record("ERROR-TYPE-1", "pass"))
    result = compare(BASE, head)
    assert result.exit_code == 0 and len(result.fixed) == 4 and not result.new
    assert "nothing new" in render(result)


def test_a_clause_judged_on_one_side_only_is_not_compared() -> None:
    # HEAD judged DISPATCH-CAUSAL-1 (BASE skipped it): its finding is neither new nor gating.
    head = report(*BASE["records"][:5], record("DISPATCH-CAUSAL-1", "fail", "routed:decode"))
    result = compare(BASE, head)
    assert result.new == [] and result.exit_code == 0
    assert result.unjudged == ["DISPATCH-CAUSAL-1 [normal]: judged in HEAD only"]
    assert "not compared" in render(result)


def test_new_finding_is_rendered_with_message_and_repro() -> None:
    head = report(*BASE["records"], record("MERGE-ANNOTATION-1", "fail", "dropped:X:y", message="merge dropped y",
                                           snippet="spec = X(y=1)\nprint(spec.merge([spec]))"))
    text = render(compare(BASE, head), verbose=True)
    assert "=== NEW MERGE-ANNOTATION-1 [normal] [dropped:X:y]" in text
    assert "merge dropped y" in text and "--- repro ---" in text and "print(spec.merge([spec]))" in text
    assert "result: 1 new finding(s) by subject, 1 new record(s)" in text
    terse = render(compare(BASE, head))
    assert "  NEW MERGE-ANNOTATION-1 [normal] [dropped:X:y]: merge dropped y" in terse
    assert "--- repro ---" not in terse and "result: 1 new finding(s) by subject" in terse


def test_terse_diff_fits_a_screen_however_many_findings_are_new() -> None:
    many = [record("GROUP-PAGE-1", "fail", f"page:K{i}", message=f"wrong page {i}\nsecond line") for i in range(60)]
    result = compare(BASE, report(*BASE["records"], *many))
    terse = render(result).splitlines()
    assert len(result.new) == 60 and len(terse) < 60
    assert "  ... and 40 more (--verbose lists them)" in terse
    assert not any("second line" in line for line in terse)
    assert sum(line.startswith("=== NEW") for line in render(result, verbose=True).splitlines()) == 60


def test_warns_on_different_profile_seed_or_engine() -> None:
    head = report(*BASE["records"], profile="default", seed=3, engine="reference")
    warnings = compare(BASE, head).warnings
    assert any("profile" in w for w in warnings) and any("seed" in w for w in warnings)
    assert any("different engines" in w for w in warnings)


@pytest.mark.parametrize("data, match", [
    ({"kind": "mutants", "schema_version": "1"}, "not a kvcontract check report"),
    ({"kind": "check", "schema_version": "1", "records": []}, "schema version '1'"),
    ({"kind": "check", "schema_version": "2", "records": [{"clause": "X"}]}, "lacks clause, mode or status"),
])
def test_rejects_what_is_not_a_v2_check_report(tmp_path: Path, data: dict[str, Any], match: str) -> None:
    with pytest.raises(ReportReadError, match=match):
        read_report(write(tmp_path, "r.json", data))


def test_cli_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path, "base.json", BASE)
    same = write(tmp_path, "same.json", BASE)
    worse = write(tmp_path, "worse.json", report(*BASE["records"], record("GROUP-PAGE-1", "fail", "page:MLA")))
    assert main(["diff", base, same]) == 0
    out = tmp_path / "diff.json"
    assert main(["diff", base, worse, "--json", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "  NEW GROUP-PAGE-1 [normal] [page:MLA]" in printed
    assert main(["diff", base, worse, "--verbose"]) == 1
    assert "=== NEW GROUP-PAGE-1 [normal] [page:MLA]" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["kind"] == "diff" and data["exit_code"] == 1
    assert [f["signature"] for f in data["new"]] == ["page:MLA"]
    assert main(["diff", base, str(tmp_path / "missing.json")]) == 2
    assert main(["diff", base, write(tmp_path, "bad.json", {"kind": "check", "schema_version": "1"})]) == 2


def test_apply_baseline_takes_a_report_model(tmp_path: Path) -> None:
    from kvcontract.conformance.reports.check import Record, Report, summarize

    records = [Record(clause="MERGE-ANNOTATION-1", title="t", level="MUST", mode="normal", status="fail",
                      signature="dropped:MLAAttentionSpec:is_draft")]
    fresh = Report(kit_version="0", engine="vllm", engine_version="0.34.0", profile="quick", seed=0,
                   modes=["normal"], records=records, summary=summarize(records, 0.0))
    result = apply_baseline(fresh, write(tmp_path, "base.json", BASE))
    assert result.new == [] and result.exit_code == 0
    assert result.head["name"] == "this check"


def test_subject_groups_one_change_seen_under_several_clauses_modes_and_kinds() -> None:
    sigs = ["wrong-group-spec:MLAAttentionSpec:non_causal_multi_token_decode",
            "order-dependent:HiddenStateCacheSpec:non_causal_multi_token_decode",
            "optimized-only:MERGE-UNION-1:capability-not-unioned:MLAAttentionSpec:non_causal_multi_token_decode"]
    assert {subject(s) for s in sigs} == {"field non_causal_multi_token_decode"}
    assert subject("accepted:FullAttentionSpec>RSWASpec") == "kinds FullAttentionSpec>RSWASpec"
    assert subject("worker-timeout") == "worker-timeout"
    head = report(*BASE["records"], *(record("MERGE-UNION-1", "fail", s, mode=m) for s in sigs[:2]
                                      for m in ("normal", "optimized")))
    base = report(*BASE["records"], record("MERGE-UNION-1", "pass"), record("MERGE-UNION-1", "pass", mode="optimized"))
    result = compare(base, head)
    assert len(result.new) == 4 and list(result.new_by_subject()) == ["field non_causal_multi_token_decode"]
    assert "field non_causal_multi_token_decode: 4 record(s) — MERGE-UNION-1 on HiddenStateCacheSpec, " \
           "MLAAttentionSpec (normal, optimized)" in render(result)
