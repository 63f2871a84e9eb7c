"""The symbolic search from the corpus (issue 39, item 4): a path picks a real model's table as the
engine's own model code builds it, then keeps it, changes one field of one layer to a value another
corpus spec of its kind has, or inserts a layer of another kind, at the positions real tables have;
the choices are CrossHair forks, so the space is bounded by what the corpus holds."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kvcontract.conformance.contract.corpus import read_corpus, use_corpus
from kvcontract.conformance.contract.inputs import classify
from kvcontract.conformance.contract.model import Example
from kvcontract.conformance.engines.vllm.corpus import SHIPPED_DIR
from kvcontract.conformance.run.symbolic import corpus as sc
from kvcontract.conformance.run.symbolic.choices import Chooser
from kvcontract.conformance.run.symbolic.session import run_symbolic

CORPUS = SHIPPED_DIR / "vllm-0.34.0.json.gz"


class _Coins:
    """CrossHair's state space stood in for by seeded coins."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def smt_fork(self, desc: str = "", probability_true: float = 0.5) -> bool:
        return self.rng.random() < probability_true


@pytest.fixture
def blocks():  # type: ignore[no-untyped-def]
    use_corpus(str(CORPUS))
    yield sc.corpus_blocks(read_corpus(str(CORPUS)), lambda ex: ex)
    use_corpus(None)


def test_paths_are_real_tables_kept_changed_in_one_field_or_given_another_kind(blocks) -> None:  # type: ignore[no-untyped-def]
    by_name = dict(blocks.tables)
    assert len(by_name) >= 50 and max(len(t) for t in by_name.values()) > 64
    seen: Counter[str] = Counter()
    for seed in range(300):
        probe = sc.corpus_probe(Chooser(_Coins(seed)), blocks, lambda ex: ex)
        (ex, clauses), = probe.cases
        assert "PLAN-MATCH-1" in clauses and "GROUP-PARTITION-1" in clauses
        variation = next(f for f in probe.features if f.startswith("variation="))
        seen[variation] += 1
        names = [n for n, _ in ex.table]
        assert len(set(names)) == len(names)
        if variation == "variation=as-built":
            assert ex.model in by_name and ex.table == by_name[ex.model]
            continue
        assert not ex.model
        at = next(f for f in probe.features if f.startswith("at="))
        if variation == "variation=one-field":
            assert classify(Example(table=ex.table)) == "variation", at  # one field of one corpus layer
            seen["none-mixed"] += "none=True" in probe.features
        else:
            inserted = next(f for f in probe.features if f.startswith("inserted="))
            kinds = Counter(type(s).__name__ for _, s in ex.table)
            assert kinds[inserted.removeprefix("inserted=")] >= 1, (at, inserted)
        seen[at] += 1
    assert {"variation=as-built", "variation=one-field", "variation=inserted"} <= set(seen)
    assert {"at=first", "at=last", "at=17th", "at=33rd", "at=65th"} <= set(seen), seen
    assert seen["none-mixed"]  # an optional field set to None on one layer, the others keep a value


def test_insertion_renumbers_the_layers_in_the_table_s_naming_scheme(blocks) -> None:  # type: ignore[no-untyped-def]
    name, layers = next((n, t) for n, t in blocks.tables if len(t) > 20)
    other = next(s for k, specs in blocks.specs.items() for s in specs if k is not type(layers[0][1]))
    out = sc._renumbered(layers, 17, other)
    assert len(out) == len(layers) + 1 and out[17][1] is other
    assert [s for _, s in out[:17]] == [s for _, s in layers[:17]]
    assert [s for _, s in out[18:]] == [s for _, s in layers[17:]]
    assert out[-1][0] != layers[-1][0] and out[17][0] == layers[17][0]  # model.layers.{i}...: shifted by one


def test_a_long_table_mutant_dies_by_the_corpus_group_and_not_by_small_tables() -> None:
    """``sampled-uniformity`` plans a table of more than 16 layers from its first 16: the 2-4 layer
    tables of the ``group`` search never show it; a corpus path does, within a few dozen paths.
    The reference on the same paths: nothing (the control)."""
    kill = run_symbolic("mutant:sampled-uniformity", budget_s=None, iterations=80, optimize="off",
                        operations=["corpus"], use_default_xfails=False, corpus=str(CORPUS), stop_on_finding=True)
    assert {r.clause for r in kill.records if r.status == "fail"} == {"PLAN-MATCH-1"}
    small = run_symbolic("mutant:sampled-uniformity", budget_s=None, iterations=150, optimize="off",
                         operations=["group"], use_default_xfails=False, corpus=str(CORPUS))
    assert not [r for r in small.records if r.status == "fail"]
    control = run_symbolic("reference", budget_s=None, iterations=80, optimize="off", operations=["corpus"],
                           use_default_xfails=False, corpus=str(CORPUS))
    assert control.complete and not control.records
    assert [s.reached_engine for s in control.searched] == [80]
    assert run_symbolic("reference", budget_s=None, iterations=5, optimize="off", operations=["corpus"],
                        use_default_xfails=False).searched == []  # no corpus: the group is left out
