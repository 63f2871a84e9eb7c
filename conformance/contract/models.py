"""The corpus as the laws' first examples: what makes a defect reachable.

Every engine under check is fed the run's corpus (:func:`~kvcontract.conformance.contract.corpus.use_corpus`:
real models' tables as the engine's own model code builds them), before anything drawn, each
table in the shape the law takes: the table laws one representative per planning class (the same
kinds, page relations, block sizes and allocation values in the same order:
:func:`~kvcontract.conformance.contract.corpus.planning_classes`), the spec laws every distinct
spec and group of them:

- a layer table (GROUP, PLAN): the model's whole table, as the engine's planner sees it; where
  the law's shape is a table whose layers all merge (GROUP-SHARE-1), only a table the contract
  says is uniform;
- one spec (MERGE-IDENTITY-1 and the other one-spec laws): each distinct layer spec;
- compatible members (MERGE, the merge of a group): the distinct specs of each group the
  engine itself forms from the table, as its planner merges them, where the contract says
  they merge (a group of members that do not is GROUP-MERGED-1's finding, judged there).

Other shapes (near misses, incompatible pairs, advisory variants) are the contract's own
inputs: no model builds them on purpose, so they get no model examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvcontract import reference
from kvcontract.conformance.contract.corpus import (
    Corpus,
    current_corpus,
    distinct_tables,
    planning_classes,
)
from kvcontract.conformance.contract.model import Example, Law
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.reference import KVCacheSpec

TABLE_SHAPES = frozenset({"table", "plan-table"})
UNIFORM_TABLE_SHAPES = frozenset({"uniform-table"})
ONE_SPEC_SHAPES = frozenset({"one-spec"})
GROUP_SHAPES = frozenset({"compatible", "advisory"})


def _distinct(specs: list[KVCacheSpec]) -> list[KVCacheSpec]:
    out: list[KVCacheSpec] = []
    seen: set[KVCacheSpec] = set()
    for s in specs:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _merges(specs: list[KVCacheSpec]) -> bool:
    try:
        reference.merge(specs)
    except reference.IncompatibleSpecs:
        return False
    return True


_GROUPED: dict[tuple[int, int], tuple[Engine, tuple[tuple[str, KVCacheSpec], ...], list[list[KVCacheSpec]]]] = {}


def _engine_groups(engine: Engine, table: tuple[tuple[str, KVCacheSpec], ...]) -> list[list[KVCacheSpec]]:
    """The members of each group the engine forms from ``table`` (none when it cannot group it),
    asked once per engine and table (the group shapes share it)."""
    key = (id(engine), id(table))
    held = _GROUPED.get(key)
    if held is None or held[0] is not engine or held[1] is not table:
        held = _GROUPED[key] = (engine, table, _ask_groups(engine, table))
    return held[2]


def _ask_groups(engine: Engine, table: tuple[tuple[str, KVCacheSpec], ...]) -> list[list[KVCacheSpec]]:
    by_name = dict(table)
    try:
        from kvcontract.conformance.contract.laws.common import to_engine  # laws import this module

        groups = engine.group_layers({n: to_engine(engine, s) for n, s in table})
    except Exception:  # noqa: BLE001 - a grouping failure is the GROUP laws' finding, judged there
        return []
    return [[by_name[n] for n in g.layer_names if n in by_name] for g in groups]


_BY_SHAPE: dict[tuple[int, int, str], tuple[Engine, Corpus, tuple[tuple[str, Example], ...]]] = {}
"""Per engine, corpus and shape: its model examples, the same objects for every clause of the shape
(whose answers and facts are remembered by identity)."""


def model_examples(engine: Engine, law_: Law) -> tuple[tuple[str, Example], ...]:
    """``(table name, example)`` for each corpus table in ``law_``'s shape (worked out once per
    engine, corpus and shape: building them grouped each table in the engine)."""
    corpus = current_corpus()
    if corpus is None:
        return ()
    key = (id(engine), id(corpus), law_.shape.name)
    held = _BY_SHAPE.get(key)
    if held is None or held[0] is not engine or held[1] is not corpus:
        held = _BY_SHAPE[key] = (engine, corpus, tuple(_model_examples(engine, corpus, law_.shape.name)))
    return held[2]


def _model_examples(engine: Engine, corpus: Corpus, shape: str) -> Iterator[tuple[str, Example]]:
    tables = [(t, names) for t, names in distinct_tables(corpus) if t.layers]  # a model without KV cache: nothing to plan
    if shape in TABLE_SHAPES or shape in UNIFORM_TABLE_SHAPES:  # one table per planning class
        for table, _ in (c for c in planning_classes(corpus) if c[0].layers):
            if shape in TABLE_SHAPES or reference.is_uniform(table.specs()):
                yield table.name, Example(table=tuple(table.layers), model=table.name)
    elif shape in ONE_SPEC_SHAPES:
        seen: set[KVCacheSpec] = set()
        for table, _ in tables:
            for spec in _distinct([s for _, s in table.layers]):
                if spec not in seen:
                    seen.add(spec)
                    yield table.name, Example(specs=(spec,), model=table.name)
    elif shape in GROUP_SHAPES:
        groups: set[tuple[KVCacheSpec, ...]] = set()
        for table, _ in tables:
            for members in _engine_groups(engine, table.layers):
                distinct = tuple(_distinct(members))
                if len(distinct) > 1 and distinct not in groups and _merges(list(distinct)):
                    groups.add(distinct)
                    yield table.name, Example(specs=distinct, model=table.name)


def table_names() -> list[str]:
    """The names of the current corpus's tables."""
    corpus = current_corpus()
    return [t.name for t in corpus.tables] if corpus is not None else []


def table_kinds() -> dict[str, list[str]]:
    """Per corpus table, the spec kinds its layers have (what a latent defect's reason names)."""
    corpus = current_corpus()
    if corpus is None:
        return {}
    return {t.name: sorted(t.kinds()) for t in corpus.tables}
