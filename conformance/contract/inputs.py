"""Where an input comes from: the corpus, one field of one corpus layer changed, or the contract.

A finding is a defect of the engine as it is used only on an input the engine's own code builds
(the corpus: :mod:`kvcontract.conformance.contract.corpus`) or one step from it: one field of
one corpus layer changed to a value another corpus table gives a layer of that kind. Anything
wider is *synthetic*: a finding on it is reported, labelled so, and never makes a MUST defect
on its own.

- ``corpus``: a corpus table itself, a spec one of its layers has, or the members of a group
  the engine forms from one (the laws' model examples, :mod:`.models`);
- ``variation``: members that are one corpus spec, all but one of them unchanged and that one
  with one field set to a value some corpus spec of its kind has (a near miss as a real model
  could present it); or a corpus table with one such layer;
- ``synthetic``: anything else.

:func:`variation_examples` feeds the laws those variations, after the corpus's own examples and
before the contract's enumeration, so that a finding a variation shows is witnessed by one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvcontract.conformance.contract.corpus import (
    Corpus,
    current_corpus,
    distinct_tables,
    planning_classes,
)
from kvcontract.conformance.contract.model import Example, Law
from kvcontract.reference import InvalidSpec, KVCacheSpec, Role, role_of

CORPUS, VARIATION, SYNTHETIC = "corpus", "variation", "synthetic"
RANK = {CORPUS: 0, VARIATION: 1, SYNTHETIC: 2, "": 3}
"""Input classes, best first (a finding seen on several inputs keeps its best)."""

NEAR_MISS_SHAPES = frozenset({"near-miss", "incompatible", "uniform-cases"})
"""Shapes whose examples are a spec and a one-field variation of it (``Example.field``)."""
PER_KIND_FIELD = 8
"""Variations per (kind, field): the verdicts of the merge laws depend on the kind, the field and
whether the values differ, rarely on the other values; a few bases and values catch those that do."""


def best(*classes: str) -> str:
    return min(classes, key=lambda c: RANK.get(c, 3))


@dataclass
class CorpusIndex:
    """What the corpus holds, for classifying inputs: its specs, each kind's values per field,
    its tables' spec sequences."""

    specs: set[KVCacheSpec] = field(default_factory=set)
    values: dict[tuple[type, str], set[Any]] = field(default_factory=dict)
    tables: set[tuple[KVCacheSpec, ...]] = field(default_factory=set)

    @classmethod
    def of(cls, corpus: Corpus) -> CorpusIndex:
        index = cls()
        for table in corpus.tables:
            sequence = tuple(spec for _, spec in table.layers)
            index.tables.add(sequence)
            for spec in set(sequence):
                if spec in index.specs:
                    continue
                index.specs.add(spec)
                for f in dataclasses.fields(spec):
                    index.values.setdefault((type(spec), f.name), set()).add(_hashable(getattr(spec, f.name)))
        return index

    def varies_one_field(self, base: KVCacheSpec, other: KVCacheSpec) -> str | None:
        """The field ``other`` changes in corpus spec ``base`` to a value the corpus has for the kind
        (None when it is not such a variation)."""
        if type(base) is not type(other) or base not in self.specs:
            return None
        changed = [f.name for f in dataclasses.fields(base) if getattr(base, f.name) != getattr(other, f.name)]
        if len(changed) != 1:
            return None
        name = changed[0]
        return name if _hashable(getattr(other, name)) in self.values.get((type(base), name), set()) else None

    def classify_specs(self, specs: Sequence[KVCacheSpec]) -> str:
        distinct = list(dict.fromkeys(specs))
        if all(s in self.specs for s in distinct) and len({type(s) for s in distinct}) == 1:
            return CORPUS if len(distinct) == 1 else self._one_step(distinct)
        return self._one_step(distinct)

    def _one_step(self, distinct: list[KVCacheSpec]) -> str:
        if len(distinct) != 2:
            return SYNTHETIC
        a, b = distinct
        return VARIATION if self.varies_one_field(a, b) or self.varies_one_field(b, a) else SYNTHETIC

    def classify_table(self, table: Sequence[tuple[str, KVCacheSpec]]) -> str:
        sequence = tuple(spec for _, spec in table)
        if sequence in self.tables:
            return CORPUS
        for corpus_table in self.tables:
            if len(corpus_table) != len(sequence):
                continue
            diff = [i for i, (a, b) in enumerate(zip(corpus_table, sequence, strict=True)) if a != b]
            if len(diff) == 1 and self.varies_one_field(corpus_table[diff[0]], sequence[diff[0]]):
                return VARIATION
        return SYNTHETIC


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


