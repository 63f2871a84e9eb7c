"""The ``corpus`` search group: real models' tables, and one step from them, as symbolic choices.

The ``group`` search builds tables of one to four layers from the contract's building blocks.
This group starts from the tables the engine's own model code builds (the run's corpus,
:mod:`kvcontract.conformance.contract.corpus`): a path picks one planning class's table, then by
further choices keeps it as it is, changes one layer's field to a value another corpus spec of
that kind has (``None`` among them: an optional field then mixes ``None`` and values across the
layers), or inserts a layer of another kind the corpus holds, renumbered in the table's naming
scheme. The layer is taken at one of the positions real tables have (:data:`POSITIONS`: the
first, the 10th, beyond the 16th, 32nd and 64th, the middle, the last). So the space is bounded
by what the corpus holds, at real sizes; every path is judged by grouping's and planning's
clauses, as a ``group`` path is.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from kvcontract.conformance.contract.corpus import Corpus, planning_classes
from kvcontract.conformance.contract.inputs import one_field_changed
from kvcontract.conformance.contract.model import Example
from kvcontract.conformance.run.symbolic.choices import Chooser, Rejected
from kvcontract.conformance.run.symbolic.probes import Probe, group_cases
from kvcontract.reference import KVCacheSpec

CORPUS_OPERATIONS: dict[str, str] = {"corpus": "group"}
"""The corpus group, with the operation whose clauses judge its tables."""

POSITIONS: tuple[tuple[str, Callable[[int], int]], ...] = (
    ("first", lambda n: 0), ("10th", lambda n: 9), ("17th", lambda n: 16), ("33rd", lambda n: 32),
    ("65th", lambda n: 64), ("middle", lambda n: n // 2), ("last", lambda n: n - 1))
"""Where a layer is changed or inserted: a position class and its index in an ``n``-layer table."""

VARIATIONS = ("as-built", "one-field", "inserted")


@dataclasses.dataclass(frozen=True)
class CorpusBlocks:
    """What a corpus path chooses from: the planning classes' tables (as the engine holds them),
    per kind the values its fields take across the corpus, and per kind its distinct specs."""

    tables: tuple[tuple[str, tuple[tuple[str, KVCacheSpec], ...]], ...]
    values: dict[tuple[type, str], tuple[Any, ...]]
    specs: dict[type, tuple[KVCacheSpec, ...]]

    @property
    def kinds(self) -> list[type]:
        return sorted(self.specs, key=lambda k: k.__name__)


def corpus_blocks(corpus: Corpus, held: Callable[[Example], Example | None]) -> CorpusBlocks | None:
    """The blocks of ``corpus`` as an engine holds them (``held``: a fork fed the pinned release's
    corpus keeps the fields it has); None when no table with layers is left."""
    tables: list[tuple[str, tuple[tuple[str, KVCacheSpec], ...]]] = []
    for table, _ in planning_classes(corpus):
        if not table.layers:
            continue
        as_held = held(Example(table=tuple(table.layers), model=table.name))
        if as_held is not None and as_held.table:
            tables.append((table.name, tuple(as_held.table)))
    if not tables:
        return None
    values: dict[tuple[type, str], dict[str, Any]] = {}
    specs: dict[type, dict[KVCacheSpec, None]] = {}
    for _, layers in tables:
        for _, spec in layers:
            if spec in specs.get(type(spec), {}):
                continue
            specs.setdefault(type(spec), {})[spec] = None
            for f in dataclasses.fields(spec):
                value = getattr(spec, f.name)
                values.setdefault((type(spec), f.name), {}).setdefault(repr(value), value)
    return CorpusBlocks(tuple(tables), {k: tuple(v[r] for r in sorted(v)) for k, v in values.items()},
                        {k: tuple(v) for k, v in specs.items()})


def _positions(n: int) -> list[tuple[int, str]]:
    """The indexes of the position classes an ``n``-layer table reaches, each with its first name."""
    return sorted({at(n): name for name, at in reversed(POSITIONS) if at(n) < n}.items())


def _renumbered(layers: Sequence[tuple[str, KVCacheSpec]], at: int, spec: KVCacheSpec
                ) -> tuple[tuple[str, KVCacheSpec], ...]:
    """``spec`` inserted before layer ``at``; where every name is the table's scheme with its index
    (``model.layers.{i}.attn``), the layers are renumbered in it, else the new one is named apart."""
    first = layers[0][0]
    found = re.search(r"\d+", first)
    scheme = (first[:found.start()] + "{}" + first[found.end():]) if found else None
    specs = [s for _, s in layers]
    specs.insert(at, spec)
    if scheme is not None and all(n == scheme.format(i) for i, (n, _) in enumerate(layers)):
        return tuple((scheme.format(i), s) for i, s in enumerate(specs))
    names = [n for n, _ in layers]
    names.insert(at, f"inserted.{at}")
    return tuple(zip(names, specs, strict=True))


_CHANGES: dict[KVCacheSpec, tuple[tuple[str, Any, KVCacheSpec], ...]] = {}


def _changes(blocks: CorpusBlocks, spec: KVCacheSpec) -> tuple[tuple[str, Any, KVCacheSpec], ...]:
    """``spec``'s one-field variations to another value the corpus gives its kind (a value the kind
    refuses, or one its constructor normalizes away, is not one), worked out once per spec."""
    held = _CHANGES.get(spec)
    if held is None:
        if len(_CHANGES) > 4096:
            _CHANGES.clear()
        found = []
        for f in dataclasses.fields(spec):
            for value in blocks.values.get((type(spec), f.name), ()):
                if repr(value) != repr(getattr(spec, f.name)):
                    changed = one_field_changed(spec, f.name, value)
                    if changed is not None:
                        found.append((f.name, value, changed))
        held = _CHANGES[spec] = tuple(found)
    return held


def corpus_probe(c: Chooser, blocks: CorpusBlocks, held: Callable[[Example], Example | None]) -> Probe:
    name, layers = c.pick(blocks.tables, "table")
    spots = {i: where for i, where in _positions(len(layers)) if _changes(blocks, layers[i][1])}
    variations = [v for v in VARIATIONS if v != "one-field" or spots]
    variation = c.pick(variations, "variation")
    features = {f"variation={variation}", f"size={'large' if len(layers) > 16 else 'small'}"}
    model = name
    if variation == "one-field":
        i = c.pick(sorted(spots), "at")
        spec = layers[i][1]
        field, value, changed = c.pick(_changes(blocks, spec), "field-value")
        layers = (*layers[:i], (layers[i][0], changed), *layers[i + 1:])
        features |= {f"at={spots[i]}", f"{type(spec).__name__}.{field}", f"none={value is None}"}
        model = ""
    elif variation == "inserted":
        i, where = c.pick(_positions(len(layers)), "at")
        present = {type(s) for _, s in layers}
        kinds = [k for k in blocks.kinds if k not in present] or blocks.kinds
        kind = c.pick(kinds, "kind")
        layers = _renumbered(layers, i, c.pick(blocks.specs[kind], "spec"))
        features |= {f"at={where}", f"inserted={kind.__name__}"}
        model = ""
    ex = held(Example(table=tuple(layers), model=model))
    if ex is None:
        raise Rejected("the engine cannot hold this table")
    return Probe([(dataclasses.replace(ex_, model=model), clauses)
                  for ex_, clauses in group_cases(dict(ex.table))], features)
