"""What judging an example needs besides the engine, worked out once per example and shared by
every clause that judges it: its JSON (the witness, as it was before any engine saw it), that
JSON's text (the worker's progress slot), and the (kind, field) pairs it exercises.

The enumerated and drawn examples of a worker are built from a few hundred spec objects, each
in many examples (a list and its permutations, a table and its variants): a spec's JSON and a
set of specs' pairs are remembered by the objects' identity, the objects held alive beside them
so an identity is never another object's. Identity, not value: hashing a spec costs about as
much as encoding it, and an equal spec of other value objects is another example's business.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kvcontract.conformance.contract.codec import spec_to_json
from kvcontract.conformance.contract.model import Example
from kvcontract.conformance.contract.systematic import exercised
from kvcontract.reference import KVCacheSpec

_KEPT = 1 << 16
"""Entries a cache holds before it starts over (a worker judges some 50,000 examples)."""


class ExampleFacts:
    """What judging an example needs besides the engine (see the module). The same for every
    clause that judges the example."""

    __slots__ = ("pairs", "pristine", "text")

    def __init__(self, pristine: dict[str, Any], text: str | None, pairs: frozenset[tuple[str, str]]) -> None:
        self.pristine, self.text, self.pairs = pristine, text, pairs

    @classmethod
    def of(cls, ex: Example, *, encode: bool = True) -> ExampleFacts:
        pristine = ex.to_json(spec_json=spec_json)
        return cls(pristine, json.dumps(pristine, default=str) if encode else None,
                   pairs_of([*ex.specs, *(s for _, s in ex.table)]))


_SPEC_JSON: dict[int, tuple[KVCacheSpec, dict[str, Any]]] = {}


def spec_json(spec: KVCacheSpec) -> dict[str, Any]:
    """:func:`~kvcontract.conformance.contract.codec.spec_to_json` of ``spec``, encoded once
    per spec object; a new dict each call (a witness is its own)."""
    held = _SPEC_JSON.get(id(spec))
    if held is None or held[0] is not spec:
        if len(_SPEC_JSON) >= _KEPT:
            _SPEC_JSON.clear()
        held = _SPEC_JSON[id(spec)] = (spec, spec_to_json(spec))
    return dict(held[1])


_PAIRS: dict[frozenset[int], tuple[tuple[KVCacheSpec, ...], frozenset[tuple[str, str]]]] = {}


def pairs_of(specs: list[KVCacheSpec]) -> frozenset[tuple[str, str]]:
    """:func:`~kvcontract.conformance.contract.systematic.exercised` of ``specs``, once per set
    of spec objects (what it finds depends on neither order nor repetition). An entry holds its
    objects, so while it lives no other object has one of its identities."""
    key = frozenset(map(id, specs))
    held = _PAIRS.get(key)
    if held is None:
        if len(_PAIRS) >= _KEPT:
            _PAIRS.clear()
        held = _PAIRS[key] = (tuple(specs), frozenset(exercised(specs)))
    return held[1]


_FACTS: dict[int, tuple[Example, ExampleFacts]] = {}
"""Per enumerated or drawn example (by identity; the example is kept alive here): its facts."""


_BY_TEXT: dict[str, Example] = {}
"""The same examples by their JSON text: a finding's witness traced later in this worker is the
example judged (:func:`judged_example`)."""


def example_facts(ex: Example) -> ExampleFacts:
    """:class:`ExampleFacts` of an enumerated or drawn example, computed once per worker (or
    handed over with it, :func:`remember_facts`)."""
    held = _FACTS.get(id(ex))
    if held is None or held[0] is not ex:
        return remember_facts([ex], [ExampleFacts.of(ex)])[0]
    return held[1]


def remember_facts(examples: Sequence[Example], facts: Sequence[ExampleFacts]) -> Sequence[ExampleFacts]:
    """Take ``facts[i]`` as the facts of ``examples[i]``: worked out here or by the worker that
    prepared the examples (:mod:`~kvcontract.conformance.run.share`), which works them out as it
    judges them anyway. Returns ``facts``."""
    for ex, f in zip(examples, facts, strict=True):
        if len(_FACTS) >= 1 << 17:
            _FACTS.clear()
            _BY_TEXT.clear()
        _FACTS[id(ex)] = (ex, f)
        if f.text is not None:
            _BY_TEXT[f.text] = ex
    return facts


def judged_example(witness: Any) -> Example | None:
    """The enumerated or drawn example this worker judged whose JSON is ``witness``, or None:
    replaying it, a tracer finds the engine answering the objects it answered in the pass, and
    the kit's answers remembered for them."""
    return _BY_TEXT.get(json.dumps(witness, default=str))
