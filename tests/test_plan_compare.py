"""The whole-plan comparator (PLAN-MATCH-1's oracle) on hand-built plans: equal plans show no
difference, each class of difference is found and named, advisory fields are ignored, the
report is deterministic; and the clause's law and mutant."""

from __future__ import annotations

import dataclasses

import pytest

from kvcontract import reference
from kvcontract.conformance.contract.model import Example, Violation
from kvcontract.conformance.contract.plan_compare import (
    CLASSES,
    compare,
    count_by_class,
    expected_of,
)
from kvcontract.conformance.engines.mutants import load_mutant
from kvcontract.conformance.engines.protocol import EngineGroup, EnginePlan, EngineTensor
from kvcontract.conformance.engines.reference import ReferenceEngine, plan_of
from kvcontract.reference import FullAttentionSpec, GroupingError, KVDtype, SlidingWindowSpec

FULL = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.FLOAT32)
SWA = SlidingWindowSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.FLOAT32, sliding_window=128)
TABLE = {"full.0": FULL, "full.1": FULL, "swa.0": SWA, "swa.1": SWA, "swa.2": SWA, "swa.3": SWA}
MEMORY = FULL.page_size_bytes * 2 * 32 + 13


def _reference(table: dict = TABLE, hybrid: bool = True) -> reference.KVCachePlan:  # type: ignore[type-arg]
    return reference.plan(dict(table), MEMORY, hybrid=hybrid)


def _engine(**changes: object) -> EnginePlan:
    return dataclasses.replace(plan_of(_reference()), **changes)  # type: ignore[arg-type]


def _classes(answer: EnginePlan | BaseException, expected: object = None) -> list[str]:
    return [d.what for d in compare(expected if expected is not None else _reference(), answer, table=TABLE)]


def _regroup(groups: tuple[EngineGroup, ...]) -> EnginePlan:
    """The reference's plan with other groups (and tensors following them)."""
    planned = reference.sizing.size_plan([reference.planning.PlanGroup(
        g.layer_names, g.spec, tuple((n, g.spec or (g.member_specs or {})[n]) for n in g.layer_names)) for g in groups],
        MEMORY)
    return plan_of(planned)


def test_the_reference_plan_against_itself_has_no_difference() -> None:
    for hybrid in (True, False):
        for block_outermost in (False, True):
            planned = reference.plan(TABLE, MEMORY, hybrid=hybrid, block_outermost=block_outermost)
            assert compare(planned, plan_of(planned), ReferenceEngine(), table=TABLE) == []


def test_a_refusal_against_a_refusal_is_no_difference() -> None:
    assert compare(GroupingError("no"), ValueError("no either"), table=TABLE) == []


def test_refusals_against_plans_are_named() -> None:
    (refused,) = compare(GroupingError("cannot"), plan_of(_reference()), table=TABLE)
    assert refused.what == "refused" and refused.signature == \
        "plan-differs-refused:FullAttentionSpec+SlidingWindowSpec"
    (raised,) = compare(_reference(), ValueError("boom"), table=TABLE)
    assert raised.what == "raised" and "ValueError: boom" in raised.detail


def test_another_split_of_the_same_layers_is_a_group_split_difference() -> None:
    planned = plan_of(_reference())  # full | swa.0 swa.2 | swa.1 swa.3
    consecutive = (planned.groups[0], EngineGroup(("swa.0", "swa.1"), SWA), EngineGroup(("swa.2", "swa.3"), SWA))
    differences = compare(_reference(), _regroup(consecutive), table=TABLE)
    assert differences[0].what == "group-split"
    assert differences[0].signature == "plan-differs-group-split:SlidingWindowSpec"
    assert "reference 3 groups, engine 3" in differences[0].detail


def test_layers_of_other_kinds_together_is_a_groups_difference() -> None:
    mixed = (EngineGroup(("full.0", "swa.0"), None, {"full.0": FULL, "swa.0": SWA}),
             EngineGroup(("full.1", "swa.2"), None, {"full.1": FULL, "swa.2": SWA}),
             EngineGroup(("swa.1", "swa.3"), SWA))
    differences = compare(_reference(), _regroup(mixed), table=TABLE)
    assert differences[0].what == "groups"


