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
            models: Sequence[str] = (), input: str = "synthetic") -> Record:
    return Record(clause=clause, title=clause, level=level, mode=mode, status=status,  # type: ignore[arg-type]
                  signature=signature, witness={"specs": [FULL]}, snippet=f"# repro of {clause} {signature}\n",
                  models=list(models), input="corpus" if models else input)


def _where(function: str, line: int, outcome: str, statement: str = "") -> dict[str, Any]:
    return {"function": function, "location": f"engine/spec.py:{line}", "outcome": outcome, "how": "",
            "statement": statement}


def test_an_assert_seen_in_both_modes_is_one_defect_and_reachable_only_where_a_corpus_plan_shows_harm() -> None:
    records = [
        _record("ERROR-DETECT-1", "optimized", "accepted:FullAttentionSpec:block_size", input="variation"),
        _record("PLAN-SIZE-1", "optimized", "plan-raised-AttributeError:MambaSpec:sliding_window",
                models=["FalconH1ForCausalLM"]),
        _record("PLAN-SIZE-1", "normal", "plan-raised-AssertionError"),
        _record("ERROR-MESSAGE-1", "normal", "message-omits:FullAttentionSpec:block_size", level="SHOULD"),
        _record("MERGE-IDENTITY-1", "normal", "", status="pass"),
    ]
    locations = {0: _where("Full.merge", 718, "assert-only"), 1: _where("Full.merge", 722, "assert-only"),
                 2: _where("Full.merge", 722, "raises-AssertionError", "assert isinstance(spec, Full)"),
                 3: _where("Base.merge", 299, "message-omits"), 4: _where("X.merge", 1, "wrong-value")}
    defects = build_defects(records, locations, tables=["FalconH1ForCausalLM", "llama"],
                            settings={"FalconH1ForCausalLM": {"hybrid": True}},
                            equivalents={"FalconH1ForCausalLM": ["FalconH1ForCausalLM", "FalconH1+kv-fp8"]})
    by_id = {d.id: d for d in defects}
    assert list(by_id) == ["Full.merge:assert", "Base.merge:message-omits"]
    asserts = by_id["Full.merge:assert"]
    assert (asserts.category, asserts.tier, asserts.option) == ("must", "reachable", "python -O")
    assert asserts.modes == ["normal", "optimized"] and asserts.lines == [718, 722]
    assert asserts.harm_models == ["FalconH1ForCausalLM", "FalconH1+kv-fp8"]  # the tables it stands for too
    assert asserts.representative.startswith("PLAN-SIZE-1/optimized")  # the harm's witness is the repro
    assert by_id["Base.merge:message-omits"].category == "advice"
    assert [r.defect for r in records] == ["Full.merge:assert"] * 3 + ["Base.merge:message-omits", ""]


def test_a_wrong_answer_is_split_by_the_kind_pair_and_a_missing_comparison_is_one_root() -> None:
    records = [
        _record("ERROR-KIND-1", "normal", "accepted:FullAttentionSpec>RSWASpec"),
        _record("GROUP-MERGED-1", "normal", "incompatible-group:FullAttentionSpec+SinkFullAttentionSpec:kind"),
        _record("ERROR-DETECT-1", "normal", "accepted:MLAAttentionSpec:alignment", input="variation", status="fail"),
        _record("MERGE-IDENTITY-1", "normal", "changed:MLAAttentionSpec:alignment",
                models=["DeepseekV4ForCausalLM"]),
    ]
    locations = {0: _where("Full.merge", 674, "accepted"), 1: _where("Full.merge", 674, "incompatible-group"),
                 2: _where("MLA.merge", 762, "accepted"), 3: _where("MLA.merge", 762, "changed")}
    defects = build_defects(records, locations, tables=["DeepseekV4ForCausalLM", "LlamaForCausalLM"],
                            table_kinds={"DeepseekV4ForCausalLM": ["MLAAttentionSpec"],
                                         "LlamaForCausalLM": ["FullAttentionSpec"]})
    by_id = {d.id: d for d in defects}
    assert set(by_id) == {"Full.merge:mishandles:FullAttentionSpec+RSWASpec",
                          "Full.merge:mishandles:FullAttentionSpec+SinkFullAttentionSpec", "MLA.merge:mishandles"}
    mla = by_id["MLA.merge:mishandles"]  # accepting alignment and dropping it: one root
    assert (mla.category, mla.tier, mla.findings, mla.status) == ("must", "reached", 2, "fail")
    assert mla.models == ["DeepseekV4ForCausalLM"] and "no harm" in mla.latent_reason
    pair = by_id["Full.merge:mishandles:FullAttentionSpec+RSWASpec"]
    assert (pair.category, pair.tier) == ("synthetic", "latent")
    assert pair.latent_reason == "no corpus table holds such an input: none of the 2 tables has RSWASpec layers"


