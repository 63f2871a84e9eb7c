"""What the clauses of a worker share (kvcontract.conformance.run.execution and .facts): the
random phase's draws, per shape and seed, and each example's facts. Sharing must not change
what is judged: the draws are the sequence hypothesis gives a judging body, the facts what
the uncached functions compute."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, seed

from kvcontract import reference
from kvcontract.conformance.contract.codec import spec_to_json
from kvcontract.conformance.contract.laws import LAWS, law
from kvcontract.conformance.contract.model import domain_of
from kvcontract.conformance.contract.systematic import exercised
from kvcontract.conformance.engines.registry import resolve_engine
from kvcontract.conformance.run import execution, facts


@pytest.fixture(scope="module")
def domain():
    return domain_of(resolve_engine("reference"))


def _draw_with_a_judging_body(law_, domain, n: int, seed_value: int) -> list:
    """The draws hypothesis gives a body that does work and swallows what it raises, as the
    random phase's judging did before the draws were shared."""
    seen: list = []

    @execution._hypothesis_settings(n, shrink=False)
    @seed(seed_value)
    @given(law_.strategy(domain))
    def probe(ex) -> None:
        seen.append(ex.to_json())
        try:
            raise ValueError("a judged example that failed")
        except ValueError:
            pass

    probe()
    return seen


@pytest.mark.parametrize("clause", ["MERGE-UNION-1", "ERROR-DETECT-1", "GROUP-MERGED-1", "DISPATCH-CAUSAL-1"])
def test_shared_draws_are_what_a_judging_body_is_given(clause, domain):
    execution._DRAWN.clear()
    drawn = execution.drawn_examples(law(clause), domain, 30, 3)
    assert len(drawn) == 30
    assert [ex.to_json() for ex in drawn] == _draw_with_a_judging_body(law(clause), domain, 30, 3)


def test_clauses_of_one_shape_judge_the_same_draws_and_others_their_own(domain):
    execution._DRAWN.clear()
    by_strategy: dict = {}
    for law_ in LAWS:
        by_strategy.setdefault(law_.strategy, []).append(law_)
    shared = next(group for group in by_strategy.values() if len(group) > 2)
    first, *rest = (execution.drawn_examples(law_, domain, 20, 0) for law_ in shared)
    assert all(other is first for other in rest)  # one draw, the same objects
    other_shape = next(group[0] for s, group in by_strategy.items() if s is not shared[0].strategy
                       and group[0].example_type is shared[0].example_type)
    assert execution.drawn_examples(other_shape, domain, 20, 0) is not first
    assert execution.drawn_examples(shared[0], domain, 20, 1) is not first  # another seed, another draw


def test_the_random_phase_judges_every_draw():
    engine = resolve_engine("reference")
    law_ = law("MERGE-UNION-1")
    execution._DRAWN.clear()
    _, quick = execution.run_law(engine, law_, "quick", 0, None)
    _, default = execution.run_law(engine, law_, "default", 0, None)
    drawn = execution.drawn_examples(law_, domain_of(engine), execution.PROFILES["default"], 0)
    assert default.examples - quick.examples == len(drawn) > 0


def _specs():
    full = reference.FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=reference.KVDtype.BFLOAT16)
    return [full, dataclasses.replace(full, non_causal=True), dataclasses.replace(full, block_size=32),
            reference.MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=reference.KVDtype.BFLOAT16)]


def test_a_specs_json_is_encoded_once_and_handed_out_fresh():
    spec = _specs()[1]
    first = facts.spec_json(spec)
    assert first == spec_to_json(spec)
    first["block_size"] = 999  # a witness changed by its holder changes no other
    assert facts.spec_json(spec) == spec_to_json(spec)


def test_pairs_are_those_exercised_whatever_the_order_and_repetition():
    specs = _specs()
    for members in [specs[:2], specs[1:3], specs, [specs[0], specs[0]], [specs[1], specs[0], specs[1]]]:
        for order in itertools.permutations(members):
            assert facts.pairs_of(list(order)) == frozenset(exercised(list(order))), order
    table = [specs[0]] * 40 + [specs[2]] * 40  # a table repeats its layers' spec objects
    assert exercised(table) == exercised([specs[0], specs[2]]) == exercised([specs[0], specs[0], specs[2]])
    assert exercised([specs[0]] * 8) == exercised([specs[0]])
    # equal values, other objects: remembered apart, and the same answer
    copy = dataclasses.replace(specs[1])
    assert copy is not specs[1] and facts.pairs_of([specs[0], copy]) == facts.pairs_of([specs[0], specs[1]])


def test_read_back_answers_are_keyed_by_type_and_value():
    conversion = pytest.importorskip("kvcontract.conformance.engines.vllm.conversion")
    key = conversion._answer_key
    assert key(int, [1], None) != key(int, [True], None)  # an engine answering True for 1 is read back as such
    assert key(int, [0.0], None) != key(int, [-0.0], None)
    assert key(int, [1], None) != key(float, [1], None)
    assert key(int, [1], None) != key(int, [1], 1)  # the page padding is part of the answer
    assert key(int, [[1, 2]], None) is None  # a list: read back afresh each time
    assert key(int, [reference.KVDtype.BFLOAT16], None) == key(int, [reference.KVDtype.BFLOAT16], None)


def test_the_store_keeps_a_checks_shapes_for_the_next_one(tmp_path, monkeypatch):
    """What a check's workers wrote is linked, claimed, into the next check's directory; the store
    keeps its newest files and drops other kit sources' stores; no cache, no store."""
    from kvcontract.conformance.contract.strategies import Domain
    from kvcontract.conformance.run import share

    monkeypatch.setenv("KVCONTRACT_CACHE_DIR", str(tmp_path / "cache"))
    store = share.store_dir()
    assert store is not None and store.parent == tmp_path / "cache" / "share"
    stale = store.parent / "0123456789abcdef"
    stale.mkdir(parents=True)
    (stale / "old-producible-x-0-0.pkl").write_bytes(b"old")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    key = share.domain_key("producible", Domain())
    assert key.startswith("producible-") and key == share.domain_key("producible", Domain())
    (first / f"table-{key}-0-0.pkl").write_bytes(b"examples")
    share.keep_run(first, store)
    assert not stale.exists() and (store / f"table-{key}-0-0.pkl").read_bytes() == b"examples"
    assert share.seed_run(second, store) == 1
    assert (second / f"table-{key}-0-0.pkl").read_bytes() == b"examples"
    assert (second / f"table-{key}-0-0.claim").exists()  # claimed: no worker works it out again
    monkeypatch.setenv("KVCONTRACT_CACHE_DIR", "off")
    assert share.store_dir() is None and share.seed_run(second, None) == 0
