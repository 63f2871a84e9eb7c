"""Whole plans compared: an engine's plan of a layer table against the reference's
(:func:`kvcontract.reference.plan`), what clause PLAN-MATCH-1 judges.

:func:`compare` names every difference a consumer of the plan could see, in a few words
with both values: the partition of the layers into groups; per group its form (one merged
spec, or one spec per member), the block manager that serves it (the manager of its spec,
or of its first member's, which is the spec the scheduler builds the group's manager
from), its block size, its page and its spec; the spec each layer is allocated with; the
number of blocks; and per tensor the layers it holds, its size, each layer's first byte, its
strides and the last byte it addresses. A refusal is compared with a refusal. Fields that
nothing reads (advisory fields: their role metadata in :mod:`kvcontract.reference.specs`
carries the reason, e.g. ``is_draft``) are never compared.

Each :class:`Difference` has a class (:data:`CLASSES`), the kinds of the table's layers it
concerns and, for a spec's fields, their names: its :attr:`~Difference.signature` is stable
across tables, and the differences come in one fixed order (that of :data:`CLASSES`).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kvcontract.conformance.contract.model import signature
from kvcontract.conformance.engines.protocol import EnginePlan
from kvcontract.reference import SPEC_KINDS, GroupingError, KVCacheSpec, is_advisory
from kvcontract.reference.planning import manager_of, manager_of_kind
from kvcontract.reference.sizing import KVCachePlan

CLASSES: tuple[str, ...] = (
    "refused",           # the reference refuses the table, the engine plans it
    "raised",            # the engine refuses (raises), the reference plans it
    "groups",            # the layers are partitioned into other groups
    "group-split",       # the same layers share groups of a kind, split into other groups
    "group-form",        # one merged spec against one spec per member
    "manager",           # another block manager serves the group
    "group-block-size",  # the group's block size
    "group-page",        # the group's page size(s)
    "group-spec",        # a field of the group's merged spec
    "layer-spec",        # the spec a layer is allocated with (kind or a field)
    "num-blocks",        # the number of blocks
    "tensor-layers",     # a layer held by no tensor, or by several
    "tensor-size",       # the backing allocation's size
    "tensor-offset",     # the first byte of a layer's pages
    "tensor-stride",     # the bytes from one block of a layer to the next
    "tensor-bounds",     # the last byte a tensor's layers address
)
"""The difference classes, in the order :func:`compare` reports them."""

ReferenceAnswer = KVCachePlan | GroupingError
EngineAnswer = EnginePlan | BaseException


@dataclasses.dataclass(frozen=True)
class Difference:
    """One thing the two plans disagree on."""

    what: str
    """The class (one of :data:`CLASSES`)."""
    kinds: tuple[str, ...]
    """The kinds (in the table) of the layers concerned, sorted."""
    detail: str
    """A few words with both values."""
    fields: tuple[str, ...] = ()
    """For a spec's difference, the fields that differ (``kind`` for the kind)."""
    layers: tuple[str, ...] = ()
    """The layers concerned (the first ones)."""
    more: int = 0
    """How many more differences of this class and these kinds were folded into this one."""

    @property
    def signature(self) -> str:
        """``plan-differs-<class>:<Kind+Kind>[:<field,field>]``."""
        return signature(f"plan-differs-{self.what}", self.kinds, self.fields)

    def signature_in(self, hybrid: bool) -> str:
        """The signature of a finding of this difference (PLAN-MATCH-1): with the hybrid manager
        off, the outcome says so (another path of the planner); the layout does not (one
        defect in both layouts is one finding)."""
        return signature(f"plan-differs-{self.what}{'' if hybrid else '-hybrid-off'}", self.kinds, self.fields)

    def __str__(self) -> str:
        return f"{self.what}: {self.detail}" + (f" (and {self.more} more)" if self.more else "")


# -- the two sides in one shape ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Group:
    names: tuple[str, ...]
    merged: bool
    specs: dict[str, KVCacheSpec]
    """The spec each member is allocated with."""

    @property
    def first(self) -> KVCacheSpec:
        return self.specs[self.names[0]]


