"""Symbolic values that reach the engine (issue 26, item 2): the value groups keep a field's
values symbolic through the kit's constructors and the engine's operation, so the engine's own
branches on values are solved; an exhausted group is a bounded proof, a difference is judged
by the laws on a realized input."""

from __future__ import annotations

import dataclasses

import pytest

from kvcontract import reference
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.model import domain_of
from kvcontract.conformance.engines.mutants import KNOWN_SURVIVORS, load_mutant
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.power.symbolic import symbolic_operations
from kvcontract.conformance.run.symbolic.search import OPERATIONS, Search
from kvcontract.conformance.run.symbolic.values import (
    MIN_HIGH,
    VALUE_OPERATIONS,
    int_bounds,
    page_neutral,
    proof_line,
)
from kvcontract.reference import FullAttentionSpec, IncompatibleSpecs, MambaSpec, MLAAttentionSpec

pytest.importorskip("crosshair")


def _bounds(kind: type) -> dict[str, object]:
    domain = domain_of(ReferenceEngine())
    base = sysm.base_spec(kind, domain)
    return {b.field: b for b in int_bounds(kind, domain, base)}


def test_bounds_widen_the_engines_values_and_leave_literals_and_divisors_alone():
    full = _bounds(FullAttentionSpec)
    assert full["block_size"].lo == 1 and full["block_size"].hi >= max(MIN_HIGH, 128)  # type: ignore[attr-defined]
    assert 48 <= full["block_size"].hi  # type: ignore[attr-defined]  # the hybrid block size is inside
    assert full["sliding_window"].optional  # type: ignore[attr-defined]
    assert len(full["dtype"].choices) > 2  # type: ignore[attr-defined]  # every dtype the engine has
    mla = _bounds(MLAAttentionSpec)
    assert "num_kv_heads" not in mla  # the kind fixes it to one latent head
    assert "alignment" not in mla  # rounding up to a symbolic divisor: left to the structural groups


def test_the_reference_is_proved_within_bounds_for_one_kind():
    search = Search(ReferenceEngine(), operations=["value-merge"], kinds=["FullAttentionSpec"])
    assert search.run(None, 5000) == "exhausted"
    (group,) = search.groups
    stats = group.stats
    assert stats.exhausted and not search.records and not search.errors
    assert stats.reached_engine > 100 and stats.unconfirmed == 0
    line = proof_line(stats.name, stats.bounds, stats.exhausted, stats.paths, stats.findings, stats.unconfirmed)
    assert "explored exhaustively" in line and "block_size∈[1," in line


@pytest.mark.parametrize("mutant", ["block-size-48", "fp8-family-pair"])
def test_value_branch_mutants_survive_the_property_suite_and_the_value_groups_find_them(mutant: str):
    assert mutant in KNOWN_SURVIVORS
    assert "value-merge" in symbolic_operations(KNOWN_SURVIVORS[mutant])
    search = Search(load_mutant(mutant), operations=["value-merge"], kinds=["FullAttentionSpec"])
    search.run(None, 3000, stop_on_finding=True)
    found = {clause for clause, _ in search.records}
    assert found & {"ERROR-DETECT-1", "ERROR-TYPE-1", "UNIFORM-MERGE-1"}, sorted(search.records)
    record = next(iter(search.records.values()))
    assert record.witness and record.snippet  # realized values: a concrete, runnable repro
    if mutant == "block-size-48":
        assert "48" in record.snippet


def test_the_value_route_group_finds_the_long_block_the_structural_route_group_cannot():
    engine = load_mutant("dispatch-long-block")
    structural = Search(engine, operations=["route"])
    structural.run(None, 600)
    assert not structural.records  # its lengths stop at 16 rows
    values = Search(engine, operations=["value-route"])
    values.run(None, 4000, stop_on_finding=True)
    assert {clause for clause, _ in values.records} == {"DISPATCH-BLOCK-1"}


