"""Peer check of chapter PLAN: what vLLM 0.34.0's own planning tests
(``tests/v1/core/test_kv_cache_planning.py`` in its source distribution) expect of its
planner, restated against the reference (``kvcontract.reference.plan``) in the kit's own
words. A regression in the reference shows here against the engine's own expectations.

Each test names the vLLM test it follows. Sizes: a float32 full-attention layer of 2 KV heads
of 64 at 16 tokens per block has a page of 16 x 2 x 64 x 4 x 2 bytes.
"""

from __future__ import annotations

import dataclasses

import pytest

from kvcontract import reference
from kvcontract.reference import (
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    FullAttentionSpec,
    GroupingError,
    HiddenStateCacheSpec,
    KVDtype,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    planning,
    sizing,
)

PAGE = 16 * 2 * 64 * 4 * 2


def full(**kw: object) -> FullAttentionSpec:
    args: dict[str, object] = {"block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": KVDtype.FLOAT32}
    return FullAttentionSpec(**{**args, **kw})  # type: ignore[arg-type]


def swa(**kw: object) -> SlidingWindowSpec:
    args: dict[str, object] = {"block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": KVDtype.FLOAT32,
                               "sliding_window": 1}
    return SlidingWindowSpec(**{**args, **kw})  # type: ignore[arg-type]


def chunked(**kw: object) -> ChunkedLocalAttentionSpec:
    args: dict[str, object] = {"block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": KVDtype.FLOAT32,
                               "attention_chunk_size": 4}
    return ChunkedLocalAttentionSpec(**{**args, **kw})  # type: ignore[arg-type]


def mla(block_size: int = 16) -> MLAAttentionSpec:
    return MLAAttentionSpec(block_size=block_size, num_kv_heads=1, max_tp_shards=1, head_size=576,
                            dtype=KVDtype.FLOAT32)


def indexer(block_size: int = 16) -> MLAAttentionSpec:
    return MLAAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=132, dtype=KVDtype.UINT8)


def groups_of(planned: reference.KVCachePlan) -> list[list[str]]:
    return [list(g.layer_names) for g in planned.groups]


def tensors_of(planned: reference.KVCachePlan) -> list[tuple[list[str], int, int, int, int]]:
    return [(list(t.layer_names), t.size_bytes, t.offset, t.layer_stride, t.block_stride) for t in planned.tensors]


# -- test_get_kv_cache_config_one_worker ---------------------------------------------------------


def test_uniform_layers_share_one_group_and_one_tensor():
    for kind in (full, swa):
        p = sizing.plan({"layer_1": kind(), "layer_2": kind()}, PAGE * 2 * 32)
        assert p.num_blocks == 32
        assert groups_of(p) == [["layer_1", "layer_2"]]
        assert tensors_of(p) == [(["layer_1", "layer_2"], PAGE * 32 * 2, 0, PAGE * 32, PAGE)]


def test_hybrid_off_plans_full_and_sliding_as_one_full_group():
    p = sizing.plan({"layer_1": full(), "layer_2": swa()}, PAGE * 2 * 32, hybrid=False)
    assert p.num_blocks == 32 and groups_of(p) == [["layer_1", "layer_2"]]
    assert p.groups[0].spec == full(sliding_window=1)


def test_hybrid_on_gives_each_kind_its_group_and_twice_the_blocks():
    p = sizing.plan({"layer_1": full(), "layer_2": swa()}, PAGE * 2 * 32)
    assert p.num_blocks == 64
    assert groups_of(p) == [["layer_1"], ["layer_2"]]
    assert [g.spec for g in p.groups] == [full(), swa()]
    assert tensors_of(p) == [(["layer_1"], PAGE * 64, 0, PAGE * 64, PAGE), (["layer_2"], PAGE * 64, 0, PAGE * 64, PAGE)]


def test_equal_size_groups_interleave_the_larger_kind():
    table = {"layer_1": full(), "layer_2": full(), **{f"layer_{i}": swa() for i in range(3, 7)}}
    p = sizing.plan(table, PAGE * 2 * 32)
    assert p.num_blocks == 32
    assert groups_of(p) == [["layer_1", "layer_2"], ["layer_3", "layer_5"], ["layer_4", "layer_6"]]


