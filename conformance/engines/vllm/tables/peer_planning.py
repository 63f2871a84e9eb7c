"""The layer tables of vLLM 0.34.0's own planning tests, restated as reference specs.

vLLM's source distribution tests its planner on small tables
(``tests/v1/core/test_kv_cache_planning.py`` and ``test_contiguous_kv_packing.py``); each
table here is one of them, in the kit's own words and named after the test it comes from,
plus a few the contract needs beside them (static-sink layers, hidden states beside MLA).
:func:`peer_tables` adds simple variants of each: the layers in reverse order (an answer
that depends on the order shows), a hidden-state extraction layer appended, and a draft
layer (a copy of the first layer marked ``is_draft``). Synthetic: these are the engine's
test inputs, not tables its model code builds (``plan_agreement`` labels them so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from kvcontract.reference import (
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    KVDtype,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    SparseCacheRole,
)

F32, BF16, U8 = KVDtype.FLOAT32, KVDtype.BFLOAT16, KVDtype.UINT8
Table = dict[str, KVCacheSpec]


def full(**kw: Any) -> FullAttentionSpec:
    """The tests' ``new_kv_cache_spec``: float32, 2 KV heads of 64, 16 tokens a block."""
    return FullAttentionSpec(**{"block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": F32, **kw})


def swa(**kw: Any) -> SlidingWindowSpec:
    """The tests' ``new_sliding_window_spec`` (window 1)."""
    return SlidingWindowSpec(**{"block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": F32,
                                "sliding_window": 1, **kw})


def chunked(**kw: Any) -> ChunkedLocalAttentionSpec:
    return ChunkedLocalAttentionSpec(**{"block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": F32,
                                        "attention_chunk_size": 4, **kw})


def mamba(**kw: Any) -> MambaSpec:
    """The tests' ``new_mamba_spec``: two float32 states, two speculative blocks."""
    return MambaSpec(**{"block_size": 16, "shapes": ((2, 512), (3, 32, 32)), "dtypes": (F32, F32),
                        "num_speculative_blocks": 2, **kw})


def mla(**kw: Any) -> MLAAttentionSpec:
    """The tests' ``new_mla_spec``: one float32 latent head of 576."""
    return MLAAttentionSpec(**{"block_size": 16, "num_kv_heads": 1, "max_tp_shards": 1, "head_size": 576,
                               "dtype": F32, **kw})


def indexer(**kw: Any) -> MLAAttentionSpec:
    """A sparse-attention indexer's key cache: uint8, one head of 132."""
    return MLAAttentionSpec(**{"block_size": 16, "num_kv_heads": 1, "head_size": 132, "dtype": U8, **kw})


def swa_mla(**kw: Any) -> SlidingWindowMLASpec:
    return SlidingWindowMLASpec(**{"block_size": 16, "num_kv_heads": 1, "max_tp_shards": 1, "head_size": 576,
                                   "dtype": F32, "sliding_window": 128, **kw})


def _layers(prefix: str, n: int, spec: KVCacheSpec, start: int = 0) -> Table:
    return {f"{prefix}{i}": spec for i in range(start, start + n)}


# -- test_kv_cache_planning.py ------------------------------------------------------------------


def _one_worker() -> Iterator[tuple[str, Table]]:
    yield "one-worker/full", _layers("layer_", 2, full(), 1)
    yield "one-worker/sliding", _layers("layer_", 2, swa(), 1)
    yield "one-worker/full+sliding", {"layer_1": full(), "layer_2": swa()}
    yield "one-worker/2full+4sliding", {**_layers("layer_", 2, full(), 1), **_layers("layer_", 4, swa(), 3)}
    yield "one-worker/3full+7sliding", {**_layers("layer_", 3, full(), 1), **_layers("layer_", 7, swa(), 4)}
    yield "one-worker/6full+5sliding", {**_layers("layer_", 6, full(), 1), **_layers("layer_", 5, swa(), 7)}
    yield "one-worker/one-type-two-pages", {"layer_1": full(head_size=128), "layer_2": full(head_size=64)}
    yield "one-worker/dividing-page", {"layer_1": full(head_size=64), "layer_2": swa(head_size=32)}
    yield "one-worker/padded-page", {"layer_1": full(head_size=64), "layer_2": swa(head_size=96)}


