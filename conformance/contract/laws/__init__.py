"""The suite: every engine-checkable clause's law, in SPEC.md order.

This module composes the chapters' laws (:mod:`~kvcontract.conformance.contract.laws.chapters`
for MERGE, ERROR, UNIFORM and GROUP; :mod:`~kvcontract.conformance.contract.laws.dispatch`
for DISPATCH). A new chapter's laws are added here, nowhere else.
"""

from __future__ import annotations

from kvcontract.conformance.contract.laws.chapters import MERGE_LAWS
from kvcontract.conformance.contract.laws.dispatch import DISPATCH_LAWS
from kvcontract.conformance.contract.model import Law

LAWS: tuple[Law, ...] = (*MERGE_LAWS, *DISPATCH_LAWS)
"""Every law, in SPEC.md order."""

DERIVED: dict[str, tuple[str, ...]] = {
    "ERROR-OPTIMIZE-1": ("ERROR-DETECT-1", "ERROR-TYPE-1", "ERROR-KIND-1", "UNIFORM-NORAISE-1"),
}
"""Clauses judged from others: ERROR-OPTIMIZE-1 fails when a finding of one of
these under python -O does not reproduce in the normal interpreter."""

CLAUSE_ORDER: dict[str, int] = {law.clause: i for i, law in enumerate(LAWS)}


def law(clause_id: str) -> Law:
    """The law of ``clause_id``; ``KeyError`` when the clause has none."""
    for candidate in LAWS:
        if candidate.clause == clause_id:
            return candidate
    raise KeyError(f"no law for clause {clause_id!r}")


def known_clauses() -> set[str]:
    """Clause IDs a run can select: every law's and every derived clause's."""
    return {candidate.clause for candidate in LAWS} | set(DERIVED)