def test_a_difference_no_law_confirms_is_counted_not_reported(monkeypatch: pytest.MonkeyPatch):
    """The oracle is a filter: only a law's violation on the realized input is a finding."""
    from kvcontract.conformance.run.symbolic import values

    monkeypatch.setattr(values, "merge_difference", lambda engine, specs: "made up")
    search = Search(ReferenceEngine(), operations=["value-merge"], kinds=["FullAttentionSpec"])
    search.run(None, 40)
    (group,) = search.groups
    assert not search.records and group.stats.unconfirmed > 0


def test_value_operations_are_selectable_and_judged_by_their_base_operations_clauses():
    assert set(VALUE_OPERATIONS) <= set(OPERATIONS)
    search = Search(ReferenceEngine(), operations=["value-merge"], kinds=["FullAttentionSpec"],
                    clauses=["MERGE-AGREE-1"])
    assert search.searched == {"MERGE-AGREE-1"}


def test_a_refusal_formats_its_values_only_when_read():
    """A symbolic value formatted in a message is made concrete: the reference's refusals and
    constructor checks build their messages when read (and copy, as CrossHair's realization does)."""
    import copy
    import pickle

    a = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64, dtype=reference.KVDtype.BFLOAT16)
    b = dataclasses.replace(a, block_size=32)
    with pytest.raises(IncompatibleSpecs) as info:
        reference.merge([a, b])
    exc = info.value
    assert "block_size" in str(exc) and "16 vs 32" in str(exc)
    for again in (copy.deepcopy(exc), pickle.loads(pickle.dumps(exc))):
        assert str(again) == str(exc) and again.fields == ("block_size",)
    with pytest.raises(reference.InvalidSpec, match="page_size_padded 1 is smaller"):
        dataclasses.replace(a, page_size_padded=1)


def test_the_kits_own_failure_on_a_value_path_is_an_error_record_and_the_search_goes_on(
        monkeypatch: pytest.MonkeyPatch):
    from kvcontract.conformance.run.symbolic import values

    def broken(engine: object, specs: object) -> str:
        raise RuntimeError("the oracle broke")

    monkeypatch.setattr(values, "merge_difference", broken)
    search = Search(ReferenceEngine(), operations=["value-merge"], kinds=["FullAttentionSpec"])
    search.run(None, 30)
    (group,) = search.groups
    assert group.stats.paths >= 30 and group.stats.kit_errors > 0 and not search.records
    (key,) = search.errors
    assert "RuntimeError" in key and search.errors[key].status == "error"


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_value_groups_reach_its_merge_and_router_with_symbolic_values():
    """vLLM's merge branches on the symbolic values (three kinds' trees exhaust: bounded proofs
    of no difference); its router takes tensors, so the adapter realizes the lengths there
    (kvcontract.conformance.engines.native) and the kit never mistakes a torch TypeError on a
    symbolic integer for a difference."""
    from kvcontract.conformance.engines.protocol import EngineUnavailable, load_engine

    try:
        engine = load_engine("vllm")
    except EngineUnavailable as exc:
        pytest.skip(f"vLLM is not installed here ({exc}); scripts/setup.sh installs it")
    search = Search(engine, operations=["value-merge", "value-route"],
                    kinds=["MambaSpec", "HiSparseHotSpec", "HiSparseResidentSpec"])
    search.run(25.0, None)
    stats = {g.stats.name: g.stats for g in search.groups}
    for kind in ("MambaSpec", "HiSparseHotSpec", "HiSparseResidentSpec"):
        assert stats[f"value-merge:{kind}"].exhausted and not stats[f"value-merge:{kind}"].findings, kind
    route = stats["value-route"]
    assert route.reached_engine > 50 and route.unconfirmed == 0 and not search.errors


