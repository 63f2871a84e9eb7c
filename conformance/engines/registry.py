"""Engine names as the command lines accept them: builtins, installed entry
points, ``package.module:factory``, and ``mutant:<name>`` from the catalogue.

Only the command lines and their workers import this module; the laws and the
runner's judging code never see the mutant catalogue.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kvcontract.conformance.engines import environments
from kvcontract.conformance.engines.mutants import KNOWN_SURVIVORS, MUTANTS, load_mutant
from kvcontract.conformance.engines.protocol import (
    Engine,
    engine_names,
    load_engine,
    remember_ref,
    split_source,
)
from kvcontract.conformance.engines.vllm.homes import EngineDeclaration

DECLARED_ENGINES: dict[str, str] = {
    "vllm": "kvcontract.conformance.engines.vllm.homes:VLLM",
    "aphrodite": "kvcontract.conformance.engines.aphrodite:DECLARATION",
    "vllm-ascend": "kvcontract.conformance.engines.vllm_ascend:DECLARATION",
}
"""Engines built on vLLM's spec layer -> their declaration (pure data: reading one imports no
engine). Each is also a builtin engine name (``protocol.BUILTIN_ENGINES``)."""


def resolve_engine(name: str) -> Engine:
    """The engine called ``name``; ``mutant:<key>`` names a catalogue mutant. The name is
    recorded as the one that loads the engine again
    (:func:`~kvcontract.conformance.engines.protocol.engine_ref`).

    Raises :class:`~kvcontract.conformance.engines.protocol.UnknownEngine` or
    :class:`~kvcontract.conformance.engines.protocol.EngineUnavailable`.
    """
    if name.startswith("mutant:"):
        mutant = load_mutant(name.removeprefix("mutant:"))
        remember_ref(mutant, name)
        return mutant
    return load_engine(name)


def all_engine_names() -> list[str]:
    """Every name ``resolve_engine`` accepts, but ``package.module:factory``."""
    return [*engine_names(), *(f"mutant:{k}" for k in [*MUTANTS, *KNOWN_SURVIVORS])]


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
