"""Discovery of an engine's spec classes and fields, and their classification (ROLE-COVER-1)."""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
import types

import pytest
from hypothesis import given, settings

from kvcontract import reference
from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import surface
from kvcontract.conformance.engines.reference import ReferenceEngine

# -- a toy engine, defined in a module of its own, so no vLLM is needed --------

toy = types.ModuleType("kvcontract_toy_engine")
sys.modules[toy.__name__] = toy


class Mode(enum.Enum):
    A = "a"
    B = "b"
    PLACEHOLDER = None


def _toy_class(name, bases, fields, frozen=True):
    cls = dataclasses.make_dataclass(name, fields, bases=bases, frozen=frozen, kw_only=True)
    cls.__module__ = toy.__name__
    cls.__qualname__ = name
    setattr(toy, name, cls)
    return cls


ToyBase = _toy_class("KVCacheSpec", (), [("block_size", int), ("is_draft", bool, dataclasses.field(default=False, compare=False))])
ToyFull = _toy_class("FullAttentionSpec", (ToyBase,), [("num_kv_heads", int, dataclasses.field(default=1)), ("brand_new", "int | None", dataclasses.field(default=None))])
ToyOdd = _toy_class("OddCacheSpec", (ToyBase,), [("mode", Mode, dataclasses.field(default=Mode.A)), ("width", int)])
ToyContainer = _toy_class("UniformTypeKVCacheSpecs", (ToyBase,), [("kv_cache_specs", dict)])


class ToyEngine:
    name = "toy"
    version = "1"

    def spec_classes(self):
        return surface.spec_subclasses(ToyBase)


def test_discovery_walks_subclasses_not_a_list():
    names = [c.__name__ for c in ToyEngine().spec_classes()]
    assert names == ["KVCacheSpec", "FullAttentionSpec", "OddCacheSpec", "UniformTypeKVCacheSpecs"]


def test_discovery_ignores_classes_their_module_does_not_expose():
    @dataclasses.dataclass(frozen=True)
    class Local(ToyBase):  # a function's local class is not the engine's
        pass

    assert Local not in ToyEngine().spec_classes()


def test_unclassified_names_kinds_and_fields_and_says_where():
    items = {u.name: u for u in surface.unclassified(ToyEngine())}
    assert set(items) == {"FullAttentionSpec.brand_new", "OddCacheSpec"}
    field = items["FullAttentionSpec.brand_new"]
    assert field.kind == "FullAttentionSpec" and field.field == "brand_new"
    assert "reference/specs.py" in field.message and "role table" in field.message
    assert "ROLE-COVER-1" in field.message
    kind = items["OddCacheSpec"]
    assert kind.field is None and "CONTAINER_KINDS" in kind.message and "width" in kind.message


def test_coverage_rows_and_summary():
    rows = {r.key: r for r in surface.coverage_rows(ToyEngine())}
    assert rows["FullAttentionSpec.num_kv_heads"].role == "layout"
    assert rows["KVCacheSpec.is_draft"].role == "annotation (any)"
    assert rows["FullAttentionSpec.brand_new"].role == surface.UNCLASSIFIED
    assert rows["OddCacheSpec.width"].status == surface.UNCLASSIFIED
    assert rows["UniformTypeKVCacheSpecs.kv_cache_specs"].role == "container"
    summary = surface.coverage_summary(ToyEngine())
    assert "2 unclassified" in summary and "FullAttentionSpec.brand_new" in summary
    assert "\n" not in summary


def test_engine_objects_come_from_the_engines_own_field_types():
    seen = set()

    @settings(max_examples=80, database=None)
    @given(surface.engine_objects(ToyOdd))
    def draw(obj):
        assert isinstance(obj, ToyOdd) and obj.mode is not Mode.PLACEHOLDER
        seen.add((obj.mode, obj.width))

    draw()
    assert {m for m, _ in seen} == {Mode.A, Mode.B}
    assert len({w for _, w in seen}) > 1
    with pytest.raises(surface.CannotGenerate, match="kv_cache_specs"):
        surface.engine_objects(ToyContainer)


def test_field_differences_compares_by_value_including_uncompared_fields():
    a, b = ToyFull(block_size=16), ToyFull(block_size=16, is_draft=True)
    assert a == b  # the engine's equality ignores is_draft
    assert surface.field_differences(a, b) == [("is_draft", False, True)]
    assert surface.field_differences(a, ToyOdd(block_size=16, width=1))[0] == (
        "kind", "FullAttentionSpec", "OddCacheSpec")


def test_reference_engine_is_fully_classified():
    engine = ReferenceEngine()
    assert surface.unclassified(engine) == []
    assert set(engine.spec_classes()) >= set(reference.SPEC_KINDS)
    assert "nothing unclassified" in surface.coverage_summary(engine)