def test_value_paths_record_their_realized_inputs_for_a_coverage_replay_only_when_asked():
    from kvcontract.conformance.contract.laws import law

    plain = Search(ReferenceEngine(), operations=["value-merge"], kinds=["FullAttentionSpec"])
    assert plain.value_inputs is None
    search = Search(ReferenceEngine(), operations=["value-merge", "value-route"], kinds=["FullAttentionSpec"],
                    record_value_inputs=True)
    search.run(None, 400)
    assert search.value_inputs
    kinds = {type(ex).__name__ for ex, _ in search.value_inputs}
    assert kinds == {"Example", "DispatchExample"}
    for ex, clauses in search.value_inputs[:40]:
        for clause in clauses:
            law(clause).check(ReferenceEngine(), ex)  # plain values: the reference passes


@pytest.mark.parametrize("mutant, clause", [("uniform-by-kind", "UNIFORM-MERGE-1"),
                                            ("uniform-raises", "UNIFORM-NORAISE-1")])
def test_value_merge_paths_ask_is_uniform_of_the_same_specs(mutant: str, clause: str):
    search = Search(load_mutant(mutant), operations=["value-merge"], kinds=["FullAttentionSpec"])
    search.run(None, 200, stop_on_finding=True)
    assert {c for c, _ in search.records} == {clause}, sorted(search.records)
    assert "value-merge" in symbolic_operations(type(load_mutant(mutant)))


def test_string_fields_are_symbolic_strings_equal_to_the_engines_values_or_free():
    mamba = _bounds(MambaSpec)["mamba_cache_mode"]
    assert mamba.text and mamba.free and set(mamba.choices) >= {"align", "all"}  # type: ignore[attr-defined]
    assert "mamba_cache_mode∈str{" in mamba.describe() and "|str[len<=" in mamba.describe()  # type: ignore[attr-defined]
    mla = _bounds(MLAAttentionSpec)
    assert mla["cache_dtype_str"].optional and mla["model_version"].text  # type: ignore[attr-defined]


def test_symbolic_strings_are_never_the_value_lists_objects_so_an_identity_compare_is_found():
    # the structural groups pass the very string objects of the value lists, so ``is`` holds
    # there; a symbolic string equal to 'all' is another object, as a value read from a config
    search = Search(load_mutant("identity-compare"), operations=["value-merge"], kinds=["MambaSpec"])
    search.run(None, 3000, stop_on_finding=True)
    record = next(iter(search.records.values()))
    assert record.clause.startswith("MERGE-") and "mamba_cache_mode" in record.message
    control = Search(ReferenceEngine(), operations=["value-merge"], kinds=["MambaSpec"])
    assert control.run(None, 5000) == "exhausted" and not control.records and not control.errors


def test_value_group_varies_only_fields_that_leave_the_page_alone():
    domain = domain_of(ReferenceEngine())
    base = sysm.base_spec(FullAttentionSpec, domain)
    fields = {b.field for b in page_neutral(base, int_bounds(FullAttentionSpec, domain, base))}
    assert {"sliding_window", "attention_chunk_size"} <= fields
    assert not fields & {"block_size", "head_size", "num_kv_heads", "dtype", "block_stride_alignment"}


def test_the_value_group_finds_a_layer_put_in_two_groups_and_proves_the_reference():
    # windows w1 != w2 and a layer with none: the third layer merges with both groups
    search = Search(load_mutant("bucket-without-break"), operations=["value-group"], kinds=["FullAttentionSpec"])
    search.run(None, 2000, stop_on_finding=True)
    assert ("GROUP-PARTITION-1", "not-a-partition:FullAttentionSpec") in search.records
    control = Search(ReferenceEngine(), operations=["value-group"])
    assert control.run(None, 20000) == "exhausted"
    assert not control.records and not control.errors
    assert {g.stats.name for g in control.groups} >= {"value-group:FullAttentionSpec", "value-group:MambaSpec"}
    assert all(g.stats.exhausted and g.stats.unconfirmed == 0 for g in control.groups)