_INDEX: dict[int, tuple[Corpus, CorpusIndex]] = {}


def corpus_index() -> CorpusIndex | None:
    """The current corpus's index (built once per corpus)."""
    corpus = current_corpus()
    if corpus is None:
        return None
    held = _INDEX.get(id(corpus))
    if held is None or held[0] is not corpus:
        _INDEX.clear()
        held = _INDEX[id(corpus)] = (corpus, CorpusIndex.of(corpus))
    return held[1]


def classify(example: Example) -> str:
    """The input class of ``example`` against the current corpus (synthetic without one)."""
    if example.model:
        return CORPUS
    index = corpus_index()
    if index is None:
        return SYNTHETIC
    if example.table:
        return index.classify_table(example.table)
    if example.specs:
        return index.classify_specs(example.specs)
    return SYNTHETIC


def _variations(spec: KVCacheSpec, index: CorpusIndex, wanted: dict[tuple[type, str], int]
                ) -> Iterator[tuple[str, KVCacheSpec]]:
    """``(field, spec with that field set to another value its kind has in the corpus)``, while
    ``wanted`` (per kind and field, how many more to make) says so."""
    for f in dataclasses.fields(spec):
        key = (type(spec), f.name)
        if wanted.get(key, PER_KIND_FIELD) <= 0:
            continue
        current = _hashable(getattr(spec, f.name))
        for value in sorted(index.values.get(key, set()) - {current}, key=repr):
            if wanted.get(key, PER_KIND_FIELD) <= 0:
                break
            other = one_field_changed(spec, f.name, value)
            if other is not None:
                yield f.name, other


def one_field_changed(spec: KVCacheSpec, name: str, value: Any) -> KVCacheSpec | None:
    """``spec`` with field ``name`` set to ``value``; None when the kind refuses it, or when its
    constructor normalizes (an MLA page padded to its alignment) so that the value it had comes
    back or another field changes too: that is not a one-field variation."""
    try:
        other = dataclasses.replace(spec, **{name: value})
    except (InvalidSpec, TypeError, ValueError):
        return None
    changed = [g.name for g in dataclasses.fields(spec) if getattr(spec, g.name) != getattr(other, g.name)]
    return other if changed == [name] else None


_BY_SHAPE: dict[tuple[int, str], tuple[Corpus, tuple[Example, ...]]] = {}


def variation_examples(law_: Law) -> tuple[Example, ...]:
    """The current corpus's one-field variations in ``law_``'s shape (near-miss shapes: a corpus
    spec and its variation; none for other shapes yet), worked out once per corpus and shape."""
    corpus = current_corpus()
    if corpus is None or law_.shape.name not in NEAR_MISS_SHAPES:
        return ()
    key = (id(corpus), law_.shape.name)
    held = _BY_SHAPE.get(key)
    if held is None or held[0] is not corpus:
        held = _BY_SHAPE[key] = (corpus, tuple(_near_miss_variations(corpus)))
    return held[1]


def _near_miss_variations(corpus: Corpus) -> Iterator[Example]:
    index = corpus_index()
    if index is None:
        return
    wanted: dict[tuple[type, str], int] = {}
    seen: set[tuple[KVCacheSpec, KVCacheSpec]] = set()
    for table, _ in distinct_tables(corpus):
        for spec in dict.fromkeys(s for _, s in table.layers):
            for name, other in _variations(spec, index, wanted):
                if (spec, other) in seen:
                    continue
                key = (type(spec), name)
                wanted[key] = wanted.get(key, PER_KIND_FIELD) - 1
                seen.add((spec, other))
                yield Example(specs=(spec, other), field=name)


