"""The producible input domain: what the engine's own code builds, read from its source (AST).

- the scanner on a synthetic source tree (constructors, positional arguments, ``**dict``
  spreads, subclass-only fields, ``replace`` on evident kinds, ``isinstance`` narrowing);
- the scan of the installed vLLM (0.34.0): no MLA layer sets ``non_causal``, none passes
  ``sliding_window`` or ``page_size_padded`` to ``MLAAttentionSpec``, with the call sites;
- the producible ``Domain`` pins those fields, the strategies and the systematic phase never
  draw them, and the symbolic building blocks honour the same domain (MLA ``head_size_v`` 0);
- ``constructor`` is the old domain, and engines without the capability keep it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.engines.protocol import EngineUnavailable, ProducibleDomain
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.engines.vllm.producible import ANY_FIELD, scan_source
from kvcontract.conformance.run.symbolic.blocks import Blocks, replace_spec
from kvcontract.reference import FullAttentionSpec, KVDtype, MLAAttentionSpec, SlidingWindowMLASpec

INTERFACE = '''
from dataclasses import dataclass, field

@dataclass(frozen=True)
class KVCacheSpec:
    block_size: int
    is_draft: bool = field(default=False, kw_only=True)

@dataclass(frozen=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    num_kv_heads: int
    head_size: int
    page_size_padded: int | None = None

@dataclass(frozen=True, kw_only=True)
class FullAttentionSpec(AttentionSpec):
    sliding_window: int | None = None
    non_causal: bool = False

@dataclass(frozen=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    alignment: int | None = None

@dataclass(frozen=True, kw_only=True)
class SlidingWindowSpec(AttentionSpec):
    sliding_window: int
    extra: int = 0

@dataclass(frozen=True)
class MambaSpec(KVCacheSpec):
    shapes: tuple
    state_alignment: int = 1

class NotASpec:
    pass
'''

LAYERS = '''
from dataclasses import replace
from vllm.v1.kv_cache_interface import (AttentionSpec, FullAttentionSpec, MLAAttentionSpec, MambaSpec,
                                       SlidingWindowSpec, replace_as)

class Attention:
    def get_kv_cache_spec(self, cfg):
        return FullAttentionSpec(block_size=cfg.block_size, num_kv_heads=self.heads, head_size=64,
                                 sliding_window=self.window)

class MLA:
    def get_kv_cache_spec(self, cfg):
        common = dict(block_size=cfg.block_size, num_kv_heads=1, head_size=576)
        return MLAAttentionSpec(**common, alignment=576)

def prefix_lm(spec):
    if isinstance(spec, FullAttentionSpec):
        return replace(spec, non_causal=True)
    return spec

def draft(spec):
    return replace(spec, is_draft=True)

def pad(spec: AttentionSpec, size):
    if not isinstance(spec, MLAAttentionSpec):
        return replace(spec, page_size_padded=size)
    return spec

def mamba(cfg):
    return MambaSpec(cfg.block_size, ((4, 256),))

def config(cfg):
    return replace(cfg, load_format="auto")

def opaque(kwargs):
    return MambaSpec(**kwargs)

def swa(cfg):
    return SlidingWindowSpec(block_size=16, num_kv_heads=1, head_size=64, sliding_window=128)

def promote(specs):
    promotions: dict = {SlidingWindowSpec: FullAttentionSpec}
    for spec in specs:
        target = next((promotions[c] for c in type(spec).__mro__ if c in promotions), None)
        yield replace_as(spec, target, drop=("extra",), block_size=32)
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    package = tmp_path / "vllm"
    (package / "v1").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "v1" / "kv_cache_interface.py").write_text(INTERFACE)
    (package / "layers.py").write_text(textwrap.dedent(LAYERS))
    (package / "broken.py").write_text("def f(:\n    FullAttentionSpec(\n")  # a syntax error is skipped
    return package


def test_scanner_reads_a_synthetic_tree(tree: Path) -> None:
    scan = scan_source(tree)
    assert set(scan.kinds) == {"KVCacheSpec", "AttentionSpec", "FullAttentionSpec", "MLAAttentionSpec", "MambaSpec",
                               "SlidingWindowSpec"}
    full, mla, mamba = (scan.fields[k] for k in ("FullAttentionSpec", "MLAAttentionSpec", "MambaSpec"))
    # constructor keywords, the site cited relative to the package's parent
    assert [str(s) for s in full["sliding_window"].sites if s.how == "constructor"] == ["vllm/layers.py:8"]
    assert full["head_size"].literals == (64,) and full["head_size"].always_set
    assert full["num_kv_heads"].literals is None  # not a constant
    # **dict spread resolved; a subclass's call sets nothing on its base, and vice versa
    assert mla["num_kv_heads"].literals == (1,) and mla["alignment"].literals == (576,)
    assert "alignment" not in full and "sliding_window" not in mla
    # replace narrowed by isinstance to a kind the engine builds: that kind only
    assert full["non_causal"].literals == (True,) and full["non_causal"].sites[0].how == "replace"
    assert "non_causal" not in mla
    # replace on an unknown spec: every kind ("inferred"); on a base minus a kind: the others
    assert all(scan.fields[k]["is_draft"].sites[0].how == "inferred" for k in ("FullAttentionSpec", "MambaSpec"))
    assert "page_size_padded" in full and "page_size_padded" not in mla
    # positional arguments map to the dataclass's positional fields
    assert set(mamba) >= {"block_size", "shapes"} and "state_alignment" not in mamba
    # a call whose arguments cannot all be read: any field may be set (none of the kind's is pinned)
    assert [str(s) for s in mamba[ANY_FIELD].sites] == ["vllm/layers.py:36"]
    assert not mamba["shapes"].always_set
    # a replace of something that is no spec is left out; the broken file is skipped
    assert not any("load_format" in fields for fields in scan.fields.values())
    # replace_as rebuilds a kind looked up in a {Kind: Kind} dict: the fields the source sets
    rebuilt = [s for s in full["sliding_window"].sites if s.how == "rebuild"]
    assert [(str(s), s.value) for s in rebuilt] == [("vllm/layers.py:45", 128)]
    assert "extra" not in full and [s.value for s in full["block_size"].sites if s.how == "rebuild"] == [32]
    assert [s.value for s in full["num_kv_heads"].sites if s.how == "rebuild"] == [1]  # carried as given
    assert scan.parsed == 2 and scan.files == 4  # the interface (its class lines) and layers.py
    assert scan_source(tree) is scan  # cached per source root


# -- the installed vLLM -----------------------------------------------------------------------------

def _vllm_dir() -> Path:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("vLLM is not installed here")
    return Path(next(iter(spec.submodule_search_locations)))


PROMOTION = "vllm/v1/core/kv_cache_planning.py:839"
"""vLLM 0.34.0's grouping promotes ``SlidingWindowMLASpec`` to ``MLAAttentionSpec`` (``replace_as``)."""


