"""Inputs derived from the corpus (issue 39): real tables with one layer changed at real positions
(one-field variations), tables whose two kinds are moved to the counts the engine's grouping tests,
and members holding three values of one field (both synthetic). Each kills the catalogue mutant
written for it, which nothing else kills."""

from __future__ import annotations

from collections import Counter

import pytest

from kvcontract.conformance.contract import inputs
from kvcontract.conformance.contract.corpus import use_corpus
from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.engines.mutants import load_mutant
from kvcontract.conformance.engines.vllm.corpus import SHIPPED_DIR
from kvcontract.conformance.run import execution

CORPUS = SHIPPED_DIR / "vllm-0.34.0.json.gz"


@pytest.fixture(autouse=True)
def _corpus():  # type: ignore[no-untyped-def]
    use_corpus(str(CORPUS))
    yield
    use_corpus(None)


def test_count_tables_hold_two_kinds_at_the_ratios_grouping_tests_in_the_tables_naming_scheme() -> None:
    examples = inputs.count_examples(law("PLAN-MATCH-1"))
    assert examples and inputs.count_examples(law("MERGE-ORDER-1")) == ()
    ratios = set()
    for ex in examples:
        counts = sorted(Counter(spec for _, spec in ex.table).values())
        assert len(counts) == 2 and counts[0] == inputs.COUNT_BASE
        ratios.add(counts[1] - counts[0])
        names = [n for n, _ in ex.table]
        assert len(set(names)) == len(names) and all(any(c.isdigit() for c in n) for n in names)
        assert inputs.classify(ex) == "synthetic"
    assert ratios == set(inputs.COUNT_STEPS)
    # just below and at the 1.5 ratio vLLM's padding heuristic tests
    assert inputs.COUNT_BASE + 3 < inputs.COUNT_BASE * 1.5 <= inputs.COUNT_BASE + 4


def test_message_examples_hold_three_distinct_values_of_their_field() -> None:
    examples = inputs.message_examples(law("ERROR-MESSAGE-1"))
    assert examples and inputs.message_examples(law("PLAN-MATCH-1")) == ()
    for ex in examples:
        assert len(ex.specs) == 3 and len({type(s) for s in ex.specs}) == 1
        assert len({repr(getattr(s, ex.field)) for s in ex.specs}) == 3


def test_position_tables_change_one_layer_of_a_real_table_at_real_positions() -> None:
    examples = inputs.position_examples(law("PLAN-MATCH-1"))
    assert examples and inputs.position_examples(law("ERROR-DETECT-1")) == ()
    deep = 0
    for ex in examples:
        assert inputs.classify(ex) == "variation"  # one field of one layer of a corpus table
        deep += len(ex.table) > 64
    assert deep  # beyond the 64th layer too


@pytest.mark.parametrize(("mutant", "clause", "feed", "input_class"), [
    ("mean-group-size", "PLAN-MATCH-1", "count_examples", "synthetic"),
    ("message-first-two-values", "ERROR-MESSAGE-1", "message_examples", "synthetic"),
    ("sampled-uniformity", "PLAN-MATCH-1", "position_examples", "variation"),
])
def test_the_mutant_of_each_input_class_dies_by_it_and_survives_without_it(
        mutant: str, clause: str, feed: str, input_class: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = load_mutant(mutant)
    records, _ = execution.run_law(engine, law(clause), "quick", 0, None)
    assert any(r.status == "fail" and r.input == input_class for r in records)
    monkeypatch.setattr(execution, feed, lambda law_: ())
    records, _ = execution.run_law(engine, law(clause), "quick", 0, None)
    assert not any(r.status == "fail" for r in records)


def test_corpus_examples_are_fed_as_the_engine_can_hold_them() -> None:
    """A fork fed the pinned vLLM's corpus: fields its classes lack at their defaults, kinds it
    lacks and variations of a field it lacks left out; the engine's own release loses nothing."""
    from kvcontract.conformance.contract.model import Example
    from kvcontract.conformance.engines.reference import ReferenceEngine
    from kvcontract.reference import FullAttentionSpec, KVDtype, MambaSpec

    class Fork:
        def unsupported_kinds(self) -> list[type]:
            return [MambaSpec]

        def unsupported_fields(self, kind: type) -> frozenset[str]:
            return frozenset({"dcp_sharded"}) if kind is FullAttentionSpec else frozenset()

    full = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.BFLOAT16, dcp_sharded=False)
    default = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.BFLOAT16)
    assert full != default
    held = execution.as_engine_holds(Fork())
    assert held(Example(table=(("a", full),))) == Example(table=(("a", default),))
    assert held(Example(specs=(default, full), field="dcp_sharded")) is None
    mamba = next(s for t in inputs.current_corpus().tables for _, s in t.layers if isinstance(s, MambaSpec))
    assert held(Example(table=(("m", mamba),))) is None
    ex = Example(table=(("a", full),))
    assert execution.as_engine_holds(ReferenceEngine())(ex) is ex


