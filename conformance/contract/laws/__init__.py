"""The suite: every engine-checkable clause's law, in SPEC.md order, and what is
derived from the laws' records.

Each chapter's laws live in a module of this package (:mod:`.role`, :mod:`.merge`,
:mod:`.error`, :mod:`.uniform`, :mod:`.group`, :mod:`.plan`, :mod:`.dispatch`; what their oracles
share is :mod:`.common`, their input shapes :mod:`kvcontract.conformance.contract.shapes`);
this module composes them. A new chapter's laws are added to :data:`LAWS` here,
nowhere else. Every table the rest of the kit needs about clauses (the clauses each
symbolic operation group judges, the engine operations each chapter calls, the
clauses judged from others) is derived from the :class:`~kvcontract.conformance.contract.model.Law`
records, never typed twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvcontract.conformance.contract.laws.dispatch import DISPATCH_LAWS
from kvcontract.conformance.contract.laws.error import ERROR_LAWS
from kvcontract.conformance.contract.laws.group import GROUP_LAWS
from kvcontract.conformance.contract.laws.merge import MERGE_LAWS
from kvcontract.conformance.contract.laws.plan import PLAN_LAWS
from kvcontract.conformance.contract.laws.role import ROLE_LAWS
from kvcontract.conformance.contract.laws.uniform import UNIFORM_LAWS
from kvcontract.conformance.contract.model import ENGINE_OPERATIONS, SEARCH_OPERATIONS, Law

LAWS: tuple[Law, ...] = (*ROLE_LAWS, *MERGE_LAWS, *ERROR_LAWS, *UNIFORM_LAWS, *GROUP_LAWS, *PLAN_LAWS, *DISPATCH_LAWS)
"""Every law, in SPEC.md order."""

DERIVED: dict[str, tuple[str, ...]] = {
    derived: tuple(law_.clause for law_ in LAWS if derived in law_.feeds)
    for derived in dict.fromkeys(d for law_ in LAWS for d in law_.feeds)
}
"""Clauses judged from others (each law's ``feeds``): ERROR-OPTIMIZE-1 fails when
a finding of one of its sources under python -O does not reproduce in the normal
interpreter."""

CLAUSE_ORDER: dict[str, int] = {law_.clause: i for i, law_ in enumerate(LAWS)}

OPERATION_CLAUSES: dict[str, tuple[str, ...]] = {
    op: tuple(law_.clause for law_ in LAWS if op in law_.searched) for op in SEARCH_OPERATIONS
}
"""The clauses whose oracles judge each symbolic operation group's paths."""

SEARCHED_CLAUSES: frozenset[str] = frozenset(c for cs in OPERATION_CLAUSES.values() for c in cs)
"""Every clause the symbolic search judges (the laws with ``not_searched`` and the
derived clauses are not)."""

CHAPTER_OPERATIONS: dict[str, frozenset[str]] = {
    chapter: frozenset(op for law_ in LAWS if law_.chapter == chapter for op in law_.operations)
    for chapter in dict.fromkeys(law_.chapter for law_ in LAWS)
}
"""The engine operations each chapter's laws call (the chapter is the clause ID's prefix)."""

SEARCH_OPERATIONS_OF: dict[str, tuple[str, ...]] = {
    engine_op: tuple(op for op in SEARCH_OPERATIONS
                     if any(engine_op in law_.operations and op in law_.searched for law_ in LAWS))
    for engine_op in ENGINE_OPERATIONS
}
"""The symbolic operation groups whose oracles call each engine operation."""


def law(clause_id: str) -> Law:
    """The law of ``clause_id``; ``KeyError`` when the clause has none."""
    for candidate in LAWS:
        if candidate.clause == clause_id:
            return candidate
    raise KeyError(f"no law for clause {clause_id!r}")


def known_clauses() -> set[str]:
    """Clause IDs a run can select: every law's and every derived clause's."""
    return {candidate.clause for candidate in LAWS} | set(DERIVED)


def clauses_for(operation: str, shapes: Iterable[str], *, values_set: bool = True) -> tuple[str, ...]:
    """The clauses the symbolic operation group ``operation`` judges on an example of
    the given shapes, in SPEC.md order; ``values_set=False`` (members that leave the
    differing field unset) leaves out the laws that read its values."""
    wanted = set(shapes)
    return tuple(law_.clause for law_ in LAWS if operation in law_.searched and law_.shape.name in wanted
                 and (values_set or not law_.reads_values))