def _reference_groups(plan: KVCachePlan) -> list[_Group]:
    return [_Group(g.layer_names, g.spec is not None, dict(g.layer_specs)) for g in plan.groups]


def _engine_groups(plan: EnginePlan) -> list[_Group]:
    out = []
    for g in plan.groups:
        members = dict(g.member_specs or {})
        specs = {n: members[n] if n in members else g.spec for n in g.layer_names}
        out.append(_Group(tuple(g.layer_names), g.spec is not None,
                          {n: s for n, s in specs.items() if s is not None}))
    return out


# -- describing ---------------------------------------------------------------------------------


def _names(names: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return "{" + shown + (f", +{len(names) - most}" if len(names) > most else "") + "}"


def _value(v: Any) -> str:
    text = v.name if isinstance(v, enum.Enum) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def judged_fields(spec: KVCacheSpec) -> tuple[str, ...]:
    """The fields of ``spec`` a plan comparison reads: every field that is not advisory."""
    kind = type(spec)
    held = _JUDGED.get(kind)
    if held is None:
        held = _JUDGED[kind] = tuple(f.name for f in dataclasses.fields(kind) if not is_advisory(f))
    return held


_JUDGED: dict[type, tuple[str, ...]] = {}


def spec_mismatch(expected: KVCacheSpec, actual: KVCacheSpec) -> tuple[str, ...]:
    """The judged fields in which ``actual`` differs from ``expected`` (``("kind",)`` when
    their kinds differ)."""
    if type(expected) is not type(actual):
        return ("kind",)
    if expected is actual or expected == actual:
        return ()
    return tuple(n for n in judged_fields(expected) if getattr(expected, n) != getattr(actual, n))


def _spec_detail(expected: KVCacheSpec, actual: KVCacheSpec, fields: Sequence[str]) -> str:
    if fields == ("kind",):
        return f"reference {type(expected).__name__}, engine {type(actual).__name__}"
    return ", ".join(f"{f} reference {_value(getattr(expected, f))}, engine {_value(getattr(actual, f))}"
                     for f in fields[:3]) + (f", +{len(fields) - 3} fields" if len(fields) > 3 else "")


class _Collector:
    """Differences as found, folded per (class, kinds, fields) in first-found order."""

    def __init__(self, table: Mapping[str, KVCacheSpec]) -> None:
        self.table = table
        self.lacks: Any = lambda kind: frozenset()
        """``kind -> fields`` the engine lacks: not judged (:func:`_lacks`)."""
        self.found: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Difference] = {}

    def kinds(self, names: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({type(self.table[n]).__name__ for n in names if n in self.table}))

    def add(self, what: str, names: Sequence[str], detail: str, fields: Sequence[str] = ()) -> None:
        key = (what, self.kinds(names), tuple(sorted(fields)))
        held = self.found.get(key)
        if held is None:
            self.found[key] = Difference(what, key[1], detail, key[2], tuple(names[:3]))
        else:
            self.found[key] = dataclasses.replace(held, more=held.more + 1)

    def result(self) -> list[Difference]:
        order = {c: i for i, c in enumerate(CLASSES)}
        return sorted(self.found.values(), key=lambda d: order[d.what])  # stable: first-found within a class


# -- comparing ----------------------------------------------------------------------------------


