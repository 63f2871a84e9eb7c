"""Issue 24, item 6: a new finding's witness avoids the known findings where it can.

A new finding whose witness also shows a known (xfailed, or baseline) finding of the same
clause has a repro that fails on the unchanged engine too: the developer who fixes the
regression still sees it fail. ``run_law`` keeps, per new signature, the witness with the
fewest known findings beside it; ``check --baseline`` hands the baseline's findings in.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kvcontract import reference
from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.model import Example
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.reports.diff import known_signatures
from kvcontract.conformance.run import execution
from kvcontract.conformance.run.execution import replay
from kvcontract.reference import FullAttentionSpec, KVDtype

LAW = law("MERGE-ANNOTATION-2")
KNOWN = "wrong-value:FullAttentionSpec:is_draft"
NEW = "wrong-value:FullAttentionSpec:attention_chunk_size"


def _known_defect(merged: Any) -> Any:
    """The old engine's defect: with a chunk size on a 16-token block, is_draft flips."""
    if getattr(merged, "attention_chunk_size", None) is not None and merged.block_size == 16:
        return dataclasses.replace(merged, is_draft=not merged.is_draft)
    return merged


class Base(ReferenceEngine):
    name = "known-only"

    def merge(self, objs: Any) -> Any:
        return _known_defect(reference.merge(list(objs)))


class Head(Base):
    """The regression: the chunk size is dropped as well."""

    name = "known-and-new"

    def merge(self, objs: Any) -> Any:
        return dataclasses.replace(super().merge(objs), attention_chunk_size=None)


def _example(block_size: int) -> Example:
    return Example(specs=[FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=64,
                                            dtype=KVDtype.BFLOAT16, attention_chunk_size=8192)])


def _witnesses(known: frozenset[str]) -> dict[str, dict[str, Any]]:
    findings = execution._Findings(known)
    for block_size in (16, 32):  # the first example shows both findings, the second only the new one
        findings.judge(Head(), LAW, _example(block_size), "systematic", None)
    return {sig: ex.to_json() for sig, (ex, _v, _p) in findings.found.items()}


def test_the_examples_show_what_the_test_needs():
    first = replay(Head(), LAW, _example(16).to_json())
    second = replay(Head(), LAW, _example(32).to_json())
    assert first is not None and set(first.signatures) == {KNOWN, NEW}
    assert second is not None and second.signatures == [NEW]


def test_without_known_findings_the_first_witness_stands():
    witnesses = _witnesses(frozenset())
    assert witnesses[NEW]["specs"][0]["block_size"] == 16
    assert replay(Base(), LAW, witnesses[NEW]) is not None  # its repro fails on the old engine too


def test_a_new_findings_witness_avoids_a_known_one():
    witnesses = _witnesses(frozenset({KNOWN}))
    assert witnesses[NEW]["specs"][0]["block_size"] == 32
    assert witnesses[KNOWN]["specs"][0]["block_size"] == 16  # the known one keeps its first witness
    assert replay(Base(), LAW, witnesses[NEW]) is None  # passes on the old engine ...
    head = replay(Head(), LAW, witnesses[NEW])
    assert head is not None and head.signatures == [NEW]  # ... and fails on the new one


def test_run_law_takes_the_known_signatures_and_keeps_a_clean_witness_where_one_exists(monkeypatch):
    def examples(engine: Any, law_: Any) -> list[tuple[str, Example]]:
        return [("m", _example(16)), ("m", _example(32))]

    monkeypatch.setattr(execution, "model_examples", examples)
    records, _ = execution.run_law(Head(), LAW, "quick", 0, None, known=[KNOWN])
    (new,) = [r for r in records if r.signature == NEW]
    assert replay(Base(), LAW, new.witness) is None


def test_a_baseline_reports_findings_are_its_known_signatures():
    base = {"records": [
        {"clause": "MERGE-ANNOTATION-2", "mode": "normal", "status": "fail", "signature": KNOWN},
        {"clause": "MERGE-ANNOTATION-2", "mode": "normal", "status": "xfail", "signature": "s2"},
        {"clause": "MERGE-ANNOTATION-2", "mode": "optimized", "status": "pass"},
        {"clause": "MERGE-PAGE-1", "mode": "optimized", "status": "fail", "signature": "s3"}]}
    assert known_signatures(base) == {("MERGE-ANNOTATION-2", "normal"): [KNOWN, "s2"],
                                      ("MERGE-PAGE-1", "optimized"): ["s3"]}