def _unify() -> Iterator[tuple[str, Table]]:
    yield "unify-padding/dflash-draft", {
        "target_attn": full(num_kv_heads=1, head_size=192, dtype=BF16),
        "draft_attn": swa(num_kv_heads=1, head_size=128, dtype=BF16, sliding_window=1024)}
    first, second = full(block_size=64), swa(page_size_padded=32 * 1024, sliding_window=1024)
    yield "unify-hybrid/full+sliding+replicated-draft", {
        "layer_1": first, "layer_2": second, "draft_layer_1": dataclasses.replace(first, dcp_sharded=False),
        "draft_layer_2": dataclasses.replace(second, dcp_sharded=False)}
    yield "unify-hybrid/full+chunked", {"layer_1": full(),
                                        "layer_2": chunked(page_size_padded=32 * 1024, attention_chunk_size=512)}
    yield "unify-hybrid/full+sliding+chunked", {
        "layer_1": full(), "layer_2": swa(page_size_padded=32 * 1024, sliding_window=1024),
        "layer_3": chunked(page_size_padded=32 * 1024, attention_chunk_size=512)}
    yield "unify-hybrid/sliding+chunked", {"layer_1": swa(sliding_window=1024),
                                           "layer_2": chunked(attention_chunk_size=512)}
    yield "unify-hybrid/full+mamba", {"attention": full(), "mamba": mamba()}
    draft = full(num_kv_heads=4)
    yield "unify-mamba/draft-page", {"mamba_layer": mamba(), "main_attn_layer": full(), "draft_attn_layer": draft}
    yield "unify-mamba/padded-state", {
        "mamba_layer": mamba(shapes=((2, 256), (3, 32, 32)), page_size_padded=16384), "draft_attn_layer": draft}
    yield "unify-mamba/odd-state", {"mamba_layer": mamba(shapes=((6144,),), dtypes=(F32,)), "draft_attn_layer": draft}
    yield "unify-mamba/odd-attention", {"attn_layer": full(block_size=24), "draft_attn_layer": draft}
    yield "unify-mamba/equal-pages", {"mamba_layer": mamba(), "attn_layer": full()}


def _sparse_and_drafts() -> Iterator[tuple[str, Table]]:
    target = mla(block_size=64, num_kv_heads=1, max_tp_shards=None, head_size=576, dtype=U8,
                 state_content_bytes=656, block_stride_alignment=656, cache_dtype_str="fp8_ds_mla",
                 is_index_group_leader=True)
    sparse: Table = {"target": target, "indexer": indexer(block_size=64, cache_role=SparseCacheRole.INDEXER)}
    draft = swa(block_size=64, num_kv_heads=64, head_size=64, dtype=BF16, sliding_window=2048, dcp_sharded=False)
    yield "sparse-mla-rows/target", sparse
    yield "sparse-mla-rows/target+draft", {**sparse, "draft": draft}
    aligned = {**sparse, "indexer": indexer(block_size=64, cache_role=SparseCacheRole.INDEXER,
                                            block_stride_alignment=512)}
    yield "sparse-mla-rows/aligned-indexer+draft", {**aligned, "draft": draft}
    yield "mla-draft/pages-unify", {"target.0.attn": mla(), "draft.0": swa(num_kv_heads=1, head_size=288)}
    for sharded in (True, False):
        dspark = swa_mla(sliding_window=36, block_size=64, dtype=BF16, non_causal_multi_token_decode=True,
                         dcp_sharded=sharded)
        target = mla(cache_dtype_str="fp8_ds_mla", block_size=64)
        yield f"windowed-dspark/dcp-{'sharded' if sharded else 'replicated'}", {
            "target.0.attn": target, "target.0.indexer.k_cache": indexer(block_size=64),
            "target.1.attn": target, "draft.2.attn": dspark, "draft.3.attn": dspark}
    for label, draft_spec in (("swa", swa()), ("swa-mla", swa_mla(bounded_replay=True,
                                                                  non_causal_multi_token_decode=True))):
        yield f"mla-incompatible-swa/{label}", {"target.0.attn": mla(block_size=64),
                                                "target.0.indexer": indexer(block_size=64), "draft.0": draft_spec}
    yield "mixed-page-groups/mla+indexer+swa-mla", {
        **{n: s for i in range(3) for n, s in ((f"mla.{i}", mla()), (f"indexer.{i}", indexer()))},
        **_layers("swa.", 5, swa_mla(head_size=1024))}
    mtp: dict[str, Table] = {"uniform": {"layers.0": full(), "draft.0": full(is_draft=True)},
           "hybrid": {**{f"layers.{i}": full() if i % 4 == 3 else mamba(mamba_cache_mode="align")
                         for i in range(8)}, "mtp.0": full(is_draft=True)},
           "draft-spans-groups": {"layers.0": mla(), "layers.1": swa_mla(head_size=1024),
                                  "mtp.0": mla(is_draft=True), "mtp.1": swa_mla(head_size=1024, is_draft=True)}}
    for label, table in mtp.items():
        yield f"eagle-groups/{label}", table