def test_the_contract_s_own_examples_do_not_vary_a_field_the_engine_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """An older release without ``dcp_sharded``: no example of the systematic or random phase moves
    it (the engine cannot hold a layer apart by it; the reference would split by it)."""
    import dataclasses

    from kvcontract.conformance.engines.reference import ReferenceEngine
    from kvcontract.reference import SPEC_KINDS

    class Older(ReferenceEngine):
        def unsupported_fields(self, kind: type) -> frozenset[str]:
            return frozenset({"dcp_sharded"}) if "dcp_sharded" in {f.name for f in dataclasses.fields(kind)} \
                else frozenset()

    defaults = {k: next(f.default for f in dataclasses.fields(k) if f.name == "dcp_sharded")
                for k in SPEC_KINDS if "dcp_sharded" in {f.name for f in dataclasses.fields(k)}}
    seen: list[tuple[str, object]] = []
    judge = execution._Findings.judge

    def spy(self, engine, law_, ex, phase, *args, **kwargs):  # type: ignore[no-untyped-def]
        specs = list(ex.specs) + [s for _, s in ex.table]
        seen.extend((phase, s) for s in specs)
        return judge(self, engine, law_, ex, phase, *args, **kwargs)

    monkeypatch.setattr(execution._Findings, "judge", spy)
    execution.run_law(Older(), law("GROUP-PARTITION-1"), "quick", 0, None)
    phases = {p for p, _ in seen}
    assert "systematic" in phases, phases
    moved = [(p, s) for p, s in seen if type(s) in defaults and s.dcp_sharded != defaults[type(s)]]
    assert not moved, moved[:3]


def test_an_engine_with_one_kind_skips_what_needs_two_and_errs_nowhere() -> None:
    """vLLM before 0.9 has FullAttentionSpec only: ERROR-KIND-1 (two kinds merged) skips with the
    reason, and the laws whose shapes mix kinds among others draw the others (the kit raised
    hypothesis' InvalidArgument there: a kit error on 0.7.0 and 0.8.0)."""
    from kvcontract.conformance.engines.reference import ReferenceEngine
    from kvcontract.reference import SPEC_KINDS, FullAttentionSpec

    class Early(ReferenceEngine):
        def unsupported_kinds(self) -> dict[type, str]:
            return {k: "absent" for k in SPEC_KINDS if k is not FullAttentionSpec}

    engine = Early()
    (skip,), _ = execution.run_law(engine, law("ERROR-KIND-1"), "default", 0, None)
    assert skip.status == "skip" and "one spec kind (FullAttentionSpec)" in skip.message
    for clause in ("UNIFORM-MERGE-1", "UNIFORM-NORAISE-1"):
        records, _ = execution.run_law(engine, law(clause), "default", 0, None)
        assert not [r for r in records if r.status == "error"], [r.message for r in records]


def test_a_release_without_the_uniformity_test_skips_the_uniform_clauses() -> None:
    """vLLM before 0.11 has no is_kv_cache_spec_uniform: the adapter says so and the UNIFORM clauses
    skip with that reason; its refusal (EngineUnavailable, the kit's own) was judged a finding."""
    from kvcontract.conformance.engines.reference import ReferenceEngine

    class Older(ReferenceEngine):
        def uniform_unavailable(self) -> str | None:
            return "older has no is_kv_cache_spec_uniform"

    for clause in ("UNIFORM-MERGE-1", "UNIFORM-NORAISE-1", "UNIFORM-EMPTY-1"):
        (record,), _ = execution.run_law(Older(), law(clause), "quick", 0, None)
        assert (record.status, record.message) == ("skip", "older has no is_kv_cache_spec_uniform"), clause
    records, _ = execution.run_law(ReferenceEngine(), law("UNIFORM-EMPTY-1"), "quick", 0, None)
    assert all(r.status == "pass" for r in records)


def test_a_release_without_merge_skips_the_clauses_that_merge() -> None:
    """vLLM 0.7.0 to 0.8.5 have no ``merge`` on their specs: the adapter says so and every law that
    merges skips with that reason (its AttributeError was judged a finding of each MERGE and ERROR
    clause); ROLE-COVER-1 still runs its drift guard."""
    from kvcontract.conformance.contract.laws import LAWS
    from kvcontract.conformance.engines.reference import ReferenceEngine

    class Oldest(ReferenceEngine):
        def merge_unavailable(self) -> str | None:
            return "oldest has no merge"

        def merge(self, objs: object) -> object:
            raise AttributeError("'FullAttentionSpec' object has no attribute 'merge'")

    merging = [x for x in LAWS if x.clause.startswith(("MERGE-", "ERROR-")) and x.clause != "ERROR-OPTIMIZE-1"]
    assert len(merging) >= 12
    for law_ in merging:
        (record,), _ = execution.run_law(Oldest(), law_, "quick", 0, None)
        assert (record.status, record.message) == ("skip", "oldest has no merge"), law_.clause
    records, _ = execution.run_law(Oldest(), law("ROLE-COVER-1"), "quick", 0, None)
    assert records and all(r.status == "pass" for r in records), [r.message for r in records]
