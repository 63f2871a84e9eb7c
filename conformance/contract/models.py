"""Real model tables as the laws' first examples: what makes a defect reachable.

An engine that ships its real model tables (:class:`~kvcontract.conformance.engines.protocol.ModelTables`)
gets them judged before anything drawn, each in the shape the law takes:

- a layer table (GROUP): the model's whole table, as the engine's planner sees it; where the
  law's shape is a table whose layers all merge (GROUP-SHARE-1), only a table the contract
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
from kvcontract.conformance.contract.model import Example, Law
from kvcontract.conformance.engines.protocol import Engine, ModelTables
from kvcontract.reference import KVCacheSpec

TABLE_SHAPES = frozenset({"table", "plan-table"})
UNIFORM_TABLE_SHAPES = frozenset({"uniform-table"})
ONE_SPEC_SHAPES = frozenset({"one-spec"})
GROUP_SHAPES = frozenset({"compatible", "advisory"})


def _distinct(specs: list[KVCacheSpec]) -> list[KVCacheSpec]:
    out: list[KVCacheSpec] = []
    for s in specs:
        if s not in out:
            out.append(s)
    return out


def _merges(specs: list[KVCacheSpec]) -> bool:
    try:
        reference.merge(specs)
    except reference.IncompatibleSpecs:
        return False
    return True


def _engine_groups(engine: Engine, table: tuple[tuple[str, KVCacheSpec], ...]) -> list[list[KVCacheSpec]]:
    """The members of each group the engine forms from ``table`` (none when it cannot group it)."""
    by_name = dict(table)
    try:
        from kvcontract.conformance.contract.laws.common import to_engine  # laws import this module

        groups = engine.group_layers({n: to_engine(engine, s) for n, s in table})
    except Exception:  # noqa: BLE001 - a grouping failure is the GROUP laws' finding, judged there
        return []
    return [[by_name[n] for n in g.layer_names if n in by_name] for g in groups]


_BY_SHAPE: dict[tuple[int, str], tuple[Engine, tuple[tuple[str, Example], ...]]] = {}
"""Per engine (held beside its entry) and shape: its model examples, the same objects for every
clause of the shape (whose answers and facts are remembered by identity)."""


def model_examples(engine: Engine, law_: Law) -> tuple[tuple[str, Example], ...]:
    """``(model name, example)`` for each real model table of ``engine`` in ``law_``'s shape
    (worked out once per engine and shape: building them grouped each table in the engine)."""
    key = (id(engine), law_.shape.name)
    held = _BY_SHAPE.get(key)
    if held is None or held[0] is not engine:
        held = _BY_SHAPE[key] = (engine, tuple(_model_examples(engine, law_.shape.name)))
    return held[1]


def _model_examples(engine: Engine, shape: str) -> Iterator[tuple[str, Example]]:
    if not isinstance(engine, ModelTables):
        return
    for name, layers in engine.model_tables():
        table = tuple(layers)
        if shape in TABLE_SHAPES:
            yield name, Example(table=table, model=name)
        elif shape in UNIFORM_TABLE_SHAPES:
            if reference.is_uniform(dict(table)):
                yield name, Example(table=table, model=name)
        elif shape in ONE_SPEC_SHAPES:
            for spec in _distinct([s for _, s in table]):
                yield name, Example(specs=(spec,), model=name)
        elif shape in GROUP_SHAPES:
            for members in _engine_groups(engine, table):
                distinct = _distinct(members)
                if len(distinct) > 1 and _merges(distinct):
                    yield name, Example(specs=tuple(distinct), model=name)


def model_names(engine: Engine) -> list[str]:
    """The names of the engine's real model tables."""
    return [name for name, _ in engine.model_tables()] if isinstance(engine, ModelTables) else []


def model_kinds(engine: Engine) -> dict[str, list[str]]:
    """Per real model table, the spec kinds its layers have (what a latent defect's reason names)."""
    if not isinstance(engine, ModelTables):
        return {}
    return {name: sorted({type(s).__name__ for _, s in layers}) for name, layers in engine.model_tables()}