def compare(reference: ReferenceAnswer, answer: EngineAnswer, engine: Any = None, *,
            table: Mapping[str, KVCacheSpec] | None = None) -> list[Difference]:
    """Every difference between the reference's plan (or its refusal) and the engine's plan
    (or what it raised), in :data:`CLASSES` order; empty when they agree. ``engine`` (optional)
    computes the engine side's pages (``engine.page_size``); ``table`` names the kinds."""
    if table is None:
        table = _table_of(reference, answer)
    out = _Collector(table)
    names = list(table)
    if isinstance(reference, BaseException) or isinstance(answer, BaseException):
        if isinstance(reference, BaseException) and not isinstance(answer, BaseException):
            out.add("refused", names, f"the reference refuses ({str(reference)[:80]}); the engine plans "
                                      f"{len(answer.groups)} groups")
        elif isinstance(answer, BaseException) and not isinstance(reference, BaseException):
            raised = getattr(answer, "described", None) or f"{type(answer).__name__}: {answer}"
            out.add("raised", names, f"the engine raised {raised[:100]}; the reference plans "
                                     f"{len(reference.groups)} groups")
        return out.result()
    ref_groups, eng_groups = _reference_groups(reference), _engine_groups(answer)
    page = _Pages(engine)
    out.lacks = _lacks(engine)
    _compare_groups(out, ref_groups, eng_groups, page)
    if reference.num_blocks != answer.num_blocks:
        out.add("num-blocks", names, f"reference {reference.num_blocks}, engine {answer.num_blocks}")
    ref_pages = {n: s.page_size_bytes for g in ref_groups for n, s in g.specs.items()}
    eng_pages = {n: page(s) for g in eng_groups for n, s in g.specs.items()}
    _compare_tensors(out, (reference.tensors, ref_pages, reference.num_blocks),
                     (answer.tensors, eng_pages, answer.num_blocks), reference.num_blocks == answer.num_blocks)
    return out.result()


def _lacks(engine: Any) -> Any:
    """``kind -> fields`` the engine's classes lack (read back at the reference's defaults, they
    tell nothing of its plan); none for a plan without an engine."""
    unsupported = getattr(engine, "unsupported_fields", None)
    if unsupported is None:
        return lambda kind: frozenset()
    held: dict[type, frozenset[str]] = {}

    def lacks(kind: type) -> frozenset[str]:
        if kind not in held:
            held[kind] = frozenset(unsupported(kind))
        return held[kind]
    return lacks


def _table_of(reference: ReferenceAnswer, answer: EngineAnswer) -> dict[str, KVCacheSpec]:
    for plan in (reference, answer):
        if isinstance(plan, KVCachePlan):
            return {n: s for g in plan.groups for n, s in g.layer_specs}
        if isinstance(plan, EnginePlan):
            return {n: s for g in _engine_groups(plan) for n, s in g.specs.items()}
    return {}


class _Pages:
    """The engine side's page of each spec (the engine's own rule), asked once per spec value
    and engine (specs are immutable values; one check compares thousands of plans of few specs)."""

    _HELD: dict[int, tuple[Any, dict[KVCacheSpec, int]]] = {}

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        held = self._HELD.get(id(engine))
        if held is None or held[0] is not engine:
            if len(self._HELD) > 8:
                self._HELD.clear()
            held = self._HELD[id(engine)] = (engine, {})
        self.pages = held[1]

    def __call__(self, spec: KVCacheSpec) -> int:
        if self.engine is None:
            return spec.page_size_bytes
        page = self.pages.get(spec)
        if page is None:
            if len(self.pages) > 1 << 14:
                self.pages.clear()
            page = self.pages[spec] = int(self.engine.page_size(self.engine.to_engine(copy.copy(spec))))
        return page


def _compare_groups(out: _Collector, ref: list[_Group], eng: list[_Group], page: _Pages) -> None:
    by_members = {frozenset(g.names): g for g in eng}
    only_ref = [g for g in ref if frozenset(g.names) not in by_members]
    if only_ref:
        ref_sets = {frozenset(g.names) for g in ref}
        only_eng = [g for g in eng if frozenset(g.names) not in ref_sets]
        involved = [n for g in only_ref for n in g.names]
        # the layers of each set of kinds are the same in both plans: only how a bucket of them is
        # split into groups differs (the planner's split arithmetic, not which layers go together)
        what = "group-split" if _buckets(ref) == _buckets(eng) else "groups"
        out.add(what, involved, f"reference {len(ref)} groups, engine {len(eng)}: reference "
                f"{' '.join(_names(g.names) for g in only_ref[:2])}{' ...' * (len(only_ref) > 2)}, engine "
                f"{' '.join(_names(g.names) for g in only_eng[:2])}{' ...' * (len(only_eng) > 2)}")
    for g in ref:
        other = by_members.get(frozenset(g.names))
        if other is not None:
            _compare_group(out, g, other, page)


