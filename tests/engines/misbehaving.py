"""Engines that misbehave the way untrusted engine code does, for the supervisor's meta-tests.

- ``hanging``: merge of three specs never returns;
- ``aborting``: merge of an MLA spec kills the interpreter (``os.abort()``);
- ``broken_adapter``: the adapter cannot convert a MambaSpec (the kit's own failure).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

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


def hanging() -> HangingEngine:
    return HangingEngine()


def aborting() -> AbortingEngine:
    return AbortingEngine()


def broken_adapter() -> BrokenAdapter:
    return BrokenAdapter()
