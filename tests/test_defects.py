"""Defects, not signatures: a finding traced to the engine line that causes it
(kvcontract.conformance.run.locate), findings grouped into defects
(kvcontract.conformance.reports.defects), and the console's defects table."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.reports.check import Record, Report, Summary
from kvcontract.conformance.reports.defects import build_defects
from kvcontract.conformance.reports.gate import (
    Gate,
    needing_attention,
    render_console,
    write_repros,
)
from kvcontract.conformance.run.locate import engine_roots, locate, locate_items

HERE = Path(__file__).name
FULL = {"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": "bfloat16"}


def _line_of(function: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


class AssertingEngine(ReferenceEngine):
    """Checks agreement with a bare assert, as vLLM's merges do: gone under python -O."""

    name = "asserting"

    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        for o in objs[1:]:
            assert o.block_size == objs[0].block_size, "block sizes differ"  # the defect under test
        return reference.merge([dataclasses.replace(o, block_size=objs[0].block_size) for o in objs])


class RaisingEngine(ReferenceEngine):
    """Rejects disagreement with the wrong exception type."""

    name = "raising"

    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        if any(o != objs[0] for o in objs):
            raise ValueError("members differ")
        return reference.merge(objs)


class DroppingEngine(ReferenceEngine):
    """Returns the first member: a capability another member needs is lost."""

    name = "dropping"

    def merge(self, objs: Sequence[Any]) -> Any:
        return list(objs)[0]


def _item(clause: str, mode: str, signature: str, witness: dict[str, Any]) -> dict[str, Any]:
    return {"clause": clause, "mode": mode, "signature": signature, "witness": witness}


def test_an_optimized_only_finding_is_traced_to_the_assert_that_fires_without_O() -> None:
    engine = AssertingEngine()
    witness = {"specs": [FULL, {**FULL, "block_size": 32}], "field": "block_size"}
    where = locate(engine, engine_roots(engine), _item(
        "ERROR-DETECT-1", "optimized", "accepted:FullAttentionSpec:block_size", witness))
    assert where["outcome"] == "assert-only"
    assert where["location"].endswith(f"{HERE}:{_line_of(AssertingEngine.merge, 'assert o.block_size')}")
    assert where["function"] == "AssertingEngine.merge"
    assert where["statement"].startswith("assert o.block_size")


def test_an_engine_exception_is_traced_to_its_innermost_engine_frame() -> None:
    engine = RaisingEngine()
    witness = {"specs": [FULL, {**FULL, "block_size": 32}], "field": "block_size"}
    [where] = locate_items(engine, [_item("ERROR-TYPE-1", "normal", "raised-ValueError:FullAttentionSpec:block_size",
                                          witness)])
    assert where["outcome"] == "raises-ValueError"
    assert where["location"].endswith(f"{HERE}:{_line_of(RaisingEngine.merge, 'raise ValueError')}")


def test_a_wrong_answer_is_traced_to_the_function_that_decided_it() -> None:
    engine = DroppingEngine()
    spec = {**FULL, "kind": "MLAAttentionSpec", "num_kv_heads": 1, "head_size": 576}
    witness = {"specs": [spec, {**spec, "non_causal": True}]}
    [where] = locate_items(engine, [_item("MERGE-UNION-1", "normal", "capability-not-unioned:MLAAttentionSpec:"
                                          "non_causal", witness)])
    assert where["outcome"] == "capability-not-unioned"
    assert where["function"] == "DroppingEngine.merge"
    assert where["location"].endswith(f"{HERE}:{_line_of(DroppingEngine.merge, 'def merge')}")


def test_an_unreadable_witness_gives_no_location_and_does_not_stop_the_rest() -> None:
    engine = RaisingEngine()
    bad = _item("ERROR-TYPE-1", "normal", "raised-ValueError:X", {"specs": [{"kind": "NoSuchSpec"}]})
    good = _item("ERROR-TYPE-1", "normal", "raised-ValueError:FullAttentionSpec:block_size",
                 {"specs": [FULL, {**FULL, "block_size": 32}], "field": "block_size"})
    first, second = locate_items(engine, [bad, good])
    assert first["location"] == "" and "NoSuchSpec" in first["how"]
    assert second["outcome"] == "raises-ValueError" and second["location"]


def _record(clause: str, mode: str, signature: str, *, status: str = "xfail", level: str = "MUST",
            models: Sequence[str] = ()) -> Record:
    return Record(clause=clause, title=clause, level=level, mode=mode, status=status,  # type: ignore[arg-type]
                  signature=signature, witness={"specs": [FULL]}, snippet=f"# repro of {clause} {signature}\n",
                  models=list(models))


