"""One generic merge over field roles, and the uniformity and grouping built on it.

Chapters MERGE, ERROR, UNIFORM and GROUP of ``spec/SPEC.md``. Nothing here is
per spec kind: every rule comes from the roles in the fields' metadata.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from kvcontract.reference.roles import AnnotationRule, Role, role_of, rule_of
from kvcontract.reference.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    InvalidSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)

S = TypeVar("S", bound=KVCacheSpec)


@dataclasses.dataclass(frozen=True)
class Disagreement:
    """One field on which the members of a would-be group disagree (ERROR-MESSAGE-1)."""

    field: str
    """The field's name, or ``"kind"`` when the members are of different kinds."""
    role: Role | None
    """The field's role; None for ``"kind"``."""
    values: tuple[Any, ...]
    """The distinct values, in order of first appearance."""

    def describe(self) -> str:
        role = "" if self.role is None else f" ({self.role.value})"
        return f"{self.field}{role}: " + " vs ".join(_show(v) for v in self.values)


def _show(value: Any) -> str:
    if isinstance(value, type):
        return value.__name__
    return repr(value)


class IncompatibleSpecs(AssertionError):
    """The specs cannot share a KV-cache group (ERROR-TYPE-1).

    A subclass of ``AssertionError``, so engines' grouping code that catches
    ``AssertionError`` treats it as "not mergeable"; raised explicitly, so it
    is the same under ``python -O`` (ERROR-OPTIMIZE-1). ``disagreements`` names
    every field that disagrees with its values (ERROR-MESSAGE-1).
    """

    def __init__(self, disagreements: Sequence[Disagreement], reason: str = "") -> None:
        self.disagreements: tuple[Disagreement, ...] = tuple(disagreements)
        self.reason = reason
        super().__init__()

    def __str__(self) -> str:
        # built when read, not when raised: a refusal the caller never prints formats no value
        parts = [d.describe() for d in self.disagreements]
        return "incompatible KV cache specs: " + ("; ".join(parts) if parts else self.reason)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.disagreements, self.reason)

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of the disagreeing fields."""
        return tuple(d.field for d in self.disagreements)


class GroupingError(ValueError):
    """The layers cannot be arranged into groups with one page size (GROUP-PAGE-1)."""


def _distinct(values: Sequence[Any]) -> tuple[Any, ...]:
    """The distinct values (equal and of one type), in order of first appearance."""
    if values and all(v is values[0] for v in values):  # one object throughout: the common case
        return (values[0],)
    seen: list[Any] = []
    for value in values:
        if not any(value == s and type(value) is type(s) for s in seen):
            seen.append(value)
    return tuple(seen)


_RULES: dict[type[Any], tuple[tuple[str, Role, AnnotationRule | None], ...]] = {}


def _rules(kind: type[Any]) -> tuple[tuple[str, Role, AnnotationRule | None], ...]:
    """Each field of ``kind``: its name, role and, for an annotation, its merge rule (read once
    per kind: a merge runs for every example a check judges)."""
    rules = _RULES.get(kind)
    if rules is None:
        rules = _RULES[kind] = tuple((f.name, role_of(f), rule_of(f) if role_of(f) is Role.ANNOTATION else None)
                                     for f in dataclasses.fields(kind))
    return rules


def merge(specs: Sequence[S]) -> S:
    """Merge the specs of one group's layers into the group's spec.

    MERGE-KIND-1, MERGE-AGREE-1, MERGE-UNION-1, MERGE-ANNOTATION-1; raises
    :class:`IncompatibleSpecs` per ERROR-DETECT-1, ERROR-EMPTY-1, ERROR-KIND-1.

    raises: IncompatibleSpecs
    post: type(__return__) is type(specs[0])
    post: __return__.page_size_bytes == specs[0].page_size_bytes
    post: __return__.block_size == specs[0].block_size
    post: all(getattr(__return__, f.name) == any(getattr(s, f.name) for s in specs) for f in dataclasses.fields(__return__) if role_of(f) is Role.CAPABILITY)
    post: all(getattr(__return__, f.name) == getattr(s, f.name) for s in specs for f in dataclasses.fields(__return__) if role_of(f) in (Role.LAYOUT, Role.ALLOCATION))
    """
    key = tuple(map(id, specs))
    held = _MERGES.get(key)
    if held is None or not all(a is b for a, b in zip(held[0], specs, strict=True)):
        if len(_MERGES) >= _MERGES_KEPT:
            _MERGES.clear()
        answer: KVCacheSpec | IncompatibleSpecs
        try:
            answer = _merge(specs)
        except IncompatibleSpecs as exc:
            answer = exc
        held = _MERGES[key] = (tuple(specs), answer)
    if isinstance(held[1], IncompatibleSpecs):  # a fresh error each time: a raised one collects frames
        raise IncompatibleSpecs(held[1].disagreements, held[1].reason)
    return cast(S, held[1])


_MERGES: dict[tuple[int, ...], tuple[tuple[KVCacheSpec, ...], KVCacheSpec | IncompatibleSpecs]] = {}
"""Each merge's answer (or refusal) by the identity of its specs, held alive beside it so an
identity stays theirs: specs are immutable, a check judges each enumerated table by many
clauses, and grouping merges the same list more than once (a uniform table: to test it,
then for its group). 17,000 of a quick pass's 32,000 merges were repeats."""
_MERGES_KEPT = 16384