def test_three_full_and_seven_sliding_pad_to_groups_of_three():
    table = {**{f"layer_{i}": full() for i in range(1, 4)}, **{f"layer_{i}": swa() for i in range(4, 11)}}
    p = sizing.plan(table, PAGE * 3 * 32)
    assert p.num_blocks == 32
    assert groups_of(p) == [["layer_1", "layer_2", "layer_3"], ["layer_4", "layer_7", "layer_10"],
                            ["layer_5", "layer_8"], ["layer_6", "layer_9"]]
    assert {t.size_bytes for t in p.tensors} == {PAGE * 32 * 3}


def test_one_more_full_layer_than_sliding_keeps_two_groups():
    table = {**{f"layer_{i}": full() for i in range(1, 7)}, **{f"layer_{i}": swa() for i in range(7, 12)}}
    p = sizing.plan(table, PAGE * 6 * 32)
    assert p.num_blocks == 32
    assert groups_of(p) == [[f"layer_{i}" for i in range(1, 7)], [f"layer_{i}" for i in range(7, 12)]]


def test_one_type_of_different_pages_is_one_per_member_group_packed_densely():
    table = {"layer_1": full(head_size=128), "layer_2": full(head_size=64)}
    p = sizing.plan(table, PAGE * 3 * 32)
    assert p.num_blocks == 32 and len(p.groups) == 1 and p.groups[0].spec is None
    assert tensors_of(p) == [(["layer_1"], PAGE * 32 * 3, 0, PAGE * 2 * 32, PAGE * 2),
                             (["layer_2"], PAGE * 32 * 3, PAGE * 2 * 32, PAGE * 32, PAGE)]


def test_a_smaller_dividing_page_grows_its_block_size():
    p = sizing.plan({"layer_1": full(head_size=64), "layer_2": swa(head_size=32)}, PAGE * 32)
    assert p.num_blocks == 32
    assert [g.spec for g in p.groups] == [full(head_size=64), swa(head_size=32, block_size=32)]


def test_a_smaller_page_that_does_not_divide_is_padded():
    wide = swa(head_size=96)
    p = sizing.plan({"layer_1": full(head_size=64), "layer_2": wide}, PAGE * 2 * 32)
    assert p.num_blocks == 42
    assert [g.spec for g in p.groups] == [full(head_size=64, page_size_padded=wide.page_size_bytes), wide]
    assert {t.size_bytes for t in p.tensors} == {wide.page_size_bytes * 42}


# -- test_unify_kv_cache_page_size_uses_padding_for_non_divisible_sizes ------------------------


def test_a_draft_of_smaller_head_size_is_padded_to_the_target_page():
    target = full(num_kv_heads=1, head_size=192, dtype=KVDtype.BFLOAT16)
    draft = swa(num_kv_heads=1, head_size=128, dtype=KVDtype.BFLOAT16, sliding_window=1024)
    unified = reference.unify_page_sizes({"target_attn": target, "draft_attn": draft})
    assert unified["target_attn"] == target
    assert unified["draft_attn"].block_size == draft.block_size
    assert unified["draft_attn"].page_size_bytes == target.page_size_bytes


# -- test_unify_hybrid_kv_cache_specs ---------------------------------------------------------


def test_hybrid_off_promotes_sliding_layers_at_the_full_block_size_per_sharding():
    table = {"layer_1": full(block_size=64), "layer_2": swa(page_size_padded=32 * 1024, sliding_window=1024)}
    table["draft_layer_1"] = dataclasses.replace(table["layer_1"], dcp_sharded=False)
    table["draft_layer_2"] = dataclasses.replace(table["layer_2"], dcp_sharded=False)
    out = planning.unify_hybrid(table)
    promoted = full(block_size=64, page_size_padded=64 * 1024, sliding_window=1024)
    assert out["layer_1"] == full(block_size=64)
    assert out["layer_2"] == promoted and out["layer_2"].page_size_bytes == 64 * 1024
    assert out["draft_layer_2"] == dataclasses.replace(promoted, dcp_sharded=False)


def test_hybrid_off_promotes_chunked_and_sliding_layers_keeping_their_masks():
    out = planning.unify_hybrid({"layer_1": full(), "layer_2": swa(page_size_padded=32 * 1024, sliding_window=1024),
                                 "layer_3": chunked(page_size_padded=32 * 1024, attention_chunk_size=512)})
    assert out == {"layer_1": full(), "layer_2": full(page_size_padded=32 * 1024, sliding_window=1024),
                   "layer_3": full(page_size_padded=32 * 1024, attention_chunk_size=512)}


