"""vLLM 0.34.0 with the seed's regression put back: ``MLAAttentionSpec.merge`` takes
``non_causal_multi_token_decode`` from ``specs[0]`` instead of unioning it.

``kvcontract check --engine tests.engines.seed_regression:factory`` must fail with a
finding that names the field, even with the bundled 0.34.0 expectations.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def factory() -> Any:
    from kvcontract.conformance.engines.vllm.engine import VllmEngine

    engine = VllmEngine()
    mla = engine.interface.MLAAttentionSpec
    original = mla.merge.__func__

    def merge(cls: Any, specs: list[Any]) -> Any:
        merged = original(cls, specs)
        return dataclasses.replace(merged, non_causal_multi_token_decode=specs[0].non_causal_multi_token_decode)

    mla.merge = classmethod(merge)
    return engine
