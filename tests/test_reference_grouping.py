"""Chapters UNIFORM and GROUP (spec/SPEC.md §6-7): uniformity and grouping."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given

from kvcontract.conformance.contract.strategies import compatible_specs, layer_tables, near_misses
from kvcontract.reference import (
    FullAttentionSpec,
    GroupingError,
    IncompatibleSpecs,
    KVDtype,
    MambaSpec,
    MLAAttentionSpec,
    Role,
    group_layers,
    is_uniform,
    merge,
    role_of,
    unify_page_sizes,
)
from kvcontract.reference.schema import example_tables, load_layer_table


@given(compatible_specs())
def test_compatible_is_uniform(members):
    """UNIFORM-MERGE-1."""
    assert is_uniform({f"l{i}": s for i, s in enumerate(members)})


@given(near_misses())
def test_near_miss_is_not_uniform(case):
    """UNIFORM-MERGE-1, UNIFORM-NORAISE-1."""
    members, _ = case
    assert is_uniform({f"l{i}": s for i, s in enumerate(members)}) is False


def test_empty_is_uniform_and_has_no_groups():
    """UNIFORM-EMPTY-1."""
    assert is_uniform({}) is True
    assert group_layers({}) == []


def _try_group(table):
    try:
        return group_layers(table)
    except GroupingError:
        return None


@given(layer_tables())
def test_grouping_laws(table):
    """GROUP-PARTITION-1, GROUP-COMPAT-1, GROUP-MERGED-1, GROUP-UNION-1, GROUP-PAGE-1,
    GROUP-SHARE-1 on generated hybrid tables."""
    groups = _try_group(table)
    if groups is None:
        return
    names = [n for g in groups for n in g.layer_names]
    assert sorted(names) == sorted(table)
    unified = unify_page_sizes(table) if len(groups) > 1 else dict(table)
    assert len({g.spec.page_size_bytes for g in groups}) == 1
    for group in groups:
        members = [unified[n] for n in group.layer_names]
        merged = merge(members)
        assert merged == group.spec
        for f in dataclasses.fields(group.spec):
            if role_of(f) is Role.CAPABILITY:
                assert getattr(group.spec, f.name) == any(getattr(m, f.name) for m in members)
            if role_of(f) is Role.ALLOCATION or f.name == "block_size":
                assert {getattr(m, f.name) for m in members} == {getattr(group.spec, f.name)}
    # GROUP-SHARE-1: no two groups could have been one.
    for i, a in enumerate(groups):
        for b in groups[i + 1 :]:
            with pytest.raises(IncompatibleSpecs):
                merge([a.spec, b.spec])


def test_dspark_example_is_one_group_with_the_capability():
    """GROUP-UNION-1: the DeepSeek + DSpark table from reference/examples."""
    table = load_layer_table(example_tables()["deepseek-v3-dspark"])
    groups = group_layers(table.specs_by_layer)
    assert len(groups) == 1
    assert len(groups[0].layer_names) == 63
    assert groups[0].spec.non_causal_multi_token_decode is True
    assert groups[0].spec.is_draft is True


def test_sliding_hybrid_example_groups_by_kind():
    table = load_layer_table(example_tables()["gemma-style-sliding-hybrid"])
    groups = group_layers(table.specs_by_layer)
    assert sorted((type(g.spec).__name__, len(g.layer_names)) for g in groups) == [
        ("FullAttentionSpec", 2), ("SlidingWindowSpec", 10)]


def test_mamba_hybrid_example_pads_the_state_page():
    """GROUP-PAGE-1: the Mamba page is padded up to the attention page."""
    table = load_layer_table(example_tables()["jamba-style-mamba-hybrid"])
    groups = group_layers(table.specs_by_layer)
    mamba = next(g.spec for g in groups if isinstance(g.spec, MambaSpec))
    attention = next(g.spec for g in groups if isinstance(g.spec, FullAttentionSpec))
    assert mamba.page_size_padded == attention.page_size_bytes == 1114112


def test_smaller_attention_page_grows_block_size():
    """GROUP-PAGE-1: a dividing page multiplies block_size."""
    small = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64, dtype=KVDtype.FLOAT16)
    big = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=512, dtype=KVDtype.FLOAT16)
    unified = unify_page_sizes({"s": small, "b": big})
    assert unified["s"].block_size == 64
    assert unified["s"].page_size_bytes == big.page_size_bytes


def test_mla_page_that_does_not_divide_cannot_group():
    """GROUP-PAGE-1: MLA pages are never padded to another page size."""
    mla = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16)
    full = FullAttentionSpec(block_size=16, num_kv_heads=4, head_size=160, dtype=KVDtype.BFLOAT16)
    with pytest.raises(GroupingError, match="MLAAttentionSpec"):
        group_layers({"mla": mla, "full": full})
