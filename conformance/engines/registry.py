"""Engine names as the command lines accept them: builtins, installed entry
points, ``package.module:factory``, and ``mutant:<name>`` from the catalogue.

Only the command lines and their workers import this module; the laws and the
runner's judging code never see the mutant catalogue.
"""

from __future__ import annotations

from kvcontract.conformance.engines.declared import DECLARED_ENGINES, declaration_of, engine_env
from kvcontract.conformance.engines.mutants import KNOWN_SURVIVORS, MUTANTS, load_mutant
from kvcontract.conformance.engines.protocol import Engine, engine_names, load_engine, remember_ref


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


__all__ = ["DECLARED_ENGINES", "all_engine_names", "declaration_of", "engine_env", "resolve_engine"]
