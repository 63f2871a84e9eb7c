"""Engines that misbehave the way untrusted engine code does, for the supervisor's meta-tests.

- ``hanging``: merge of three specs never returns;
- ``aborting``: merge of an MLA spec kills the interpreter (``os.abort()``);
- ``broken_adapter``: the adapter cannot convert a MambaSpec (the kit's own failure);
- ``wrapping_mutator``: the adapter wraps the spec it is given, and merge doubles every input's
  block size through the wrapper (before the kit handed adapters copies, this rewrote the
  kit's own examples and building blocks: CrossHair could not replay a path);
- ``flip_flopping``: every third merge answers with twice the block size (hidden state).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.reference import KVCacheSpec


class HangingEngine(ReferenceEngine):
    name = "hanging"

    def merge(self, objs: Sequence[Any]) -> Any:
        if len(objs) == 3:
            while True:
                time.sleep(1)
        return super().merge(objs)


class AbortingEngine(ReferenceEngine):
    name = "aborting"

    def merge(self, objs: Sequence[Any]) -> Any:
        if any(type(o).__name__ == "MLAAttentionSpec" for o in objs):
            os.abort()
        return super().merge(objs)


class BrokenAdapter(ReferenceEngine):
    name = "broken-adapter"

    def to_engine(self, spec: KVCacheSpec) -> Any:
        if type(spec).__name__ == "MambaSpec":
            raise RuntimeError("this adapter cannot build a MambaSpec")
        return super().to_engine(spec)


class Wrapped:
    """An engine object that holds the spec it was made from."""

    def __init__(self, spec: KVCacheSpec) -> None:
        self.spec = spec

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Wrapped) and self.spec == other.spec

    def __repr__(self) -> str:
        return f"Wrapped({self.spec!r})"


class WrappingMutator(ReferenceEngine):
    name = "wrapping-mutator"

    def to_engine(self, spec: KVCacheSpec) -> Any:
        return Wrapped(spec)

    def from_engine(self, obj: Any) -> KVCacheSpec:
        return obj.spec if isinstance(obj, Wrapped) else super().from_engine(obj)

    def merge(self, objs: Sequence[Any]) -> Any:
        merged = reference.merge([o.spec for o in objs])
        for o in objs:
            object.__setattr__(o.spec, "block_size", o.spec.block_size * 2)
        return Wrapped(merged)

    def is_uniform(self, objs_by_layer: Any) -> bool:
        return super().is_uniform({n: o.spec for n, o in objs_by_layer.items()})

    def group_layers(self, objs_by_layer: Any) -> Any:
        return super().group_layers({n: o.spec for n, o in objs_by_layer.items()})

    def page_size(self, obj: Any) -> int:
        return super().page_size(obj.spec)


class FlipFlopping(ReferenceEngine):
    name = "flip-flopping"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def merge(self, objs: Sequence[Any]) -> Any:
        self.calls += 1
        merged = super().merge(objs)
        if self.calls % 3 == 0:
            return dataclasses.replace(merged, block_size=merged.block_size * 2)
        return merged


def wrapping_mutator() -> WrappingMutator:
    return WrappingMutator()


def flip_flopping() -> FlipFlopping:
    return FlipFlopping()


def hanging() -> HangingEngine:
    return HangingEngine()


def aborting() -> AbortingEngine:
    return AbortingEngine()


def broken_adapter() -> BrokenAdapter:
    return BrokenAdapter()