# -- counts moved: a corpus table's two kinds at the ratios the engine's grouping tests ----------

COUNT_SHAPES = frozenset({"table", "plan-table"})
"""Shapes whose examples are whole layer tables (grouping and planning)."""
COUNT_BASE = 8
"""The smaller kind's layer count in a table with counts moved: large enough that the ratios the
engine's heuristics test fall on whole counts (8 x 1.5 = 12)."""
COUNT_STEPS = (1, 3, 4)
"""How many more layers the larger kind has: one apart, just below 1.5 times (11 < 12) and at it (12: vLLM 0.34.0 pads to the larger count below 1.5 times, else splits by the smaller,
kv_cache_planning.py l.567-578)."""

_COUNTED: dict[int, tuple[Corpus, tuple[Example, ...]]] = {}


def count_examples(law_: Law) -> tuple[Example, ...]:
    """Tables made from the corpus's tables of two kinds side by side: the same two layer specs
    in the table's own naming scheme, at counts :data:`COUNT_BASE` and :data:`COUNT_BASE` plus each
    of :data:`COUNT_STEPS`, either kind the larger. No real model has these counts (a finding on
    one is synthetic), but a grouping rule that breaks only where two kinds' counts are close and
    unequal shows on them. One table per pair of kinds (with equal or unequal pages); worked out
    once per corpus."""
    corpus = current_corpus()
    if corpus is None or law_.shape.name not in COUNT_SHAPES:
        return ()
    held = _COUNTED.get(id(corpus))
    if held is None or held[0] is not corpus:
        held = _COUNTED[id(corpus)] = (corpus, tuple(_count_variations(corpus)))
    return held[1]


def _count_variations(corpus: Corpus) -> Iterator[Example]:
    seen: set[tuple[Any, ...]] = set()
    for table, _ in planning_classes(corpus):
        by_spec: dict[KVCacheSpec, list[str]] = {}
        for name, spec in table.layers:
            by_spec.setdefault(spec, []).append(name)
        if len(by_spec) != 2:
            continue
        (a, names_a), (b, names_b) = by_spec.items()
        key = (*sorted((type(a).__name__, type(b).__name__)), a.page_size_bytes == b.page_size_bytes)
        if key in seen:
            continue
        seen.add(key)
        first = names_a[0]
        found = re.search(r"\d+", first)
        scheme = (first[:found.start()] + "{}" + first[found.end():]) if found else first + ".{}"
        for step in COUNT_STEPS:
            for more, fewer in ((a, b), (b, a)):
                yield Example(table=_interleaved(scheme, more, COUNT_BASE + step, fewer, COUNT_BASE))


def _interleaved(scheme: str, more: KVCacheSpec, n_more: int, fewer: KVCacheSpec, n_fewer: int
                 ) -> tuple[tuple[str, KVCacheSpec], ...]:
    """``n_more`` layers of ``more`` and ``n_fewer`` of ``fewer`` spread evenly, named by ``scheme``."""
    total = n_more + n_fewer
    layers = []
    placed = 0
    for i in range(total):
        # the i-th layer is of the fewer kind where the running share of it steps up
        if (i + 1) * n_fewer // total > placed:
            placed += 1
            layers.append((scheme.format(i), fewer))
        else:
            layers.append((scheme.format(i), more))
    return tuple(layers)


# -- messages over three or more members: a corpus spec beside two other values of one field --------

MESSAGE_SHAPES = frozenset({"near-miss"})
"""Shapes whose examples are members that disagree in one field (the error chapter's)."""

_MESSAGED: dict[int, tuple[Corpus, tuple[Example, ...]]] = {}


def message_examples(law_: Law) -> tuple[Example, ...]:
    """Per kind and field the corpus gives three or more values: a corpus spec of that kind and two
    copies of it, each with another of those values (the longest first: real sizes, dtype names,
    nested values), so the members hold three distinct values and a message that names only some
    of them, or abbreviates them, is told apart (ERROR-MESSAGE-1). Two members changed: synthetic
    input. Worked out once per corpus."""
    corpus = current_corpus()
    if corpus is None or law_.shape.name not in MESSAGE_SHAPES:
        return ()
    held = _MESSAGED.get(id(corpus))
    if held is None or held[0] is not corpus:
        held = _MESSAGED[id(corpus)] = (corpus, tuple(_three_values(corpus)))
    return held[1]