def _hidden_states() -> Iterator[tuple[str, Table]]:
    attention = FullAttentionSpec(block_size=544, num_kv_heads=1, head_size=512, dtype=BF16)
    state = MambaSpec(block_size=544, shapes=((557056,),), dtypes=(BF16,), mamba_cache_mode="align")
    yield "hidden-state/hybrid-granularity", {
        "model.full_attn": attention, "model.mamba": state,
        "cache_only_layers.0": HiddenStateCacheSpec(block_size=544, num_kv_heads=3, head_size=1024, dtype=BF16)}
    kv = full(num_kv_heads=2, head_size=64, dtype=BF16)
    yield "hidden-state/tp-scaled-page", {
        "target.0.attn": kv, "target.1.attn": kv,
        "cache_only_layers.48": HiddenStateCacheSpec(block_size=16, num_kv_heads=6, head_size=512, dtype=BF16)}
    yield "hidden-state/beside-sliding", {
        "target.0.attn": full(num_kv_heads=1, head_size=64, dtype=BF16),
        "target.1.attn": swa(num_kv_heads=1, head_size=64, dtype=BF16, sliding_window=64),
        "cache_only_layers.48": HiddenStateCacheSpec(block_size=16, num_kv_heads=6, head_size=512, dtype=BF16)}
    yield "attention-free", {}


# -- test_contiguous_kv_packing.py and test_packed_groups_glm5_like_hybrid -------------------------


def _packing() -> Iterator[tuple[str, Table]]:
    table: Table = {}
    for i in range(11):
        table[f"layers.{i}.attn"] = MLAAttentionSpec(block_size=1024, num_kv_heads=1, head_size=576, dtype=BF16,
                                                     block_stride_alignment=32 * 576 * 2)
        table[f"layers.{i}.indexer"] = MLAAttentionSpec(block_size=1024, num_kv_heads=1, head_size=132, dtype=U8,
                                                        tokens_per_state=4, block_stride_alignment=64 * 132)
        table[f"layers.{i}.tail"] = CircularBufferSpec(block_size=4, num_kv_heads=2, head_size=128, head_size_v=0,
                                                       dtype=BF16)
    table.update(_layers("layers.kda.", 34, MambaSpec(block_size=1024, shapes=((3, 6144), (16, 128, 128)),
                                                      dtypes=(BF16, F32))))
    yield "packed/glm5-like", table
    csa: Table = _layers("model.layers.linear_attn.", 7, MambaSpec(block_size=16, shapes=((32,),), dtypes=(BF16,)))
    csa["model.layers.0.ple"] = MambaSpec(block_size=16, shapes=((24,),), dtypes=(BF16,), tp_replicated=True)
    for i in range(3):
        csa[f"model.layers.{i}.self_attn"] = full(block_size=16, num_kv_heads=2, head_size=16, head_size_v=16,
                                                  dtype=BF16)
        csa[f"model.layers.{i}.self_attn.indexer.compressed_key_cache"] = MLAAttentionSpec(
            block_size=16, num_kv_heads=1, head_size=16, dtype=BF16, tokens_per_state=4)
        csa[f"model.layers.{i}.self_attn.indexer.raw_key_cache"] = CircularBufferSpec(
            block_size=4, num_kv_heads=1, head_size=8, head_size_v=0, dtype=BF16)
    yield "packed/csa-linear", csa
    yield "packed/compressed-hashes", {
        "compressed.4": MLAAttentionSpec(block_size=256, num_kv_heads=1, head_size=16, dtype=BF16, tokens_per_state=4),
        "compressed.128": MLAAttentionSpec(block_size=256, num_kv_heads=1, head_size=16, dtype=BF16,
                                           tokens_per_state=128),
        "compressor_state.4": SlidingWindowMLASpec(block_size=4, num_kv_heads=1, head_size=8, head_size_v=0,
                                                   dtype=BF16, sliding_window=8)}
    narrow = {**_layers("narrow.a.", 10, FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=8, dtype=U8)),
              **_layers("narrow.b.", 10, FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=16, dtype=U8)),
              **_layers("gdn.", 100, MambaSpec(block_size=16, shapes=((512,),), dtypes=(BF16,)))}
    wide_mla = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=1024, dtype=U8)
    yield "packed/mamba-split-unbalanced", {**_layers("wide.", 3, wide_mla),
                                            "wide.odd": dataclasses.replace(wide_mla, head_size=800), **narrow}
    yield "packed/mamba-split-state", {"wide.state": MambaSpec(block_size=16, shapes=((51_200,),), dtypes=(BF16,),
                                                               tp_replicated=True), **narrow}
    v4: Table = {}
    for layer, ratio in ((2, 2), (8, 2), (14, 2), (20, 1)):
        v4[f"layers.{layer}.attn"] = MLAAttentionSpec(block_size=128, num_kv_heads=1, head_size=584, dtype=U8,
                                                      tokens_per_state=ratio, alignment=576)
        v4[f"layers.{layer}.idx"] = MLAAttentionSpec(block_size=128, num_kv_heads=1, head_size=132, dtype=U8,
                                                     tokens_per_state=ratio, alignment=576)
    v4.update(_layers("layers.swa.", 43, SlidingWindowMLASpec(block_size=64, num_kv_heads=1, head_size=584,
                                                              dtype=U8, sliding_window=128, alignment=576)))
    yield "packed/swa-bucket-cap", v4
    ring: Table = {"layers.2.attn": MLAAttentionSpec(block_size=128, num_kv_heads=1, head_size=584, dtype=U8,
                                              tokens_per_state=2, alignment=576),
            "layers.2.attn.compressor.state_cache": CircularBufferSpec(block_size=8, num_kv_heads=1, head_size=1024,
                                                                       head_size_v=0, dtype=F32),
            **{f"layers.{i}.attn.swa_cache": SlidingWindowMLASpec(block_size=64, num_kv_heads=1, head_size=584,
                                                                  dtype=U8, sliding_window=128, alignment=576)
               for i in range(4)}}
    yield "packed/ring-beside-paged", ring
    small = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=512, dtype=U8)
    yield "packed/mixed-page-mla", {"mla.0": small, "mla.1": small,
                                    "idx.0": dataclasses.replace(small, head_size=128)}


