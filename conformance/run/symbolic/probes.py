"""Probes: one path's input per search operation, each example with the clauses that judge it.

A probe builder takes a :class:`~kvcontract.conformance.run.symbolic.choices.Chooser`
(and the building blocks) and returns a :class:`Probe`; the clauses come from the laws'
records (:func:`~kvcontract.conformance.contract.laws.clauses_for`), never typed here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kvcontract import reference
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.laws import clauses_for
from kvcontract.conformance.contract.model import Example
from kvcontract.conformance.contract.values import rebuilt
from kvcontract.conformance.run.symbolic.blocks import Blocks, KindBlocks, is_optional, replace_spec
from kvcontract.conformance.run.symbolic.choices import Chooser, Rejected
from kvcontract.reference import KVCacheSpec, QueryLenSupport, RoutingRequest


@dataclasses.dataclass
class Probe:
    """One path's input: the examples, each with the clauses that judge it."""

    cases: list[tuple[Example, tuple[str, ...]]]
    features: set[str]
    reached: bool = False
    """The engine answered on the path although no case is left to judge (a value group's
    oracle saw no difference)."""
    difference: str | None = None
    """What a value group's oracle saw differ (its cases then judge the realized input)."""


def _disagreement(specs: Sequence[KVCacheSpec]) -> tuple[bool, list[str]]:
    """Whether the reference merges ``specs``, and the disagreeing fields when not."""
    try:
        reference.merge(list(specs))
    except reference.IncompatibleSpecs as exc:
        return False, sorted({d.field for d in exc.disagreements})
    return True, []


def _one_field(specs: Sequence[KVCacheSpec], fields: Sequence[str]) -> str | None:
    """The one field the members disagree in (an ``Example.field``), or None."""
    names = {f.name for f in dataclasses.fields(specs[0])}
    return fields[0] if len(fields) == 1 and fields[0] in names else None


def merge_probe(c: Chooser, blocks: Blocks, kb: KindBlocks) -> Probe:
    n = 1 + c.choose(4, "members")
    template = blocks.template(c, kb)
    specs = [template] + [blocks.member(c, kb, template, f"member{i}") for i in range(1, n)]
    if n > 1 and c.flag("odd-first"):
        specs = specs[1:] + specs[:1]  # the odd member first, the template last
    ok, fields = _disagreement(specs)
    fresh = ok and n > 1 and c.flag("rebuilt")  # the other members' values as other objects
    if fresh:
        specs = [specs[0], *(rebuilt(s) for s in specs[1:])]
    features = {f"n={n}", f"ok={ok}", f"rebuilt={fresh}", *(f"differ:{f}" for f in fields)}
    features |= {f"{k}.{f}" for k, f in sysm.exercised(specs)}
    return Probe(merge_cases(c, specs, rebuilt_=fresh), features)


def merge_cases(c: Chooser, specs: Sequence[KVCacheSpec], rebuilt_: bool = False,
                ) -> list[tuple[Example, tuple[str, ...]]]:
    """The examples a merge of ``specs`` is judged by, each with its clauses: a compatible
    list permuted, split and whole; an incompatible one with its one disagreeing field."""
    n = len(specs)
    ok, fields = _disagreement(specs)
    cases: list[tuple[Example, tuple[str, ...]]] = []
    if ok:
        base = Example(specs=tuple(specs), rebuilt=rebuilt_)
        if n == 1:
            cases.append((base, clauses_for("merge", ["one-spec"])))
        else:
            order = tuple(reversed(range(n))) if c.flag("order") else tuple([*range(1, n), 0])
            cases.append((dataclasses.replace(base, order=order), clauses_for("merge", ["permuted"])))
            cases.append((dataclasses.replace(base, cut=1 + c.choose(n - 1, "cut")), clauses_for("merge", ["split"])))
        cases.append((base, clauses_for("merge", ["compatible", "advisory", "uniform-cases"])))
    else:
        field = _one_field(specs, fields)
        ex = Example(specs=tuple(specs), field=field)
        # members that leave a common annotation unset are not part of the disagreement:
        # a law that reads the field's values (a message naming them) is not judged then
        values_set = field is not None and all(getattr(s, field) is not None for s in specs)
        cases.append((ex, clauses_for("merge", ["near-miss", "uniform-cases", "incompatible"], values_set=values_set)))
    return cases


def mixed_probe(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]]) -> Probe:
    if len(kinds) < 2:
        raise Rejected("mixed kinds need two kinds")
    first_kind = c.pick(list(kinds), "kind-a")
    related = [k for k in kinds if k is not first_kind and (issubclass(k, first_kind) or issubclass(first_kind, k))]
    if related and c.flag("related"):  # kinds that derive from one another: the case a merge may admit
        second_kind = c.pick(related, "kind-b")
    else:
        second_kind = c.pick([k for k in kinds if k is not first_kind], "kind-b")
    a, b = blocks.of(first_kind), blocks.of(second_kind)
    if a is None or b is None:
        raise Rejected("a kind without a base spec")
    first = blocks.template(c, a)
    second = blocks.template(c, b)
    if c.flag("aligned"):  # the second agrees with the first on every field they share
        shared = {f.name for f in sysm._settable(second_kind, blocks.domain)} & \
            {f.name for f in dataclasses.fields(first)}
        aligned = replace_spec(second, {n: getattr(first, n) for n in shared if getattr(first, n) is not None
                                    or is_optional(second_kind, n)})
        second = aligned if aligned is not None else second
    ex = Example(specs=(first, second))
    features = {f"kinds={first_kind.__name__}>{second_kind.__name__}"}
    return Probe([(ex, clauses_for("mixed", ["mixed-kinds", "uniform-cases", "incompatible"]))], features)