def _three_values(corpus: Corpus) -> Iterator[Example]:
    index = corpus_index()
    if index is None:
        return
    done: set[tuple[type, str]] = set()
    for table, _ in distinct_tables(corpus):
        for spec in dict.fromkeys(s for _, s in table.layers):
            for f in dataclasses.fields(spec):
                key = (type(spec), f.name)
                if key in done:
                    continue
                current = _hashable(getattr(spec, f.name))
                others = sorted(index.values.get(key, set()) - {current, None}, key=lambda v: (-len(repr(v)), repr(v)))
                members = [spec]
                for value in others:
                    other = one_field_changed(spec, f.name, value)
                    if other is not None and other not in members:
                        members.append(other)
                    if len(members) == 3:
                        break
                if len(members) == 3:
                    done.add(key)
                    yield Example(specs=tuple(members), field=f.name)


# -- one layer of a real table changed, at the positions a real table has ---------------------------

POSITIONS = ("first", "10th", "17th", "33rd", "65th", "middle", "last")
"""Where in a corpus table one layer is changed: the first, the 10th (names of two digits), beyond
the 16th, 32nd and 64th (indexes past a small table's, and a name sorted otherwise as text), the
middle and the last."""
_AT = {"first": 0, "10th": 9, "17th": 16, "33rd": 32, "65th": 64}

_POSITIONED: dict[int, tuple[Corpus, tuple[Example, ...]]] = {}


def position_examples(law_: Law) -> tuple[Example, ...]:
    """Corpus tables with one layer changed in one field, to a value another corpus spec of its kind
    has (a one-field variation of a real table), at each of :data:`POSITIONS` the table reaches: per
    kind, the longest table of a planning class that holds that kind alone (else the longest that
    holds it), and the first field whose change keeps the spec valid and differs. Worked out once
    per corpus."""
    corpus = current_corpus()
    if corpus is None or law_.shape.name not in COUNT_SHAPES:
        return ()
    held = _POSITIONED.get(id(corpus))
    if held is None or held[0] is not corpus:
        held = _POSITIONED[id(corpus)] = (corpus, tuple(_positioned(corpus)))
    return held[1]


def _positioned(corpus: Corpus) -> Iterator[Example]:
    index = corpus_index()
    if index is None:
        return
    longest: dict[type, Any] = {}
    for table, _ in planning_classes(corpus):
        kinds = {type(spec) for _, spec in table.layers}
        for kind in kinds:
            held = longest.get(kind)
            # a table of that kind alone first (a real model's whole stack), then the longest
            rank = (len(kinds) == 1, len(table.layers))
            if held is None or rank > (len({type(s) for _, s in held.layers}) == 1, len(held.layers)):
                longest[kind] = table
    for kind, table in longest.items():
        layers = list(table.layers)
        spots = [i for i, (_, s) in enumerate(layers) if type(s) is kind]
        base = layers[spots[0]][1]
        changed = None
        for f in dataclasses.fields(base):
            if role_of(f) not in (Role.LAYOUT, Role.ALLOCATION):
                continue
            current = _hashable(getattr(base, f.name))
            for value in sorted(index.values.get((kind, f.name), set()) - {current}, key=repr):
                changed = one_field_changed(base, f.name, value)
                if changed is not None:
                    break
            if changed is not None:
                break
        if changed is None:
            continue
        wanted = {name: _AT[name] for name in _AT if _AT[name] < len(spots)}
        wanted |= {"middle": len(spots) // 2, "last": len(spots) - 1}
        for at in dict.fromkeys(wanted.values()):
            i = spots[at]
            if layers[i][1] != base:
                continue  # a layer of the kind with other values: leave it (one field of one layer)
            table_ = (*layers[:i], (layers[i][0], changed), *layers[i + 1:])
            yield Example(table=tuple(table_))
