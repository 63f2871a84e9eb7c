"""Every vLLM 0.34.0 spec kind in the reference (chapters ROLE and SPEC)."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcontract.conformance.contract import strategies as strat
from kvcontract.reference import (
    SPEC_KINDS,
    CircularBufferSpec,
    GroupingError,
    HiddenStateCacheSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    IncompatibleSpecs,
    InvalidSpec,
    KVDtype,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    Role,
    group_layers,
    merge,
    role_of,
    unify_page_sizes,
)

MLA = dict(block_size=64, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16)


def _role(kind, name):
    return role_of(next(f for f in dataclasses.fields(kind) if f.name == name))


def test_new_fields_have_the_roles_spec_md_gives():
    assert _role(MambaSpec, "num_prefill_checkpoint_blocks") is Role.ALLOCATION
    assert _role(MambaSpec, "prefill_checkpoint_alignment") is Role.ALLOCATION
    assert _role(MambaSpec, "num_heads") is Role.LAYOUT
    assert _role(MambaSpec, "tokens_per_state") is Role.LAYOUT
    assert _role(HiSparseHotSpec, "page_size") is Role.LAYOUT
    assert _role(HiSparseHotSpec, "blocks_per_request") is Role.ALLOCATION
    assert _role(HiSparseResidentSpec, "page_size") is Role.LAYOUT


def test_hidden_state_cache_is_a_kind_of_its_own():
    """MERGE-KIND-1 / ERROR-KIND-1: in either order, never merged with MLA."""
    hidden, mla = HiddenStateCacheSpec(**MLA), MLAAttentionSpec(**MLA)
    assert merge([hidden, hidden]) == hidden
    for pair in ([hidden, mla], [mla, hidden]):
        with pytest.raises(IncompatibleSpecs) as exc:
            merge(pair)
        assert exc.value.fields == ("kind",)
        assert "HiddenStateCacheSpec" in str(exc.value) and "MLAAttentionSpec" in str(exc.value)


def test_hidden_state_cache_pads_to_its_alignment_like_mla():
    """SPEC-PAGE-2 holds for the MLA subclass."""
    spec = HiddenStateCacheSpec(**{**MLA, "block_size": 3}, alignment=4096)
    assert spec.page_size_bytes == 4096 and spec.page_size_padded == 4096


def test_circular_buffer_merges_like_any_attention_kind():
    ring = CircularBufferSpec(block_size=128, num_kv_heads=1, head_size=512, dtype=KVDtype.BFLOAT16)
    draft = dataclasses.replace(ring, is_draft=True)
    assert merge([ring, draft]).is_draft and merge([draft, ring]).is_draft
    with pytest.raises(IncompatibleSpecs, match=r"block_size \(layout\): 128 vs 64"):
        merge([ring, dataclasses.replace(ring, block_size=64)])


def test_hisparse_page_is_its_page_size():
    """SPEC-PAGE-4."""
    hot = HiSparseHotSpec(block_size=64, page_size=4096, blocks_per_request=8)
    assert hot.page_size_bytes == 4096
    assert dataclasses.replace(hot, block_size=128).page_size_bytes == 4096
    assert HiSparseResidentSpec(block_size=64, page_size=1536).page_size_bytes == 1536
    with pytest.raises(IncompatibleSpecs, match="blocks_per_request"):
        merge([hot, dataclasses.replace(hot, blocks_per_request=4)])


def test_hisparse_page_is_never_scaled_or_padded():
    """GROUP-PAGE-1 step 5: a fixed page that is not the largest fails grouping."""
    big = MLAAttentionSpec(**MLA)  # 64 x 576 x 2 = 73728 bytes
    hot = HiSparseHotSpec(block_size=64, page_size=73728 // 2, blocks_per_request=1)
    with pytest.raises(GroupingError, match="SPEC-PAGE-4"):
        unify_page_sizes({"a": big, "h": hot})
    with pytest.raises(GroupingError):
        group_layers({"a": big, "h": hot})
    assert unify_page_sizes({"a": big, "h": dataclasses.replace(hot, page_size=73728)})["h"] is not None


def test_mamba_new_fields_are_validated_and_do_not_change_the_page():
    """SPEC-VALID-1 and SPEC-PAGE-3."""
    base = MambaSpec(block_size=16, shapes=((3, 5),), dtypes=(KVDtype.BFLOAT16,), state_alignment=64)
    assert base.page_size_bytes == 64  # 30 bytes rounded up to the alignment
    wide = dataclasses.replace(base, num_heads=4, tokens_per_state=4)
    assert wide.page_size_bytes == base.page_size_bytes
    for bad in (dict(num_heads=0), dict(tokens_per_state=0), dict(tokens_per_state=-2),
                dict(num_prefill_checkpoint_blocks=-1), dict(prefill_checkpoint_alignment=0)):
        with pytest.raises(InvalidSpec, match=next(iter(bad))):
            dataclasses.replace(base, **bad)
    with pytest.raises(IncompatibleSpecs, match="num_prefill_checkpoint_blocks"):
        merge([base, dataclasses.replace(base, num_prefill_checkpoint_blocks=2)])


def test_every_vllm_quant_mode_is_a_reference_member():
    names = {m.name for m in KVQuantMode}
    assert {"NVFP4", "INT4_PER_TOKEN_HEAD", "TURBOQUANT_K8V4", "OCTAVE_K3V3_COMPACT"} <= names


def test_strategies_draw_every_new_kind():
    seen = set()

    @settings(max_examples=200, database=None)
    @given(strat.specs())
    def draw(spec):
        seen.add(type(spec))

    draw()
    assert {HiddenStateCacheSpec, CircularBufferSpec, HiSparseHotSpec, HiSparseResidentSpec} <= seen


def test_mamba_layouts_include_states_off_the_alignment():
    """Domains: some drawn Mamba state is not a multiple of its alignment."""
    found = []

    @settings(max_examples=150, database=None)
    @given(strat.specs(MambaSpec))
    def draw(spec):
        if any(math.prod(shape) * dtype.itemsize % spec.state_alignment
               for shape, dtype in zip(spec.shapes, spec.dtypes, strict=True)):
            found.append(spec)

    draw()
    assert found


def test_counts_keep_their_default_most_of_the_time():
    @settings(max_examples=200, database=None)
    @given(st.data())
    def draw(data):
        values.append(data.draw(strat.specs(MambaSpec)).tokens_per_state)

    values: list[int] = []
    draw()
    assert values.count(-1) > len(values) / 2
    assert set(values) > {-1}


# -- against vLLM -------------------------------------------------------------

def _vllm_engine():
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    from kvcontract.conformance.engines.protocol import EngineUnavailable, load_engine

    try:
        return load_engine("vllm")
    except EngineUnavailable as exc:
        pytest.skip(f"vLLM is not importable here ({exc})")


@pytest.mark.vllm
@pytest.mark.parametrize("kind", SPEC_KINDS, ids=lambda k: k.__name__)
def test_page_size_matches_vllm(kind):
    """SPEC-PAGE-1..4: the reference's page size is vLLM's ``page_size_bytes``
    for generated specs of every kind, over vLLM's own value domains."""
    engine = _vllm_engine()
    if kind in engine.unsupported_kinds():
        pytest.skip(engine.unsupported_kinds()[kind])
    domain = strat.domain_for(engine)

    @settings(max_examples=40, database=None, deadline=None)
    @given(strat.specs(kind, domain))
    def compare(spec):
        obj = engine.to_engine(spec)
        assert obj.page_size_bytes == spec.page_size_bytes, (spec, obj)
        assert engine.from_engine(obj) == spec

    compare()


@pytest.mark.vllm
def test_vllm_value_domains_are_all_reference_values():
    """The reference dtype and enum types cover every value vLLM accepts."""
    engine = _vllm_engine()
    assert engine.unmapped_values() == []
    domains = engine.value_domains()
    assert {KVDtype.FLOAT8_E4M3, KVDtype.UINT8, KVDtype.INT8} <= set(domains["KVDtype"])
    if engine.version == "0.34.0":
        assert set(domains["KVQuantMode"]) == set(KVQuantMode)
