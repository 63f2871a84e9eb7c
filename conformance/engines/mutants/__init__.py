"""The mutant catalogue: the reference engine with one realistic defect each.

A conformance suite is only as good as the bugs it catches. Each mutant here is
an ordinary engine behind the :class:`~kvcontract.conformance.engines.protocol.Engine`
protocol — the :class:`~kvcontract.conformance.engines.reference.ReferenceEngine`
with one operation (``merge``, ``is_uniform``, ``group_layers``, ``plan_layers``,
``page_size``, ``route``) overridden to carry one defect — so ``kvcontract check --engine
mutant:<name>`` runs the suite against it like against any engine, and
``kvcontract mutants`` (:mod:`~kvcontract.conformance.power.hunt`) runs it
against all of them and reports which clause killed each one. A user writes a
mutant the same way: subclass :class:`Mutant`, override one operation, set
``key``, register it (``@_register``), in the module of what it mutates.

Mutant names resolve in :mod:`kvcontract.conformance.engines.registry`, which only the
command lines (and their workers) import: no law knows the catalogue.

Every mutant declares ``description`` (its defect, one line), ``imitates`` (the
real-world change it reproduces, or ``""``) and ``expected_clauses`` (the
clauses its defect violates; the suite must fail at least one of them).

The catalogue is a package: :mod:`.base` holds :class:`Mutant`, the registry and
loading; the mutants live by what they mutate, in catalogue order: :mod:`.merge`,
:mod:`.page_size`, :mod:`.uniformity`, :mod:`.grouping`, :mod:`.planning`, :mod:`.routing`,
:mod:`.rare_branches` (defects behind rare branches, for the symbolic mode) and
:mod:`.strengthened` (the strengthened oracles and the new kinds); then the known
survivors of :mod:`.value_branches` (defects behind a value branch, for the symbolic value
groups). Importing this package registers all of them.
"""

from __future__ import annotations

from kvcontract.conformance.engines.mutants.base import (
    KNOWN_SURVIVORS,
    MUTANTS,
    Mutant,
    load_mutant,
    mutant_class,
)

# The catalogue, in its order: each module registers its mutants when imported.
# isort: off
from kvcontract.conformance.engines.mutants import merge  # noqa: F401
from kvcontract.conformance.engines.mutants import page_size  # noqa: F401
from kvcontract.conformance.engines.mutants import uniformity  # noqa: F401
from kvcontract.conformance.engines.mutants import grouping  # noqa: F401
from kvcontract.conformance.engines.mutants import planning  # noqa: F401
from kvcontract.conformance.engines.mutants import routing  # noqa: F401
from kvcontract.conformance.engines.mutants import rare_branches  # noqa: F401
from kvcontract.conformance.engines.mutants import strengthened  # noqa: F401
from kvcontract.conformance.engines.mutants import value_branches  # noqa: F401
# isort: on

__all__ = ["KNOWN_SURVIVORS", "MUTANTS", "Mutant", "load_mutant", "mutant_class"]