def _buckets(groups: list[_Group]) -> dict[frozenset[str], frozenset[str]]:
    """The layers of a plan's groups by the set of kinds each group holds."""
    out: dict[frozenset[str], set[str]] = {}
    for g in groups:
        out.setdefault(frozenset(type(s).__name__ for s in g.specs.values()), set()).update(g.names)
    return {k: frozenset(v) for k, v in out.items()}


def _held(out: _Collector, spec: KVCacheSpec, fields: tuple[str, ...]) -> tuple[str, ...]:
    """``fields`` less those the engine lacks for ``spec``'s kind."""
    lacked = out.lacks(type(spec))
    return tuple(f for f in fields if f not in lacked) if lacked else fields


def _compare_group(out: _Collector, ref: _Group, eng: _Group, page: _Pages) -> None:
    names, label = list(ref.names), _names(ref.names)
    missing = [n for n in ref.names if n not in eng.specs]
    if missing:  # an engine group without a spec for some members: nothing else can be read
        out.add("layer-spec", missing, f"{_names(missing)}: the engine's group has no spec for them", ("kind",))
        return
    if ref.merged != eng.merged:
        form = {True: "merged", False: "per-member"}
        out.add("group-form", names, f"{label}: reference {form[ref.merged]}, engine {form[eng.merged]}")
    ref_first, eng_first = ref.first, eng.first
    if manager_of(ref_first) != manager_of(eng_first):
        out.add("manager", names, f"{label}: reference {manager_of(ref_first)}, engine {manager_of(eng_first)}")
    if ref_first.block_size != eng_first.block_size:
        out.add("group-block-size", names, f"{label}: reference {ref_first.block_size}, engine "
                f"{eng_first.block_size}")
    ref_pages = sorted({s.page_size_bytes for s in ref.specs.values()})
    eng_pages = sorted({page(s) for s in eng.specs.values()})
    if ref_pages != eng_pages:
        out.add("group-page", names, f"{label}: reference {'/'.join(map(str, ref_pages))} B, engine "
                f"{'/'.join(map(str, eng_pages))} B")
    if ref.merged and eng.merged:
        fields = _held(out, ref_first, spec_mismatch(ref_first, eng_first))
        if fields and fields != ("block_size",):
            fields = tuple(f for f in fields if f != "block_size")
            out.add("group-spec", names, f"{label}: {_spec_detail(ref_first, eng_first, fields)}", fields)
        return
    for n in ref.names:
        fields = _held(out, ref.specs[n], spec_mismatch(ref.specs[n], eng.specs[n]))
        if fields:
            out.add("layer-spec", [n], f"{n}: {_spec_detail(ref.specs[n], eng.specs[n], fields)}", fields)


@dataclasses.dataclass(frozen=True)
class _Placement:
    """Where one layer's pages lie: its tensor's size, its first byte, the bytes from one of
    its blocks to the next, and one past its last byte (None where the engine does not say)."""

    size: int
    start: int | None
    stride: int | None
    end: int | None


_Side = tuple[Sequence[Any], Mapping[str, int], int]
"""A plan's tensors, the page of each layer, and its number of blocks."""


def _placements(side: _Side) -> tuple[dict[str, _Placement], list[str]]:
    """Each layer's placement, and the layers held by no tensor or by several."""
    tensors, pages, num_blocks = side
    out: dict[str, _Placement] = {}
    held: dict[str, int] = {}
    for t in tensors:
        for i, name in enumerate(t.layer_names):
            held[name] = held.get(name, 0) + 1
            if None in (t.offset, t.layer_stride, t.block_stride):
                out[name] = _Placement(t.size_bytes, None, None, None)
                continue
            start = t.offset + i * t.layer_stride
            end = start + max(num_blocks - 1, 0) * t.block_stride + pages.get(name, 0) if num_blocks else start
            out[name] = _Placement(t.size_bytes, start, t.block_stride, end)
    return out, sorted(n for n, count in held.items() if count != 1)