def test_an_adapter_without_spec_classes_is_not_introspected():
    class Plain:
        name, version = "plain", "0"

    assert surface.unclassified(Plain()) == []
    assert "not checked" in surface.coverage_summary(Plain())


def test_domain_for_takes_the_engines_values():
    class Narrow(ReferenceEngine):
        def value_domains(self):
            return {"KVDtype": (reference.KVDtype.BFLOAT16,), "KVQuantMode": (reference.KVQuantMode.NONE,)}

    domain = strat.domain_for(Narrow())
    assert domain.values_of("KVDtype") == (reference.KVDtype.BFLOAT16,)
    assert domain.values_of("MambaType") == tuple(reference.MambaType)

    @settings(max_examples=30, database=None)
    @given(strat.specs(reference.FullAttentionSpec, domain))
    def draw(spec):
        assert spec.dtype is reference.KVDtype.BFLOAT16 and spec.kv_quant_mode is reference.KVQuantMode.NONE

    draw()


# -- vLLM --------------------------------------------------------------------

def _vllm():
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    from kvcontract.conformance.engines.protocol import EngineUnavailable, load_engine

    try:
        return load_engine("vllm")
    except EngineUnavailable as exc:
        pytest.skip(f"vLLM is not importable here ({exc})")


@pytest.mark.vllm
def test_vllm_surface_is_found_and_classified():
    engine = _vllm()
    names = {c.__name__ for c in engine.spec_classes()}
    assert {"HiddenStateCacheSpec", "CircularBufferSpec", "HiSparseHotSpec", "HiSparseResidentSpec",
            "UniformTypeKVCacheSpecs", "MambaSpec", "AttentionSpec", "KVCacheSpec"} <= names
    if engine.version == "0.34.0":
        assert len(names) == 17  # 15 concrete classes and two bases
        assert surface.unclassified(engine) == []


@pytest.mark.vllm
def test_a_field_added_to_a_vllm_class_is_named(monkeypatch):
    engine = _vllm()
    interface = engine.interface
    patched = dataclasses.make_dataclass(
        "MambaSpec", [("conv_kernel_width", int, dataclasses.field(default=4))],
        bases=(interface.MambaSpec,), frozen=True)
    patched.__module__ = interface.__name__
    monkeypatch.setattr(interface, "MambaSpec", patched)
    items = surface.unclassified(engine)
    assert [u.name for u in items] == ["MambaSpec.conv_kernel_width"]
    assert "conv_kernel_width" in surface.coverage_summary(engine)


@pytest.mark.vllm
def test_engine_objects_of_every_vllm_class():
    engine = _vllm()
    for cls in engine.spec_classes():
        if cls.__name__ in reference.CONTAINER_KINDS:
            continue

        _draws_only(surface.engine_objects_for(engine, cls), cls)()


def _draws_only(strategy, cls):
    @settings(max_examples=5, database=None, deadline=None)
    @given(strategy)
    def draw(obj):
        assert type(obj) is cls

    return draw


def test_a_kind_the_adapter_cannot_build_is_drawn_from_its_own_class_not_converted():
    """vLLM 0.10.0's MambaSpec requires a ``dtype`` the contract has no field for: the adapter
    declares the kind unsupported, so ROLE-COVER-1 draws that class's objects from its own fields
    for the role-free merge, rather than convert a reference MambaSpec (a kit error in that release)."""
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.run import execution

    base = _toy_class("KVCacheSpec", (), [("block_size", int)])
    old_mamba = _toy_class("MambaSpec", (base,), [("shapes", tuple), ("dtype", str)])

    class OldRelease(ReferenceEngine):
        def spec_classes(self):
            return [base, old_mamba]

        def unsupported_kinds(self):
            return {reference.MambaSpec: "requires dtype, which the contract has no value for"}

        def to_engine(self, spec):
            if isinstance(spec, reference.MambaSpec):
                raise TypeError("MambaSpec.__init__() missing 1 required positional argument: 'dtype'")
            return super().to_engine(spec)

        def merge(self, objs):
            return objs[0] if objs and isinstance(objs[0], old_mamba) else super().merge(objs)

    try:
        records, _ = execution.run_law(OldRelease(), law("ROLE-COVER-1"), "quick", 0, None)
    finally:
        toy.KVCacheSpec = ToyBase  # the module's classes as the other tests know them
        del toy.MambaSpec
    assert not [r for r in records if r.status == "error"], [r.message for r in records]
    assert "unclassified:MambaSpec:dtype" in {r.signature for r in records if r.status == "fail"}
