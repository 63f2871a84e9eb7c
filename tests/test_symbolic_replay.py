"""Engines CrossHair cannot replay (issue 26, item 4): an engine that writes into its inputs, or
whose answers change from call to call, is a finding of the clause it breaks, never an aborted
search, and never corrupts the kit's own examples."""

from __future__ import annotations

import pytest

from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.run import execution
from kvcontract.conformance.run.symbolic.replay import replay_failed
from kvcontract.conformance.run.symbolic.search import Search
from tests.engines.misbehaving import flip_flopping, wrapping_mutator


def test_a_wrapping_adapter_cannot_reach_the_kits_specs_so_writing_inputs_is_merge_pure_only():
    """Before the kit handed adapters copies, this engine rewrote the building blocks: the
    search ended "NotDeterministic" after reporting findings on specs the kit had never drawn
    (pages smaller than their content)."""
    search = Search(wrapping_mutator(), operations=["merge"])
    search.run(None, 300)
    clauses = {clause for clause, _ in search.records}
    assert clauses == {"MERGE-PURE-1"}, sorted(search.records)
    assert all(sig.startswith("mutated-inputs:") for _, sig in search.records)
    assert not search.errors and sum(g.stats.replay_failures for g in search.groups) == 0


def test_check_judges_the_wrapping_mutator_on_untouched_examples():
    engine = wrapping_mutator()
    for clause in ("MERGE-PURE-1", "MERGE-ORDER-1", "MERGE-AGREE-1"):
        records, run = execution.run_law(engine, law(clause), "quick", 0, None)
        bad = {r.signature for r in records if r.status == "fail"}
        if clause == "MERGE-PURE-1":
            assert bad and all(s.startswith("mutated-inputs:") for s in bad)
        else:
            assert not bad, (clause, sorted(bad))  # the inputs it rewrote were copies


def test_a_replay_failure_becomes_the_nondeterministic_engines_finding():
    engine = flip_flopping()
    search = Search(engine, operations=["merge"], kinds=["FullAttentionSpec"], clauses=["MERGE-AGREE-1"])
    group = search.groups[0]
    search.run(None, 30)
    assert group.recent
    search.records.clear()
    root = group.root
    from crosshair.util import NotDeterministic

    replay_failed(search, group, NotDeterministic())
    (clause, sig), = search.records
    assert clause == "MERGE-AGREE-1" and sig == "nondeterministic:FullAttentionSpec"
    record = search.records[(clause, sig)]
    assert record.witness and record.snippet and "differently" in record.message
    assert group.root is not root and group.stats.replay_failures == 1 and not group.recent


def test_a_search_survives_a_path_crosshair_cannot_replay(monkeypatch: pytest.MonkeyPatch):
    """A deterministic engine: no cause found, one error record (the kit's, not a finding), and
    the search goes on with a fresh path tree."""
    import crosshair.core
    from crosshair.util import NotDeterministic

    real = crosshair.core.explore_loop
    calls = {"n": 0}

    def failing_once(options, root, run_path):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            real(options, root, run_path)
            raise NotDeterministic()
        return real(options, root, run_path)

    monkeypatch.setattr(crosshair.core, "explore_loop", failing_once)
    search = Search(ReferenceEngine(), operations=["merge"], kinds=["FullAttentionSpec", "SlidingWindowSpec"])
    search.run(None, 60)
    assert calls["n"] > 2  # the search went on after the failure
    assert not search.records
    (error,) = search.errors.values()
    assert error.status == "error" and error.signature == "kit-error:NotDeterministic"
    assert "could not replay" in error.message and error.witness
    assert sum(g.stats.replay_failures for g in search.groups) == 1
