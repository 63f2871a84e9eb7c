"""vLLM 0.34.0 with one field added to a spec class, as a release would add it:
``FullAttentionSpec`` gains ``lookahead_tokens``. The drift guard (ROLE-COVER-1) must
name it."""

from __future__ import annotations

import dataclasses
from typing import Any


def factory() -> Any:
    from kvcontract.conformance.engines.vllm.engine import VllmEngine

    engine = VllmEngine()
    interface = engine.interface
    base = interface.FullAttentionSpec

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class FullAttentionSpec(base):  # type: ignore[misc, valid-type]
        lookahead_tokens: int = 0

    FullAttentionSpec.__module__ = interface.__name__
    FullAttentionSpec.__qualname__ = "FullAttentionSpec"
    interface.FullAttentionSpec = FullAttentionSpec
    return engine