def _where(function: str, line: int, outcome: str) -> dict[str, Any]:
    return {"function": function, "location": f"engine/spec.py:{line}", "outcome": outcome, "how": "", "statement": ""}


def test_findings_of_one_function_and_outcome_class_are_one_defect_reachable_when_a_model_shows_one() -> None:
    records = [
        _record("ERROR-DETECT-1", "optimized", "accepted:FullAttentionSpec:block_size"),
        _record("GROUP-PARTITION-1", "optimized", "invalid-result:FullAttentionSpec:sliding_window",
                models=["deepseek-v4"]),
        _record("ERROR-DETECT-1", "normal", "accepted:MLAAttentionSpec:alignment"),
        _record("UNIFORM-MERGE-1", "normal", "uniform-true:MLAAttentionSpec:alignment", status="fail"),
        _record("ERROR-MESSAGE-1", "normal", "message-omits:FullAttentionSpec:block_size", level="SHOULD"),
        _record("MERGE-IDENTITY-1", "normal", "", status="pass"),
    ]
    locations = {0: _where("Full.merge", 718, "assert-only"), 1: _where("Full.merge", 722, "assert-only"),
                 2: _where("MLA.merge", 762, "accepted"), 3: _where("MLA.merge", 762, "uniform-true"),
                 4: _where("Base.merge", 299, "message-omits"), 5: _where("X.merge", 1, "wrong-value")}
    defects = build_defects(records, locations, tables=["deepseek-v4", "llama"])
    by_id = {d.id: d for d in defects}
    assert list(by_id) == ["Full.merge:assert-only", "MLA.merge:accepts-disagreement", "Base.merge:message-omits"]
    asserts = by_id["Full.merge:assert-only"]
    assert (asserts.tier, asserts.models, asserts.lines, asserts.level) == ("reachable", ["deepseek-v4"], [718, 722],
                                                                             "MUST")
    assert asserts.representative.startswith("GROUP-PARTITION-1/optimized")  # the model's witness first
    accepts = by_id["MLA.merge:accepts-disagreement"]
    assert (accepts.tier, accepts.status, accepts.findings) == ("latent", "fail", 2)
    assert "2 real model tables" in accepts.latent_reason
    assert by_id["Base.merge:message-omits"].level == "SHOULD"
    assert [r.defect for r in records] == ["Full.merge:assert-only"] * 2 + ["MLA.merge:accepts-disagreement"] * 2 + \
        ["Base.merge:message-omits", ""]


def test_the_console_lists_defects_reachable_first_with_one_repro_file_each(tmp_path: Path) -> None:
    records = [_record("ERROR-DETECT-1", "normal", "accepted:MLAAttentionSpec:alignment", status="fail"),
               _record("GROUP-PAGE-1", "optimized", "unequal-pages:SinkFullAttentionSpec", models=["gpt-oss"])]
    defects = build_defects(records, {0: _where("MLA.merge", 762, "accepted"),
                                      1: _where("Sink.merge", 1312, "assert-only")}, tables=["gpt-oss"])
    report = Report(kit_version="0", engine="toy", engine_version="1", profile="quick", seed=0, modes=["normal"],
                    records=records, defects=defects, tables=["gpt-oss"],
                    summary=Summary(counts={"fail": 1, "xfail": 1}, failed=["x"], seconds=1.0))
    gate = Gate(report=report, attention=needing_attention(report))
    write_repros(gate, tmp_path)
    text = render_console(gate)
    rows = [line for line in text.splitlines() if line.startswith("  D0")]
    assert rows[0].startswith("  D01 xfail MUST   reachable: gpt-oss Sink.merge (spec.py:1312): asserts gone under -O")
    assert rows[1].startswith("  D02 fail  MUST   latent") and "accepts disagreeing members [alignment]" in rows[1]
    assert "defects: 2 (1 reachable by a real model table, 1 latent; 2 MUST, 0 SHOULD; 1 with new findings)" in text
    files = sorted(p.name for p in tmp_path.glob("defect-*.py"))
    assert files == ["defect-D01-Sink.merge-assert-only.py", "defect-D02-MLA.merge-accepts-disagreement.py"]
    assert (tmp_path / files[1]).read_text() == "# repro of ERROR-DETECT-1 accepted:MLAAttentionSpec:alignment\n"
    assert max(len(line) for line in rows) <= 140