def _merge(specs: Sequence[S]) -> S:
    if len(specs) == 0:
        raise IncompatibleSpecs((), reason="a group needs at least one layer spec (ERROR-EMPTY-1)")
    specs = list({id(s): s for s in specs}.values())  # one object more than once adds nothing to a merge
    kinds = _distinct([type(s) for s in specs])
    if len(kinds) > 1:
        raise IncompatibleSpecs((Disagreement("kind", None, kinds),))
    first = specs[0]
    disagreements: list[Disagreement] = []
    changes: dict[str, Any] = {}
    for name, role, rule in _rules(type(first)):
        values = [getattr(s, name) for s in specs]
        if role is Role.CAPABILITY or rule is AnnotationRule.ANY:
            changes[name] = any(values)
            continue
        if role is Role.ANNOTATION:  # AnnotationRule.COMMON
            values = [v for v in values if v is not None]
        distinct = _distinct(values)
        if len(distinct) > 1:
            disagreements.append(Disagreement(name, role, distinct))
        elif role is Role.ANNOTATION:
            changes[name] = distinct[0] if distinct else None
    for names in first.mutually_exclusive:
        set_names = tuple(n for n in names if changes.get(n, getattr(first, n)) is not None)
        if len(set_names) > 1 and not any(d.field in names for d in disagreements):
            pairs = tuple(f"{n}={changes[n]!r}" for n in set_names)
            disagreements.append(Disagreement("+".join(set_names), Role.ANNOTATION, pairs))
    if disagreements:
        raise IncompatibleSpecs(disagreements)
    return dataclasses.replace(first, **changes)


def is_uniform(specs_by_layer: Mapping[str, KVCacheSpec]) -> bool:
    """Whether all layers can share one group (UNIFORM-MERGE-1, UNIFORM-EMPTY-1).

    Never raises for incompatibility (UNIFORM-NORAISE-1).

    post: __return__ == (len(specs_by_layer) <= 1 or __return__)
    """
    if not specs_by_layer:
        return True
    try:
        merge(list(specs_by_layer.values()))
    except IncompatibleSpecs:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class KVCacheGroup:
    """Layers sharing one block table, and their merged spec (GROUP-MERGED-1)."""

    layer_names: tuple[str, ...]
    spec: KVCacheSpec


def _fixed_page(spec: KVCacheSpec) -> bool:
    """Pages whose size is a field of their own (SPEC-PAGE-4): neither scaled by
    ``block_size`` nor padded."""
    return isinstance(spec, HiSparseHotSpec | HiSparseResidentSpec)


def _pads_instead_of_scaling(spec: KVCacheSpec) -> bool:
    return isinstance(spec, MambaSpec)


def _may_pad(spec: KVCacheSpec) -> bool:
    """GROUP-PAGE-1 step 4: MLA pages (MLAAttentionSpec and subclasses) are read in
    whole token rows and are never padded; SlidingWindowMLASpec is padded like
    any attention page (the open question in SPEC.md)."""
    return isinstance(spec, MambaSpec) or (isinstance(spec, AttentionSpec)
                                           and not isinstance(spec, MLAAttentionSpec))