# -- what the contract needs beside them -----------------------------------------------------------


def _contract() -> Iterator[tuple[str, Table]]:
    sink = SinkFullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=BF16, sink_len=32)
    yield "static-sink/model+full-draft", {**_layers("model.layers.", 4, sink),
                                           "mtp.0": FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64,
                                                                      dtype=BF16, is_draft=True)}
    yield "static-sink/model+sliding", {**_layers("model.layers.", 4, sink),
                                        **_layers("model.swa.", 4, swa(dtype=BF16, sliding_window=64))}
    latent = mla(dtype=BF16, block_size=64)
    yield "hidden-state/beside-mla", {**_layers("model.layers.", 4, latent),
                                      "cache_only_layers.4": HiddenStateCacheSpec(block_size=64, num_kv_heads=3,
                                                                                  head_size=1024, dtype=BF16)}
    yield "hidden-state/beside-mla-same-geometry", {
        **_layers("model.layers.", 4, latent),
        "cache_only_layers.4": HiddenStateCacheSpec(block_size=64, num_kv_heads=1, max_tp_shards=1, head_size=576,
                                                    dtype=BF16)}


BASES: tuple[Callable[[], Iterator[tuple[str, Table]]], ...] = (
    _one_worker, _unify, _sparse_and_drafts, _hidden_states, _packing, _contract)


# -- variants ---------------------------------------------------------------------------------


def _hidden_for(table: Table) -> HiddenStateCacheSpec | None:
    """A hidden-state extraction layer for ``table``: three hidden states of 1024 at the
    first attention layer's block size (None for a table without attention)."""
    first = next((s for s in table.values() if isinstance(s, FullAttentionSpec | SlidingWindowSpec)), None)
    if first is None or any(isinstance(s, HiddenStateCacheSpec) for s in table.values()):
        return None
    return HiddenStateCacheSpec(block_size=first.block_size, num_kv_heads=3, head_size=1024, dtype=BF16,
                                is_draft=True)


def variants(name: str, table: Table) -> Iterator[tuple[str, Table]]:
    """``table`` and its variants: reversed, with a hidden-state layer, with a draft layer."""
    yield name, table
    if len(table) > 1:
        yield f"{name}~reversed", dict(reversed(list(table.items())))
    hidden = _hidden_for(table)
    if hidden is not None:
        yield f"{name}~hidden", {**table, "cache_only_layers.99": hidden}
    if table and not any(s.is_draft for s in table.values()):
        first = next(iter(table.values()))
        yield f"{name}~draft", {**table, "draft.model.layers.0": dataclasses.replace(first, is_draft=True)}


def peer_tables(with_variants: bool = True) -> list[tuple[str, Table]]:
    """Every restated table (``name``: ``<test>/<case>``), with its variants (``~<variant>``)."""
    out: list[tuple[str, Table]] = []
    for base in BASES:
        for name, table in base():
            out.extend(variants(name, table) if with_variants else [(name, table)])
    return out


__all__ = ["BASES", "peer_tables", "variants"]
