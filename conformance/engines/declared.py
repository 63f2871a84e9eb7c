"""The engines built on vLLM's spec layer that the kit declares (a fork, a plugin): their
declarations by name, and the environment a worker for one runs in. Light: reading a declaration
imports no engine, and nothing here reaches the mutant catalogue (the check's session uses it;
:mod:`.registry` re-exports it for the command lines)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kvcontract.conformance.engines import environments
from kvcontract.conformance.engines.protocol import split_source
from kvcontract.conformance.engines.vllm.homes import EngineDeclaration

DECLARED_ENGINES: dict[str, str] = {
    "vllm": "kvcontract.conformance.engines.vllm.homes:VLLM",
    "aphrodite": "kvcontract.conformance.engines.aphrodite:DECLARATION",
    "vllm-ascend": "kvcontract.conformance.engines.vllm_ascend:DECLARATION",
}
"""Engines built on vLLM's spec layer -> their declaration (pure data: reading one imports no
engine). Each is also a builtin engine name (``protocol.BUILTIN_ENGINES``)."""


def declaration_of(name: str) -> EngineDeclaration | None:
    """The declaration of a declared engine (``NAME`` or ``NAME@DIR``); None for any other."""
    target = DECLARED_ENGINES.get(split_source(name)[0])
    if target is None:
        return None
    module, _, attr = target.partition(":")
    found = getattr(importlib.import_module(module), attr)
    if not isinstance(found, EngineDeclaration):
        raise TypeError(f"{target} is not an EngineDeclaration")
    return found


def engine_env(name: str, base: Mapping[str, str]) -> dict[str, str]:
    """The environment variables a worker for engine ``name`` runs with: ``base``, with the
    engine's declared environment first on its path. Raises
    :class:`~kvcontract.conformance.engines.environments.EnvironmentMissing` (with the install
    step) when that environment is not installed here."""
    declaration = declaration_of(name) if not name.startswith("mutant:") else None
    if declaration is None or declaration.environment is None:
        return dict(base)
    return environments.worker_env(declaration.environment, base, declaration.install)