@pytest.mark.parametrize("table", [
    {"layer_1": swa(sliding_window=1024), "layer_2": chunked(attention_chunk_size=512)},
    {"attention": full(), "mamba": MambaSpec(block_size=16, shapes=((2, 512), (3, 32, 32)),
                                             dtypes=(KVDtype.FLOAT32, KVDtype.FLOAT32), num_speculative_blocks=2)},
], ids=["no-full-layer", "mamba-beside-attention"])
def test_hybrid_off_refuses_what_cannot_become_one_group(table):
    with pytest.raises(GroupingError):
        planning.unify_hybrid(table)


# -- test_mla_with_incompatible_swa_uses_one_full_allocation_group ---------------------------


@pytest.mark.parametrize(("draft", "promoted"), [
    (swa(), FullAttentionSpec),
    (SlidingWindowMLASpec(block_size=16, num_kv_heads=1, max_tp_shards=1, head_size=576, dtype=KVDtype.FLOAT32,
                          sliding_window=128, bounded_replay=True, non_causal_multi_token_decode=True),
     MLAAttentionSpec),
], ids=["swa", "swa_mla"])
def test_mla_beside_an_unpageable_sliding_draft_is_one_full_allocation_group(draft, promoted):
    table = {"target.0.attn": mla(64), "target.0.indexer": indexer(64), "draft.0": draft}
    (group,) = planning.plan_groups(table)
    assert set(group.layer_names) == set(table) and group.spec is None and group.block_size == 64
    member = dict(group.layer_specs)["draft.0"]
    assert type(member) is promoted and member.block_size == 64
    assert member.sliding_window == draft.sliding_window
    assert getattr(member, "non_causal_multi_token_decode", False) == \
        getattr(draft, "non_causal_multi_token_decode", False)
    assert table["draft.0"] is draft  # the layer's own spec is untouched


# -- test_hidden_state_group_preserves_hybrid_prefix_cache_granularity, ..._with_tp_scales_page_size


def test_a_hidden_state_layer_takes_a_divisor_block_size_that_fits_the_common_page():
    attention = full(block_size=544, num_kv_heads=1, head_size=512, dtype=KVDtype.BFLOAT16)
    mamba = MambaSpec(block_size=544, shapes=((557056,),), dtypes=(KVDtype.BFLOAT16,), mamba_cache_mode="align")
    assert attention.page_size_bytes == mamba.page_size_bytes
    hidden = HiddenStateCacheSpec(block_size=544, num_kv_heads=3, head_size=1024, dtype=KVDtype.BFLOAT16)
    groups = planning.plan_groups({"model.full_attn": attention, "model.mamba": mamba, "cache_only_layers.0": hidden})
    (alone,) = [g for g in groups if isinstance(g.spec, HiddenStateCacheSpec)]
    assert alone.layer_names == ("cache_only_layers.0",) and alone.block_size == 136
    assert alone.spec is not None and alone.spec.page_size_bytes == attention.page_size_bytes


def test_hidden_states_wider_than_a_page_grow_the_other_groups():
    # vLLM's version builds two equal full layers beside the hidden state: one type, so one
    # per-member group, and its check of the other groups holds vacuously. Here a sliding layer
    # makes two attention groups, and one KV head a 4096-byte page (K and V) below the
    # hidden state's 6144 bytes per token.
    kv = full(num_kv_heads=1, head_size=64, dtype=KVDtype.BFLOAT16)
    sliding = swa(num_kv_heads=1, head_size=64, dtype=KVDtype.BFLOAT16, sliding_window=64)
    hidden = HiddenStateCacheSpec(block_size=16, num_kv_heads=6, head_size=512, dtype=KVDtype.BFLOAT16)
    groups = planning.plan_groups({"target.0.attn": kv, "target.1.attn": sliding, "cache_only_layers.48": hidden})
    assert "cache_only_layers.48" in {n for g in groups for n in g.layer_names}
    others = [g for g in groups if "cache_only_layers.48" not in g.layer_names]
    assert len(others) == 2 and all(g.block_size == 32 for g in others)  # scaled by ceil(6144 / 4096)


# -- test_get_kv_cache_configs_attention_free ------------------------------------------------