def unify_page_sizes(specs_by_layer: Mapping[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """Give every layer the largest page size (GROUP-PAGE-1).

    The largest page is the target; a layer already at it is kept as it is. A
    smaller Mamba page is padded (``page_size_padded``) to the target. Any other
    smaller page that divides the target grows its ``block_size`` by the ratio
    target // page. One that does not divide is padded when it is an attention
    page other than an MLAAttentionSpec one (indexed in whole token rows). A fixed
    page (SPEC-PAGE-4) is neither scaled nor padded. Raises
    :class:`GroupingError` for every layer it cannot bring to the target.

    raises: GroupingError
    post: len({s.page_size_bytes for s in __return__.values()}) <= 1
    post: sorted(__return__) == sorted(specs_by_layer)
    """
    if not specs_by_layer:
        return {}
    target = max(s.page_size_bytes for s in specs_by_layer.values())
    unified: dict[str, KVCacheSpec] = {}
    for name, spec in specs_by_layer.items():
        page = spec.page_size_bytes
        if page == target:
            unified[name] = spec
        elif _fixed_page(spec):
            raise GroupingError(
                f"layer {name!r}: its page of {page} bytes is fixed by page_size "
                f"({type(spec).__name__}, SPEC-PAGE-4) and cannot grow to the largest "
                f"page ({target} bytes) (GROUP-PAGE-1)"
            )
        elif target % page == 0 and not _pads_instead_of_scaling(spec):
            try:
                unified[name] = dataclasses.replace(spec, block_size=spec.block_size * (target // page))
            except InvalidSpec as exc:  # a padded page cannot grow past its padding
                raise GroupingError(f"layer {name!r}: cannot grow its block size to reach {target} "
                                    f"bytes: {exc} (GROUP-PAGE-1)") from None
        elif _may_pad(spec):
            try:
                unified[name] = dataclasses.replace(spec, page_size_padded=target)  # type: ignore[call-arg]
            except InvalidSpec as exc:
                raise GroupingError(f"layer {name!r}: cannot pad its page to {target} "
                                    f"bytes: {exc} (GROUP-PAGE-1)") from None
        else:
            raise GroupingError(
                f"layer {name!r}: page of {page} bytes neither divides the largest page "
                f"({target} bytes) nor may be padded ({type(spec).__name__}) (GROUP-PAGE-1)"
            )
        if unified[name].page_size_bytes != target:
            raise GroupingError(
                f"layer {name!r}: could not bring its page to {target} bytes (GROUP-PAGE-1)"
            )
    return unified


def full_allocation_form(spec: KVCacheSpec) -> KVCacheSpec:
    """The spec a local-attention layer gets when it is allocated as full attention
    (GROUP-MERGED-1's fallback): a sliding-window layer becomes the full-attention
    kind of its family with the window kept as the ``sliding_window`` annotation
    (SlidingWindowMLASpec -> MLAAttentionSpec, SlidingWindowSpec ->
    FullAttentionSpec), a chunked-local layer a FullAttentionSpec with
    ``attention_chunk_size``. Fields the full kind lacks are dropped; other kinds
    are returned unchanged.
    """
    if isinstance(spec, SlidingWindowMLASpec):
        target: type[KVCacheSpec] = MLAAttentionSpec
        extra: dict[str, Any] = {"sliding_window": spec.sliding_window}
    elif isinstance(spec, SlidingWindowSpec):
        target, extra = FullAttentionSpec, {"sliding_window": spec.sliding_window}
    elif isinstance(spec, ChunkedLocalAttentionSpec):
        target, extra = FullAttentionSpec, {"attention_chunk_size": spec.attention_chunk_size}
    else:
        return spec
    names = {f.name for f in dataclasses.fields(target) if f.init}
    values = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)
              if f.name in names and f.name not in ("sliding_window", "attention_chunk_size")}
    return target(**values, **extra)


def group_layers(specs_by_layer: Mapping[str, KVCacheSpec]) -> list[KVCacheGroup]:
    """Arrange layers into KV-cache groups (chapter GROUP).

    All layers in one group when they are uniform; otherwise page sizes are
    unified and each layer joins the first group it merges with, in layer order.
    Every layer lands in exactly one group (GROUP-PARTITION-1); a group's spec is
    the merge of its members (GROUP-MERGED-1), so its capabilities are their
    union (GROUP-UNION-1); layers whose specs merge share a group (GROUP-SHARE-1).

    raises: GroupingError
    post: len({g.spec.page_size_bytes for g in __return__}) <= 1
    post: sorted(n for g in __return__ for n in g.layer_names) == sorted(specs_by_layer)
    """
    if not specs_by_layer:
        return []
    if is_uniform(specs_by_layer):
        return [KVCacheGroup(tuple(specs_by_layer), merge(list(specs_by_layer.values())))]
    buckets = merge_buckets(unify_page_sizes(specs_by_layer))
    return [KVCacheGroup(tuple(names), merge(members)) for names, members in buckets]


def merge_buckets(specs_by_layer: Mapping[str, KVCacheSpec]) -> list[tuple[list[str], list[KVCacheSpec]]]:
    """Layers in buckets whose specs merge: each layer joins the first bucket it merges with,
    in table order (GROUP-SHARE-1); ``(layer names, their specs)`` per bucket.

    post: sorted(n for names, _ in __return__ for n in names) == sorted(specs_by_layer)
    """
    buckets: list[tuple[list[str], list[KVCacheSpec]]] = []
    for name, spec in specs_by_layer.items():
        for names, members in buckets:
            try:
                merge([*members, spec])
            except IncompatibleSpecs:
                continue
            names.append(name)
            members.append(spec)
            break
        else:
            buckets.append(([name], [spec]))
    return buckets