def test_form_manager_block_size_page_and_spec_of_a_group() -> None:
    full_group = plan_of(_reference()).groups[0]
    rest = plan_of(_reference()).groups[1:]
    per_member = EngineGroup(full_group.layer_names, None, {n: FULL for n in full_group.layer_names})
    assert "group-form" in _classes(_engine(groups=(per_member, *rest)))
    other_kind = EngineGroup(full_group.layer_names, dataclasses.replace(SWA, sliding_window=4096))
    assert "manager" in _classes(_engine(groups=(other_kind, *rest)))
    bigger = EngineGroup(full_group.layer_names, dataclasses.replace(FULL, block_size=32))
    assert {"group-block-size", "group-page"} <= set(_classes(_engine(groups=(bigger, *rest))))
    padded = EngineGroup(full_group.layer_names, dataclasses.replace(FULL, page_size_padded=FULL.page_size_bytes * 2))
    assert "group-page" in _classes(_engine(groups=(padded, *rest)))
    windowed = EngineGroup(full_group.layer_names, dataclasses.replace(FULL, sliding_window=64))
    (spec,) = compare(_reference(), _engine(groups=(windowed, *rest)), table=TABLE)
    assert spec.what == "group-spec" and spec.fields == ("sliding_window",)
    assert spec.signature == "plan-differs-group-spec:FullAttentionSpec:sliding_window"
    assert "sliding_window reference None, engine 64" in spec.detail


def test_advisory_fields_are_never_compared() -> None:
    full_group, *rest = plan_of(_reference()).groups
    drafted = EngineGroup(full_group.layer_names, dataclasses.replace(FULL, is_draft=True, non_causal=True))
    assert compare(_reference(), _engine(groups=(drafted, *rest)), table=TABLE) == []


def test_a_members_spec_is_a_layer_spec_difference() -> None:
    table = {"a": FULL, "b": dataclasses.replace(FULL, head_size=128)}
    planned = reference.plan(table, MEMORY)
    (group,) = plan_of(planned).groups
    assert group.spec is None and group.member_specs is not None
    wrong = EngineGroup(group.layer_names, None, {**group.member_specs, "b": dataclasses.replace(FULL, head_size=96)})
    answer = dataclasses.replace(plan_of(planned), groups=(wrong,))
    differences = compare(planned, answer, table=table)
    assert [d.what for d in differences][:2] == ["group-page", "layer-spec"]
    assert differences[1].signature == "plan-differs-layer-spec:FullAttentionSpec:head_size"


def test_blocks_and_tensors() -> None:
    planned = plan_of(_reference())
    assert _classes(_engine(num_blocks=planned.num_blocks - 1)) == ["num-blocks"]
    first, *others = planned.tensors
    assert _classes(_engine(tensors=tuple(others))) == ["tensor-layers"]
    assert "tensor-size" in _classes(_engine(tensors=tuple(dataclasses.replace(t, size_bytes=t.size_bytes + 1)
                                                           for t in planned.tensors)))
    moved = dataclasses.replace(first, offset=(first.offset or 0) + 64)
    assert _classes(_engine(tensors=(moved, *others))) == ["tensor-offset"]
    strided = dataclasses.replace(first, block_stride=(first.block_stride or 0) * 2)
    assert _classes(_engine(tensors=(strided, *others))) == ["tensor-stride"]
    unstated = EngineTensor(first.layer_names, first.size_bytes)
    assert compare(_reference(), _engine(tensors=(unstated, *others)), table=TABLE) == []  # not stated: not judged


def test_a_page_the_engine_computes_otherwise_moves_the_bounds() -> None:
    class WidePages(ReferenceEngine):
        def page_size(self, obj: object) -> int:
            return int(super().page_size(obj)) + (8 if isinstance(obj, SlidingWindowSpec) else 0)

    differences = compare(_reference(), plan_of(_reference()), WidePages(), table=TABLE)
    assert {d.what for d in differences} == {"group-page", "tensor-bounds"}


def test_differences_come_in_class_order_folded_and_deterministically() -> None:
    planned = plan_of(_reference())
    broken = _engine(num_blocks=1, tensors=tuple(dataclasses.replace(t, offset=(t.offset or 0) + 1)
                                                for t in planned.tensors))
    once, again = compare(_reference(), broken, table=TABLE), compare(_reference(), broken, table=TABLE)
    assert once == again and [d.what for d in once] == sorted((d.what for d in once), key=CLASSES.index)
    assert sum(d.more for d in once) > 0 and count_by_class(once)["tensor-offset"] == len(TABLE)