@pytest.mark.vllm
def test_vllm_never_sets_non_causal_or_sliding_window_on_mla() -> None:
    scan = scan_source(_vllm_dir())
    mla = scan.fields["MLAAttentionSpec"]
    constructors = [str(s) for s in scan.constructors["MLAAttentionSpec"] if s.how == "constructor"]
    assert "vllm/model_executor/models/deepseek_v2.py:659" in constructors
    assert "vllm/model_executor/layers/attention/mla_attention.py:1593" in constructors
    assert "non_causal" not in mla and "attention_chunk_size" not in mla and "head_size_v" not in mla
    # no MLA constructor passes sliding_window or page_size_padded: only the grouping's promotion of
    # SlidingWindowMLASpec carries them (the window, and the padding the source derived)
    for name in ("sliding_window", "page_size_padded"):
        assert {s.how for s in mla[name].sites} == {"rebuild"}
        assert [str(s) for s in mla[name].sites] == [PROMOTION]
    assert [str(s) for s in scan.constructors["MLAAttentionSpec"] if s.how == "rebuild"] == [PROMOTION]
    # non_causal is set, on full attention only: the Prefix-LM layer's replace
    sites = [str(s) for s in scan.fields["FullAttentionSpec"]["non_causal"].sites]
    assert sites == ["vllm/model_executor/layers/attention/prefill_prefix_lm_attention.py:85"]
    # what MLA layers do set, each with its sites
    assert mla["max_tp_shards"].literals is not None and set(mla["max_tp_shards"].literals) == {1}
    assert any("deepseek_v4" in str(s) for s in mla["model_version"].sites)


@pytest.fixture(scope="module")
def vllm_engine():  # type: ignore[no-untyped-def]
    from kvcontract.conformance.engines.vllm.engine import VllmEngine

    try:
        return VllmEngine()
    except EngineUnavailable as exc:
        pytest.skip(f"vLLM is not installed here ({exc})")


@pytest.fixture(scope="module")
def producible(vllm_engine) -> strat.Domain:  # type: ignore[no-untyped-def]
    return strat.domain_for(vllm_engine, "producible")