def _table_specs(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]], max_layers: int) -> list[KVCacheSpec]:
    n = 1 + c.choose(max_layers, "layers")
    chosen = [c.pick(kinds, "kind-a")]
    if n > 1 and c.flag("two-kinds"):
        chosen.append(c.pick(kinds, "kind-b"))
    templates = {}
    for kind in chosen:
        kb = blocks.of(kind)
        if kb is None:
            raise Rejected(f"{kind.__name__} has no base spec")
        templates[kind] = (kb, blocks.template(c, kb))
    specs = []
    for i in range(n):
        kind = chosen[c.choose(len(chosen), f"layer{i}-kind")] if len(chosen) > 1 else chosen[0]
        kb, template = templates[kind]
        specs.append(template if i == 0 else blocks.member(c, kb, template, f"layer{i}"))
    return specs


def uniform_probe(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]]) -> Probe:
    specs = _table_specs(c, blocks, kinds, 5)
    ok, fields = _disagreement(specs)
    same_kind = len({type(s) for s in specs}) == 1
    field = _one_field(specs, fields) if same_kind else None
    ex = Example(specs=tuple(specs), field=field)
    features = {f"n={len(specs)}", f"ok={ok}", "+".join(sorted({type(s).__name__ for s in specs}))}
    shapes = ["uniform-cases"] if ok else ["uniform-cases", "incompatible"]
    return Probe([(ex, clauses_for("uniform", shapes))], features)


def group_probe(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]]) -> Probe:
    specs = _table_specs(c, blocks, kinds, 4)
    ok, _fields = _disagreement(specs)
    features = {f"n={len(specs)}", f"ok={ok}", "+".join(sorted({type(s).__name__ for s in specs}))}
    features |= {f"{k}.{f}" for k, f in sysm.exercised(specs)}
    return Probe(group_cases({f"layers.{i}": s for i, s in enumerate(specs)}), features)


def group_cases(table: Mapping[str, KVCacheSpec]) -> list[tuple[Example, tuple[str, ...]]]:
    """A layer table with the clauses that judge it: grouping's and planning's, and is_uniform's
    when its layers merge."""
    ok, _fields = _disagreement(list(table.values()))
    clauses = clauses_for("group", ["table", "plan-table", "uniform-table"] if ok else ["table", "plan-table"])
    return [(Example(table=tuple(table.items())), clauses)]


ROUTE_LENGTHS = (0, 1, 2, 3, 4, 5, 8, 16)
ROUTE_THRESHOLDS = (1, 2, 3, 4, 6, 8)
ROUTE_CONTEXT = (0, 1, 7, 40)


def route_probe(c: Chooser) -> Probe:
    causal = c.flag("causal")
    capability = c.flag("capability")
    backend = c.flag("backend")
    n = 1 + c.choose(5, "requests")
    if not causal and c.flag("block"):  # a uniform block: one length, then trailing padding
        length = c.pick(ROUTE_LENGTHS[1:], "block-length")
        active = 1 + c.choose(n, "active")
        lens = (length,) * active + (0,) * (n - active)
    else:
        lens = tuple(c.pick(ROUTE_LENGTHS, f"len{i}") for i in range(n))
    seqs = tuple(q + c.pick(ROUTE_CONTEXT, f"ctx{i}") for i, q in enumerate(lens))
    request = RoutingRequest(lens, seqs, causal=causal, capability=capability, backend_non_causal=backend,
                             decode_threshold=c.pick(ROUTE_THRESHOLDS, "threshold"),
                             query_len_support=c.pick(list(QueryLenSupport), "support"))
    cases = route_cases(request)
    features = {f"clauses={','.join(cases[0][1])}", f"n={n}", f"support={request.query_len_support.name}"}
    return Probe(cases, features)


def route_cases(request: RoutingRequest) -> list[tuple[Example, tuple[str, ...]]]:
    """The routing example of ``request`` and the clauses of its shape."""
    from kvcontract.conformance.contract.laws.dispatch import DispatchExample

    ex = DispatchExample(request=request)
    if request.causal:
        shapes = ["causal", "valid"]
    elif not (request.capability and request.backend_non_causal):
        shapes = ["missing-support"]
    elif _valid_block(request.query_lens):
        shapes = ["good-block", "valid"]
    else:
        shapes = ["bad-block"]
    return [(ex, clauses_for("route", shapes))]


def _valid_block(lens: tuple[int, ...]) -> bool:
    active = [n for n in lens if n > 0]
    if not active or len(set(active)) > 1:
        return False
    last = max(i for i, n in enumerate(lens) if n > 0)
    return all(n > 0 for n in lens[: last + 1])



def empty_probe(c: Chooser) -> Probe:
    """``merge([])`` and ``is_uniform({})``: one input, no choice."""
    return Probe([(Example(), clauses_for("empty", ["nothing"]))], {"empty"})