def test_expected_of_reads_the_references_answer_for_the_difference() -> None:
    planned = _reference()
    (blocks,) = compare(planned, _engine(num_blocks=1), table=TABLE)
    assert expected_of(planned, blocks)[1] == planned.num_blocks
    groups = compare(planned, _regroup(plan_of(planned).groups[:1] + (EngineGroup(
        ("swa.0", "swa.1", "swa.2", "swa.3"), SWA),)), table=TABLE)[0]
    assert expected_of(planned, groups)[1] == sorted(sorted(g.layer_names) for g in planned.groups)
    assert groups.signature_in(False) == "plan-differs-group-split-hybrid-off:SlidingWindowSpec"


# -- the clause's law and its mutant ----------------------------------------------------------------


def _asked(table: dict) -> set[tuple[bool, bool]]:  # type: ignore[type-arg]
    from kvcontract.conformance.contract.laws import plan as plan_laws

    example = Example(table=tuple(table.items()))
    plan_laws.check_match(ReferenceEngine(), example)
    return {key[1:] for key, _ in plan_laws._PLANS._held.items() if key[0] == plan_laws.table_key(example.table)}


def test_the_law_judges_both_hybrid_modes_and_the_reference_passes() -> None:
    # one page size: the block-outermost layout packs nothing the layer-outermost one does not
    assert _asked(TABLE) == {(True, False), (False, False)}


def test_the_law_judges_both_layouts_where_pages_differ() -> None:
    wide = dataclasses.replace(FULL, head_size=128)
    table = {"full.0": wide, "full.1": wide, "swa.0": SWA, "swa.1": SWA}
    assert _asked(table) == {(True, False), (True, True), (False, False), (False, True)}


def test_the_contiguous_split_mutant_dies_by_plan_match_only() -> None:
    from kvcontract.conformance.contract.laws import plan as plan_laws

    mutant = load_mutant("contiguous-split")
    example = Example(table=tuple(TABLE.items()))
    for check in (plan_laws.check_type, plan_laws.check_hidden, plan_laws.check_hybrid, plan_laws.check_size,
                  plan_laws.check_used, plan_laws.check_tensors):
        check(mutant, example)
    with pytest.raises(Violation) as caught:
        plan_laws.check_match(mutant, example)
    assert caught.value.signature == "plan-differs-group-split:SlidingWindowSpec"
    assert "hybrid manager on, layer-outermost" in caught.value.message


def test_a_field_the_engine_lacks_is_not_judged() -> None:
    """An engine whose classes lack a field reads it back at the kit's default: that tells nothing
    of its plan (a fork of an older vLLM without dcp_sharded)."""
    planned = plan_of(_reference())
    full_group = planned.groups[0]
    assert full_group.spec is not None
    other = dataclasses.replace(full_group.spec, dcp_sharded=not full_group.spec.dcp_sharded)
    answer = _regroup((EngineGroup(full_group.layer_names, other), *planned.groups[1:]))

    class Lacking:
        def unsupported_fields(self, kind: type) -> frozenset[str]:
            return frozenset({"dcp_sharded"})

        def page_size(self, spec: object) -> int:
            return spec.page_size_bytes  # type: ignore[attr-defined]

        def to_engine(self, spec: object) -> object:
            return spec

    assert [d.what for d in compare(_reference(), answer, table=TABLE)] == ["group-spec"]
    assert compare(_reference(), answer, Lacking(), table=TABLE) == []


def test_empty_tensors_are_not_placed() -> None:
    """A budget that fits no block: both plans hold every layer in an empty tensor, whose first
    byte holds nothing; where it is said to start is no difference (aphrodite 0.24.1's and vLLM
    0.29-0.31's offsets for such tensors were reported as a wrong plan)."""
    empty = reference.plan(dict(TABLE), 1)
    planned = plan_of(empty)
    assert planned.num_blocks == 0
    first, *others = planned.tensors
    moved = dataclasses.replace(first, offset=(first.offset or 0) + 4096)
    assert compare(empty, dataclasses.replace(planned, tensors=(moved, *others)), table=TABLE) == []
    assert compare(_reference(), _engine(tensors=(dataclasses.replace(plan_of(_reference()).tensors[0],
                                                                      offset=4096),
                                                  *plan_of(_reference()).tensors[1:])), table=TABLE) != []