@pytest.mark.vllm
def test_producible_domain_pins_what_vllm_never_sets(vllm_engine, producible: strat.Domain) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(vllm_engine, ProducibleDomain)
    pinned = producible.pinned_fields(MLAAttentionSpec)
    assert {"non_causal", "attention_chunk_size", "head_size_v"} <= pinned
    assert not {"sliding_window", "page_size_padded"} & pinned  # the promotion carries them (see above)
    assert "non_causal" not in producible.pinned_fields(FullAttentionSpec)
    assert producible.restricted_values(MLAAttentionSpec, "max_tp_shards") == (1, None)
    assert producible.restricted_values(FullAttentionSpec, "non_causal") == (True, False)  # the literal, its default
    constructor = strat.domain_for(vllm_engine, "constructor")
    assert constructor.restricted == ()
    assert all(names == frozenset(vllm_engine.unsupported_fields(k)) for k, names in constructor.pinned)


@pytest.mark.vllm
def test_strategies_never_draw_unproducible_mla(producible: strat.Domain) -> None:
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(strat.specs(MLAAttentionSpec, producible))
    def one(spec: MLAAttentionSpec) -> None:
        assert not spec.non_causal and spec.attention_chunk_size is None
        assert spec.head_size_v == 0 and spec.num_kv_heads == 1
        assert spec.max_tp_shards in (1, None)
        if spec.alignment is None:  # no explicit padding is drawn
            assert spec.page_size_padded is None

    one()


@pytest.mark.vllm
def test_systematic_never_enumerates_unproducible_mla(producible: strat.Domain) -> None:
    for kind in (MLAAttentionSpec, SlidingWindowMLASpec):
        for f in sysm._settable(kind, producible):
            for spec in sysm.variants(kind, f.name, producible):
                assert not getattr(spec, "non_causal", False)
                assert spec.head_size_v == 0
    mla = {n for k, n in sysm.all_pairs(producible) if k == "MLAAttentionSpec"}
    assert not mla & {"non_causal", "attention_chunk_size", "head_size_v"}
    assert "non_causal" in {n for k, n in sysm.all_pairs(strat.FULL_DOMAIN) if k == "MLAAttentionSpec"}


@pytest.mark.vllm
def test_symbolic_blocks_draw_from_the_same_domain(producible: strat.Domain) -> None:
    blocks = Blocks(producible).of(MLAAttentionSpec)
    assert blocks is not None
    assert not {name for name, _ in blocks.atoms} & {"non_causal", "attention_chunk_size", "head_size_v"}
    assert {value for name, value in blocks.atoms if name == "max_tp_shards"} <= {1, None}
    assert "non_causal" not in blocks.flags
    assert all(t.head_size_v == 0 and t.num_kv_heads == 1 for t in blocks.templates)


def test_symbolic_blocks_keep_kind_pins_in_the_constructor_domain() -> None:
    """``KIND_DOMAINS`` holds in symbolic as in check: MLA ``head_size_v`` 0, ``num_kv_heads`` 1."""
    for kind in (MLAAttentionSpec, SlidingWindowMLASpec):
        blocks = Blocks(strat.FULL_DOMAIN).of(kind)
        assert blocks is not None
        assert all(t.head_size_v == 0 and t.num_kv_heads == 1 for t in blocks.templates)
        assert not {name for name, _ in blocks.atoms} & {"head_size_v", "num_kv_heads"}
    mla = sysm.base_spec(MLAAttentionSpec, strat.FULL_DOMAIN)
    full = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16)
    aligned = replace_spec(mla, {"head_size_v": full.head_size_v, "block_size": 32})  # a kind pair, aligned
    assert aligned is not None and aligned.head_size_v == 0 and aligned.block_size == 32


def test_engines_without_the_capability_keep_the_constructor_domain() -> None:
    engine = ReferenceEngine()
    assert not isinstance(engine, ProducibleDomain)
    assert strat.domain_for(engine, "producible") == strat.domain_for(engine, "constructor")
    assert strat.domain_for(engine) == dataclasses.replace(strat.domain_for(engine, "constructor"))


def test_domain_mode_is_validated_and_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(strat.DOMAIN_ENV, "producible")  # recorded, so that the test's use_domain is undone
    monkeypatch.delenv(strat.DOMAIN_ENV)
    assert strat.domain_mode() == "producible"
    strat.use_domain("constructor")
    assert strat.domain_mode() == "constructor"
    with pytest.raises(ValueError, match="unknown domain"):
        strat.use_domain("everything")


def test_check_and_symbolic_take_domain() -> None:
    import argparse

    from kvcontract.conformance.cli import check, symbolic

    for module in (check, symbolic):
        parser = argparse.ArgumentParser()
        module.register(parser.add_subparsers())
        name = module.__name__.rsplit(".", 1)[1]
        args = parser.parse_args([name, "--engine", "vllm"])
        assert args.domain == "producible"
        assert parser.parse_args([name, "--engine", "vllm", "--domain", "constructor"]).domain == "constructor"
