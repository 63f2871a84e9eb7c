"""Chapter MERGE (spec/SPEC.md §4): the reference model's merge laws."""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import given
from hypothesis import strategies as st

from kvcontract.conformance.contract.strategies import compatible_specs, specs
from kvcontract.reference import (
    AnnotationRule,
    FullAttentionSpec,
    KVDtype,
    MLAAttentionSpec,
    Role,
    merge,
    role_of,
    rule_of,
)


def fields_of(spec):
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


@given(specs())
def test_merge_of_one_is_identity(spec):
    """MERGE-IDENTITY-1: every field, including those outside equality."""
    assert fields_of(merge([spec])) == fields_of(spec)
    assert type(merge([spec])) is type(spec)


@given(compatible_specs(min_size=2), st.randoms())
def test_merge_is_order_independent(members, rnd):
    """MERGE-ORDER-1."""
    shuffled = list(members)
    rnd.shuffle(shuffled)
    assert fields_of(merge(shuffled)) == fields_of(merge(members))


@given(compatible_specs(min_size=2, max_size=5), st.data())
def test_merge_in_steps_equals_merge_at_once(members, data):
    """MERGE-ASSOC-1."""
    cut = data.draw(st.integers(1, len(members) - 1))
    stepwise = merge([merge(members[:cut]), merge(members[cut:])])
    assert fields_of(stepwise) == fields_of(merge(members))


@given(compatible_specs())
def test_merged_kind_and_agreed_fields(members):
    """MERGE-KIND-1, MERGE-AGREE-1, MERGE-PAGE-1."""
    merged = merge(members)
    assert type(merged) is type(members[0])
    for f in dataclasses.fields(merged):
        if role_of(f) in (Role.LAYOUT, Role.ALLOCATION):
            assert all(getattr(merged, f.name) == getattr(m, f.name) for m in members), f.name
    assert all(merged.page_size_bytes == m.page_size_bytes for m in members)


@given(compatible_specs())
def test_capabilities_are_the_union(members):
    """MERGE-UNION-1."""
    merged = merge(members)
    for f in dataclasses.fields(merged):
        if role_of(f) is Role.CAPABILITY:
            assert getattr(merged, f.name) == any(getattr(m, f.name) for m in members)


@given(compatible_specs())
def test_annotations_follow_their_rule(members):
    """MERGE-ANNOTATION-1."""
    merged = merge(members)
    for f in dataclasses.fields(merged):
        if role_of(f) is not Role.ANNOTATION:
            continue
        values = [getattr(m, f.name) for m in members]
        if rule_of(f) is AnnotationRule.ANY:
            assert getattr(merged, f.name) == any(values)
        else:
            set_values = {v for v in values if v is not None}
            assert getattr(merged, f.name) == (set_values.pop() if set_values else None)


@given(compatible_specs())
def test_merge_does_not_change_inputs(members):
    """MERGE-PURE-1."""
    before = [fields_of(m) for m in members]
    as_list = list(members)
    merge(as_list)
    assert as_list == members
    assert [fields_of(m) for m in members] == before


def test_dspark_target_and_draft_merge_with_capability():
    """MERGE-UNION-1: the seed's case, target + draft MLA of one geometry."""
    target = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16)
    draft = dataclasses.replace(target, non_causal_multi_token_decode=True, is_draft=True)
    for order in itertools.permutations([target, target, draft]):
        merged = merge(list(order))
        assert merged.non_causal_multi_token_decode is True
        assert merged.is_draft is True
    assert merge([target, target]).non_causal_multi_token_decode is False


def test_common_annotation_ignores_unset_members():
    """MERGE-ANNOTATION-1: a full-attention group records its one window."""
    full = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.FLOAT16)
    windowed = dataclasses.replace(full, sliding_window=128)
    assert merge([full, windowed, full]).sliding_window == 128
    assert merge([full, full]).sliding_window is None
