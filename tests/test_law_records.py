"""Meta-tests: the ``Law`` record is the single source of what a clause is (issue 22).

Every table the kit keeps about clauses is derived from the records; these tests
fail when a law is missing from one of them, or when the symbolic search's probes
never build a shape a law declares it searches.
"""

from __future__ import annotations

import random

import pytest

from kvcontract.conformance.contract.laws import (
    CHAPTER_OPERATIONS,
    DERIVED,
    LAWS,
    OPERATION_CLAUSES,
    SEARCH_OPERATIONS_OF,
    SEARCHED_CLAUSES,
    clauses_for,
    known_clauses,
)
from kvcontract.conformance.contract.model import ENGINE_OPERATIONS, SEARCH_OPERATIONS, Law, Shape
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.run.symbolic.choices import Chooser, Rejected
from kvcontract.conformance.run.symbolic.search import Search
from kvcontract.spec import CHAPTERS, load_catalogue


class _RandomSpace:
    """Stands in for CrossHair's state space: each fork is a seeded coin."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def smt_fork(self, desc: str = "", probability_true: float = 0.5) -> bool:
        return self.rng.random() < probability_true


def _probed_clauses(paths: int = 400) -> dict[str, set[str]]:
    """The clauses each symbolic operation group's probes hand to the oracles, on
    ``paths`` random paths per group against the reference engine (the structural groups:
    a value group needs CrossHair's state space, tests/test_symbolic_values.py)."""
    search = Search(ReferenceEngine(), operations=SEARCH_OPERATIONS)
    found: dict[str, set[str]] = {op: set() for op in SEARCH_OPERATIONS}
    rng = random.Random(0)
    for group in search.groups:
        for _ in range(paths):
            try:
                probe = group.build(Chooser(_RandomSpace(rng)))
            except Rejected:
                continue
            for _ex, clauses in probe.cases:
                found[group.stats.operation].update(clauses)
    return found


def test_every_law_is_searched_or_says_why_not():
    for law_ in LAWS:
        assert law_.searched or law_.not_searched, law_.clause
        assert law_.operations, f"{law_.clause} declares no engine operation"


def test_every_searched_law_is_in_the_operation_table():
    for law_ in LAWS:
        for op in law_.searched:
            assert law_.clause in OPERATION_CLAUSES[op], (law_.clause, op)
    assert SEARCHED_CLAUSES == {law_.clause for law_ in LAWS if law_.searched}


def test_the_probes_build_every_shape_a_law_is_searched_on():
    probed = _probed_clauses()
    missing = {op: set(OPERATION_CLAUSES[op]) - probed[op] for op in SEARCH_OPERATIONS}
    assert {op: m for op, m in missing.items() if m} == {}
    extra = {op: probed[op] - set(OPERATION_CLAUSES[op]) for op in SEARCH_OPERATIONS}
    assert {op: e for op, e in extra.items() if e} == {}


def test_every_chapter_has_its_operations_and_a_catalogue_entry():
    chapters = {law_.chapter for law_ in LAWS}
    assert chapters == set(CHAPTER_OPERATIONS)
    assert chapters <= set(CHAPTERS)
    for chapter, ops in CHAPTER_OPERATIONS.items():
        assert ops and ops <= set(ENGINE_OPERATIONS), chapter


def test_every_engine_operation_reaches_the_search_or_is_introspection():
    for op in ENGINE_OPERATIONS:
        if op == "introspect":
            continue
        assert SEARCH_OPERATIONS_OF[op], op


def test_derived_clauses_come_from_the_feeds_and_are_in_the_catalogue():
    catalogue = {c.id for c in load_catalogue()}
    assert DERIVED == {"ERROR-OPTIMIZE-1": ("ERROR-DETECT-1", "ERROR-TYPE-1", "ERROR-KIND-1",
                                            "UNIFORM-NORAISE-1")}
    assert set(DERIVED) <= catalogue
    assert known_clauses() <= catalogue


def test_clauses_for_leaves_out_value_reading_laws_when_the_values_are_unset():
    with_values = clauses_for("merge", ["near-miss"])
    without = clauses_for("merge", ["near-miss"], values_set=False)
    assert "ERROR-MESSAGE-1" in with_values and "ERROR-MESSAGE-1" not in without
    assert set(without) == set(with_values) - {"ERROR-MESSAGE-1"}


def test_a_law_without_search_or_reason_is_refused():
    shape = Shape("nothing", lambda _d: None)
    with pytest.raises(ValueError, match="no symbolic operation"):
        Law("MERGE-ORDER-1", shape, lambda e, x: None, operations=frozenset({"merge"}))
    with pytest.raises(ValueError, match="unknown operations"):
        Law("MERGE-ORDER-1", shape, lambda e, x: None, operations=frozenset({"merg"}), searched=frozenset({"merge"}))