def _compare_tensors(out: _Collector, ref_side: _Side, eng_side: _Side, blocks_agree: bool) -> None:
    """Per layer: held by one tensor, the tensor's size, its first byte, its block stride and its
    last byte. Which same-spec layers share a tensor is not compared apart from that: the
    bytes each layer is viewed at are what a consumer reads."""
    ref, _ = _placements(ref_side)
    eng, wrong = _placements(eng_side)
    unheld = sorted(set(ref) - set(eng)) + [n for n in wrong if n in ref]
    if unheld:
        out.add("tensor-layers", unheld, f"{_names(unheld)}: held by {'several tensors' if unheld[0] in eng else 'no tensor'}"
                " in the engine's plan, by one in the reference's")
    sizes = sorted({(r.size, eng[n].size) for n, r in ref.items() if n in eng and r.size != eng[n].size})
    if sizes:
        out.add("tensor-size", list(ref), f"reference {sizes[0][0]} B, engine {sizes[0][1]} B")
    for name, r in ref.items():
        e = eng.get(name)
        if e is None or e.start is None or name in wrong:
            continue
        if ref_side[2] == 0 and eng_side[2] == 0:
            continue  # no block on either side: empty tensors, whose first byte holds nothing
        if r.start != e.start:
            out.add("tensor-offset", [name], f"{name} starts at byte {r.start} (reference), {e.start} (engine)")
        elif r.stride != e.stride:
            out.add("tensor-stride", [name], f"{name}: block stride reference {r.stride}, engine {e.stride}")
        elif r.end != e.end and blocks_agree:
            out.add("tensor-bounds", [name], f"{name} ends at byte {r.end} (reference), {e.end} (engine)")


def expected_of(reference: ReferenceAnswer, difference: Difference) -> tuple[str, Any, tuple[str, ...]]:
    """What the reference's plan says about ``difference``: ``(layer, value, fields)``, where
    ``layer`` is the (first) layer it concerns and ``value`` the reference's answer for its
    class: the partition (``groups``), ``merged`` or ``per-member`` (``group-form``), the kinds
    the group's manager serves (``manager``), the block size, the pages, the spec (with the
    ``fields`` that differ), the number of blocks, or the layer's tensor size, first byte, block
    stride or end (``tensor-*``). A refusal has no value."""
    layer = difference.layers[0] if difference.layers else ""
    if isinstance(reference, BaseException) or difference.what in ("refused", "raised"):
        return layer, None, ()
    groups = _reference_groups(reference)
    if difference.what in ("groups", "group-split"):
        return layer, sorted(sorted(g.names) for g in groups), ()
    if difference.what == "num-blocks":
        return layer, reference.num_blocks, ()
    if difference.what == "tensor-layers":
        return layer, 1, ()
    if difference.what.startswith("tensor-"):
        pages = {n: s.page_size_bytes for g in groups for n, s in g.specs.items()}
        p = _placements((reference.tensors, pages, reference.num_blocks))[0][layer]
        return layer, {"tensor-size": p.size, "tensor-offset": p.start, "tensor-stride": p.stride,
                       "tensor-bounds": p.end}[difference.what], ()
    group = next(g for g in groups if layer in g.names)
    values: dict[str, Any] = {
        "group-form": "merged" if group.merged else "per-member",
        "manager": tuple(sorted(k.__name__ for k in SPEC_KINDS if manager_of_kind(k) == manager_of(group.first))),
        "group-block-size": group.first.block_size,
        "group-page": sorted({s.page_size_bytes for s in group.specs.values()}),
        "group-spec": group.first,
        "layer-spec": group.specs[layer],
    }
    return layer, values[difference.what], difference.fields


def count_by_class(differences: Iterable[Difference]) -> dict[str, int]:
    """How many differences of each class (folded ones counted), in :data:`CLASSES` order."""
    counts = dict.fromkeys(CLASSES, 0)
    for d in differences:
        counts[d.what] += 1 + d.more
    return {c: n for c, n in counts.items() if n}


__all__ = ["CLASSES", "Difference", "compare", "count_by_class", "expected_of", "judged_fields", "spec_mismatch"]
