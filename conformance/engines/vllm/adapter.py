"""The engine factory of a declared engine (a fork's or plugin's one declaration module names its
``factory`` with it); the adapter itself is imported only when the factory is called, so reading a
declaration stays light."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvcontract.conformance.engines.vllm.homes import EngineDeclaration


def adapter_factory(declaration: EngineDeclaration) -> Callable[..., Any]:
    """The engine factory of a declared engine (``factory(source_path=None)``, as
    ``protocol.load_engine`` calls it); the adapter is imported only when it is called."""
    def factory(source_path: Any = None) -> Any:
        from kvcontract.conformance.engines.vllm.engine import VllmEngine

        return VllmEngine(source_path, declaration)

    factory.__doc__ = f"The adapter for {declaration.name} ({declaration.base or declaration.distribution})."
    return factory
