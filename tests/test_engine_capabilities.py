"""Declared capabilities (``engines/protocol.py``): optional protocols checked with
``isinstance``, the name an engine was loaded by, and bundled expectations keyed on the
engine's declared distribution, not on its display name."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kvcontract.conformance.contract import strategies, surface
from kvcontract.conformance.engines import protocol
from kvcontract.conformance.engines.protocol import (
    DistributionIdentity,
    GroupingAvailability,
    Introspectable,
    RoutingEngine,
    SourceInfo,
    ValueDomains,
    ValueIntrospectable,
    engine_ref,
    load_engine,
    remember_ref,
)
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.engines.registry import resolve_engine
from kvcontract.conformance.reports.expectations import XFAILS_DIR, bundled_xfails, default_xfails
from kvcontract.conformance.run.tasks import engine_info_task
from kvcontract.reference import KVDtype


def test_the_reference_declares_what_it_implements() -> None:
    engine = ReferenceEngine()
    assert isinstance(engine, protocol.Engine)
    assert isinstance(engine, Introspectable) and isinstance(engine, RoutingEngine)
    for capability in (GroupingAvailability, ValueDomains, ValueIntrospectable, SourceInfo, DistributionIdentity):
        assert not isinstance(engine, capability), capability


def test_surface_keeps_the_introspection_protocols() -> None:
    assert surface.Introspectable is Introspectable
    assert surface.ValueIntrospectable is ValueIntrospectable


class Declaring(ReferenceEngine):
    """Declares grouping unavailable and a narrower dtype domain."""

    def grouping_unavailable(self) -> str | None:
        return "no grouping in this test"

    def value_domains(self) -> Mapping[str, Sequence[Any]]:
        return {"KVDtype": (KVDtype.FLOAT16,)}


def test_declared_capabilities_are_honoured() -> None:
    from kvcontract.conformance.contract.laws.group import _needs_grouping

    engine = Declaring()
    assert isinstance(engine, GroupingAvailability) and isinstance(engine, ValueDomains)
    assert not isinstance(engine, ValueIntrospectable)  # value_domains alone is not the whole surface
    assert _needs_grouping(engine) == "no grouping in this test"
    assert _needs_grouping(ReferenceEngine()) is None
    assert strategies.domain_for(engine).values_of("KVDtype") == (KVDtype.FLOAT16,)
    assert len(strategies.domain_for(ReferenceEngine()).values_of("KVDtype")) > 1


def test_an_engine_named_vllm_of_another_distribution_gets_no_bundled_expectations() -> None:
    assert default_xfails("vllm", "0.34.0") == XFAILS_DIR / "vllm-0.34.0.toml"
    assert (XFAILS_DIR / "vllm-0.34.0.toml").exists()
    fork = load_engine("tests.engines.named_vllm:fork")
    undeclared = load_engine("tests.engines.named_vllm:undeclared")
    assert (fork.name, fork.version) == (undeclared.name, undeclared.version) == ("vllm", "0.34.0")
    assert isinstance(fork, DistributionIdentity) and fork.distribution == "acme-vllm"
    assert not isinstance(undeclared, DistributionIdentity)
    assert bundled_xfails(fork) is None and bundled_xfails(undeclared) is None
    assert default_xfails(None, "0.34.0") is None
    info = engine_info_task({"engine": "tests.engines.named_vllm:fork"}, lambda _event: None)
    assert info["name"] == "vllm" and info["expectations"] is None and info["source"] is None

    class Vllm(ReferenceEngine):
        name = "anything"
        version = "0.34.0"
        distribution = "vLLM"  # the distribution's name, normalized: vllm

    assert bundled_xfails(Vllm()) == XFAILS_DIR / "vllm-0.34.0.toml"


def test_loading_records_the_name_it_was_loaded_by() -> None:
    assert engine_ref(ReferenceEngine()) == "reference"  # not loaded: its name
    target = "kvcontract.conformance.engines.reference:ReferenceEngine"
    assert engine_ref(load_engine(target)) == target
    assert engine_ref(resolve_engine("reference")) == "reference"
    mutant = resolve_engine("mutant:drops-annotation")
    assert engine_ref(mutant) == "mutant:drops-annotation" == mutant.name
    assert not hasattr(mutant, "kvcontract_ref")  # recorded by the loader, not patched onto the engine


class Slotted:
    """An engine object that takes no attribute and no weak reference (``__slots__``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def test_an_engine_that_takes_no_attribute_and_no_weakref_is_recorded_too() -> None:
    engine = Slotted("slotted")
    with pytest.raises(TypeError):
        weakref.ref(engine)
    remember_ref(engine, "pkg.mod:slotted")
    assert engine_ref(engine) == "pkg.mod:slotted"  # type: ignore[arg-type]
    assert engine_ref(Slotted("other")) == "other"  # type: ignore[arg-type]