def test_no_layers_plan_no_group_and_the_null_block():
    p = sizing.plan({}, 1 << 30)
    assert p.groups == () and p.tensors == () and p.num_blocks == 1


# -- test_kv_cache_utils.py: test_uniform_type_spec_block_table_width_matches_layer_spec,
#    test_resolve_dcp_kv_block_size_unwraps_uniform_type_specs -----------------------------


def _mamba(**kw: object) -> MambaSpec:
    args: dict[str, object] = {"block_size": 16, "shapes": ((2, 512), (3, 32, 32)),
                               "dtypes": (KVDtype.FLOAT32, KVDtype.FLOAT32), "num_speculative_blocks": 2}
    return MambaSpec(**{**args, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(("spec", "dcp", "width"), [(mla(), 1, 64), (mla(), 2, 32), (_mamba(), 2, 3)],
                         ids=["mla", "mla-dcp2", "mamba-dcp2"])
def test_block_table_width_per_request(spec, dcp, width):
    assert sizing.block_table_width(spec, 1024, dcp) == width
    (group,) = planning.plan_groups({"layer1": spec, "layer2": spec})
    assert {sizing.block_table_width(s, 1024, dcp) for _, s in group.layer_specs} == {width}


def test_a_dcp_sharded_block_spans_every_ranks_share_and_a_state_block_does_not():
    attention = full(num_kv_heads=1, dtype=KVDtype.FLOAT16)
    mamba = MambaSpec(block_size=16, shapes=((1, 1),), dtypes=(KVDtype.FLOAT16,))
    assert sizing.tokens_per_block(attention, 4) == 64
    assert sizing.tokens_per_block(mamba, 4) == 16
    groups = planning.plan_groups({"attention.0": attention, "mamba.0": mamba})
    assert sizing.scheduler_block_size(groups, 4) == 64


# -- test_packed_groups_glm5_like_hybrid ---------------------------------------------------


def test_a_glm5_like_hybrid_packs_its_pattern_into_block_outermost_groups():
    table: dict[str, object] = {}
    for i in range(11):
        table[f"layers.{i}.attn"] = MLAAttentionSpec(block_size=1024, num_kv_heads=1, head_size=576,
                                                     dtype=KVDtype.BFLOAT16, block_stride_alignment=32 * 576 * 2)
        table[f"layers.{i}.indexer"] = MLAAttentionSpec(block_size=1024, num_kv_heads=1, head_size=132,
                                                        dtype=KVDtype.UINT8, tokens_per_state=4,
                                                        block_stride_alignment=64 * 132)
        table[f"layers.{i}.tail"] = CircularBufferSpec(block_size=4, num_kv_heads=2, head_size=128, head_size_v=0,
                                                       dtype=KVDtype.BFLOAT16)
    for i in range(34):
        table[f"layers.{i}.kda"] = MambaSpec(shapes=((3, 6144), (16, 128, 128)),
                                             dtypes=(KVDtype.BFLOAT16, KVDtype.FLOAT32), block_size=1024)
    p = sizing.plan(table, 2 * 1024**3, block_outermost=True)  # type: ignore[arg-type]
    kinds = [{type(s).__name__ for _, s in g.layer_specs} for g in p.groups]
    assert all(g.spec is None for g in p.groups)  # every packed group keeps its members' specs
    attention = [g for g, k in zip(p.groups, kinds, strict=True) if k == {"MLAAttentionSpec"}]
    rings = [g for g, k in zip(p.groups, kinds, strict=True) if k == {"CircularBufferSpec"}]
    mamba = [g for g, k in zip(p.groups, kinds, strict=True) if k == {"MambaSpec"}]
    assert [len(g.layer_names) for g in attention] == [22] and [len(g.layer_names) for g in rings] == [11]
    # 11 x (1.18 MB MLA + 34 KB indexer) per block holds 12 float32 KDA states: 34 states in 3 groups
    assert len(mamba) == 3 and sum(len(g.layer_names) for g in mamba) == 34
    (stride,) = {t.block_stride for t in p.tensors}
    assert stride % (32 * 576 * 2) == 0 and stride % (64 * 132) == 0
    assert sum(len(t.layer_names) for t in p.tensors) == len(table)


# -- test_mixed_page_size_groups_use_spec_compatibility, test_windowed_dspark_draft_keeps_its_dcp_layout,
#    test_sparse_mla_preserves_physical_row_addressing: block-outermost packing ------------------


def _peer(name: str) -> dict[str, object]:
    from kvcontract.conformance.engines.vllm.tables.peer_planning import peer_tables

    return dict(peer_tables(with_variants=False))[name]  # type: ignore[return-value]


def test_mixed_pages_pack_by_type_into_groups_of_two_three_and_six():
    groups = planning.plan_groups(_peer("mixed-page-groups/mla+indexer+swa-mla"), block_outermost=True)  # type: ignore[arg-type]
    assert sorted(len(g.layer_names) for g in groups) == [2, 3, 6]


@pytest.mark.parametrize("sharded", [True, False])
def test_a_windowed_dspark_draft_keeps_its_group_and_its_dcp_sharding(sharded):
    table = _peer(f"windowed-dspark/dcp-{'sharded' if sharded else 'replicated'}")
    groups = planning.plan_groups(table, block_outermost=True)  # type: ignore[arg-type]
    assert [list(g.layer_names) for g in groups] == [["target.0.attn", "target.0.indexer.k_cache", "target.1.attn"],
                                                     ["draft.2.attn", "draft.3.attn"]]
    assert [g.layer_specs[0][1].dcp_sharded for g in groups] == [True, sharded]


def test_hybrid_off_block_outermost_packs_each_sharding_instead_of_unifying_pages():
    # The sparse MLA target's page neither divides nor pads to the replicated draft's: unifying
    # pages fails (the reference refused here before), but a block-outermost block holds every
    # page side by side, so vLLM packs: one per-member group per DCP sharding.
    table = _peer("sparse-mla-rows/target+draft")
    with pytest.raises(GroupingError):
        planning.plan_groups(table, hybrid=False)  # type: ignore[arg-type]
    groups = planning.plan_groups(table, hybrid=False, block_outermost=True)  # type: ignore[arg-type]
    assert [(g.layer_names, g.spec) for g in groups] == [(("target", "indexer"), None), (("draft",), None)]


# -- the contract beside vLLM's registry: static sink, hidden states, drafts ----------------------


def test_static_sink_layers_share_a_per_member_group_with_full_attention():
    # vLLM registers SinkFullAttentionSpec with uniform_type_base_spec=FullAttentionSpec and a
    # manager that is the full-attention manager plus one assert: one type (PLAN-TYPE-1).
    sink = reference.SinkFullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.BFLOAT16,
                                           sink_len=32)
    table = {"layers.0": sink, "layers.1": sink, "mtp.0": full(dtype=KVDtype.BFLOAT16, is_draft=True),
             "layers.2": dataclasses.replace(sink, sink_len=64)}
    (group,) = planning.plan_groups(table)
    assert group.spec is None and set(group.layer_names) == set(table)
    assert planning.type_mismatch(sink, full(dtype=KVDtype.BFLOAT16)) is None
    assert planning.manager_of(sink) == planning.manager_of(full()) == "full-attention"


def test_hybrid_off_sets_hidden_state_layers_apart_beside_two_shardings():
    table = {"layer_1": full(block_size=64), "layer_2": swa(page_size_padded=32 * 1024, sliding_window=1024)}
    table["draft_layer_1"] = dataclasses.replace(table["layer_1"], dcp_sharded=False)
    table["draft_layer_2"] = dataclasses.replace(table["layer_2"], dcp_sharded=False)
    table["cache_only_layers.0"] = HiddenStateCacheSpec(block_size=64, num_kv_heads=3, head_size=1024,
                                                        dtype=KVDtype.BFLOAT16)
    groups = planning.plan_groups(table, hybrid=False)
    assert [g.layer_names for g in groups] == [("layer_1", "layer_2"), ("draft_layer_1", "draft_layer_2"),
                                               ("cache_only_layers.0",)]
    assert isinstance(groups[-1].spec, HiddenStateCacheSpec)
    assert groups[-1].spec.page_size_bytes == groups[0].layer_specs[0][1].page_size_bytes


def test_a_draft_copy_shares_its_targets_tensor():
    # vLLM keys its tensors by spec equality, which leaves is_draft out (compare=False).
    table = {"layers.0": full(), "draft.0": full(is_draft=True), "layers.1": full()}
    planned = sizing.plan(table, PAGE * 3 * 8)
    assert tensors_of(planned) == [(["layers.0", "draft.0", "layers.1"], PAGE * 8 * 3, 0, PAGE * 8, PAGE)]