def test_latent_reasons_say_where_the_corpus_planning_path_stops() -> None:
    records = [_record("ERROR-DETECT-1", "optimized", "accepted:SlidingWindowMLASpec:block_size", input="variation")]
    reach = {"SWMLA.merge:assert": {"reached": [], "held_by": ["DeepseekV4ForCausalLM"],
                                    "function": "SWMLA.merge", "stops": "it calls MLA.merge instead"}}
    [d] = build_defects(records, {0: _where("SWMLA.merge", 1068, "assert-only")}, tables=["DeepseekV4ForCausalLM"],
                        table_kinds={"DeepseekV4ForCausalLM": ["SlidingWindowMLASpec"]}, reach=reach)
    assert (d.category, d.tier) == ("must", "latent")
    assert d.latent_reason == ("DeepseekV4ForCausalLM hold such layers, but planning them never calls SWMLA.merge "
                               "(it calls MLA.merge instead)")
    reach["SWMLA.merge:assert"]["reached"] = ["DeepseekV4ForCausalLM"]
    [d] = build_defects(records, {0: _where("SWMLA.merge", 1068, "assert-only")}, tables=["DeepseekV4ForCausalLM"],
                        table_kinds={"DeepseekV4ForCausalLM": ["SlidingWindowMLASpec"]}, reach=reach)
    assert d.tier == "reached" and "reached, no harm: DeepseekV4ForCausalLM" in d.latent_reason


def test_the_console_lists_must_defects_reachable_first_with_one_repro_file_each(tmp_path: Path) -> None:
    records = [_record("ERROR-DETECT-1", "normal", "accepted:MLAAttentionSpec:alignment", status="fail",
                       input="variation"),
               _record("PLAN-SIZE-1", "optimized", "plan-raised-AttributeError:SinkFullAttentionSpec", models=["gpt-oss"]),
               _record("ERROR-KIND-1", "normal", "accepted:FullAttentionSpec>RSWASpec")]
    defects = build_defects(records, {0: _where("MLA.merge", 762, "accepted"),
                                      1: _where("Sink.merge", 1312, "assert-only"),
                                      2: _where("Full.merge", 674, "accepted")}, tables=["gpt-oss"])
    report = Report(kit_version="0", engine="toy", engine_version="1", profile="quick", seed=0, modes=["normal"],
                    records=records, defects=defects, tables=["gpt-oss"],
                    summary=Summary(counts={"fail": 1, "xfail": 2}, failed=["x"], seconds=1.0))
    gate = Gate(report=report, attention=needing_attention(report))
    write_repros(gate, tmp_path)
    text = render_console(gate)
    rows = [line for line in text.splitlines() if line.startswith("  D0")]
    assert rows[0].startswith("  D01 xfail MUST   reachable (python -O): gpt-oss | Sink.merge (spec.py:1312): "
                              "asserts gone under -O")
    assert rows[1].startswith("  D02 fail  MUST   latent | MLA.merge") and "[alignment]" in rows[1]
    assert "defects: 2 MUST (1 reachable, 0 reached with no harm, 1 latent); 1 on synthetic input only; 0 advice" in text
    assert "+ 1 known defects on synthetic inputs only: 1 lets disagreement through" in text
    files = sorted(p.name for p in tmp_path.glob("defect-*.py"))
    assert files[:2] == ["defect-D01-Sink.merge-assert.py", "defect-D02-MLA.merge-mishandles.py"]
    assert (tmp_path / files[1]).read_text() == "# repro of ERROR-DETECT-1 accepted:MLAAttentionSpec:alignment\n"
    assert max(len(line) for line in rows) <= 140


def test_a_field_without_a_role_and_a_wrong_dispatch_are_their_own_classes() -> None:
    """The drift guard's finding is not a wrong plan, and a dispatch split is not a merge that lets
    disagreement through: each root class says what the engine does wrong."""
    from kvcontract.conformance.reports.defects import outcome_class

    assert outcome_class({"outcome": "unclassified"}) == "unclassified"
    assert outcome_class({"outcome": "split-differs", "function": "MLACommonMetadataBuilder.build"}) == \
        "wrong-dispatch"
    assert outcome_class({"outcome": "plan-differs-groups", "function": "get_kv_cache_groups"}) == "wrong-plan"
