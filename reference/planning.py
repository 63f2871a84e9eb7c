"""Planning: from a model's layer table to KV-cache groups (chapter PLAN of ``spec/SPEC.md``).

:func:`plan_groups` arranges the layers into groups (chapter GROUP's merged groups where
that is possible, else groups whose members keep their own specs: PLAN-TYPE-1);
:mod:`kvcontract.reference.sizing` turns groups and a memory budget into blocks and the
tensors that back every layer (PLAN-SIZE-1, PLAN-TENSOR-1). The order of the steps is
the contract's one conforming answer; where the contract leaves a choice (how a
bucket of layers is split into equal groups) the reference takes the choice vLLM
0.34.0 takes, so that ``kvcontract plan`` can show where an engine differs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from kvcontract.reference.merge import (
    GroupingError,
    full_allocation_form,
    is_uniform,
    merge,
    merge_buckets,
    unify_page_sizes,
)
from kvcontract.reference.roles import Role, role_of
from kvcontract.reference.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    InvalidSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SlidingWindowSpec,
)

# -- PLAN-TYPE-1: which layers may share a group with one spec per member -------------------

_MANAGERS: tuple[tuple[type[KVCacheSpec], str], ...] = (
    # most specific first: a kind is served by the manager of the first base it is an instance of
    (HiSparseHotSpec, "hisparse-hot"),
    (HiSparseResidentSpec, "hisparse-resident"),
    (RSWASpec, "reference-sliding-window"),
    (SlidingWindowSpec, "sliding-window"),  # SlidingWindowMLASpec too
    (ChunkedLocalAttentionSpec, "chunked-local"),
    (CircularBufferSpec, "circular-buffer"),
    (CrossAttentionSpec, "cross-attention"),
    (MambaSpec, "mamba"),
    (FullAttentionSpec, "full-attention"),  # MLA, hidden-state and static-sink layers too
)
"""The block manager that serves each kind (vLLM 0.34.0's ``register_all_kvcache_specs``). A
static-sink layer's manager is the full-attention manager plus one check at its construction
(``SinkFullAttentionManager.__init__`` asserts that the sink tokens fill whole blocks): it
allocates, keeps and frees blocks as full attention does, so it is the full-attention type."""

_NOT_TYPE = frozenset({"dcp_sharded", "sink_len"})
"""ALLOCATION fields that are no part of the type test: ``dcp_sharded`` is judged on its own;
``sink_len`` is read by no manager beyond that construction check of the group's first member."""

_MAMBA_SHARED = ("page_size_bytes", "state_alignment")
"""Layout values Mamba members must share beyond their allocation fields (the engine's own
type test compares them; its state pages are laid out per group)."""


def manager_of(spec: KVCacheSpec) -> str | None:
    """The block manager serving ``spec``'s kind; None for a kind without one (encoder-only)."""
    return manager_of_kind(type(spec))


def manager_of_kind(kind: type[KVCacheSpec]) -> str | None:
    """The block manager serving ``kind``; None for a kind without one (encoder-only)."""
    return next((name for base, name in _MANAGERS if issubclass(kind, base)), None)


def type_mismatch(first: KVCacheSpec, other: KVCacheSpec) -> str | None:
    """What keeps two layers out of one per-member group (PLAN-TYPE-1): ``block_size``,
    ``dcp_sharded``, ``manager``, an ALLOCATION field's name (``sink_len`` excepted), or a Mamba
    layout value's; None when they may share one."""
    if other.block_size != first.block_size:
        return "block_size"
    if other.dcp_sharded != first.dcp_sharded:
        return "dcp_sharded"
    if manager_of(first) is None or manager_of(other) != manager_of(first):
        return "manager"
    for name, default in _type_fields(type(first), type(other)):  # a field one kind lacks: its default
        if getattr(first, name, default) != getattr(other, name, default):
            return name
    if isinstance(first, MambaSpec) and isinstance(other, MambaSpec):
        return next((n for n in _MAMBA_SHARED if getattr(first, n) != getattr(other, n)), None)
    return None


_TYPE_FIELDS: dict[tuple[str, str], tuple[tuple[str, Any], ...]] = {}


def _type_fields(first: type[KVCacheSpec], other: type[KVCacheSpec]) -> tuple[tuple[str, Any], ...]:
    """The ALLOCATION fields two kinds' type test compares (``sink_len`` and ``dcp_sharded`` aside),
    each with the default a kind that lacks it reads as (worked out once per pair of kinds)."""
    key = (first.__qualname__, other.__qualname__)
    held = _TYPE_FIELDS.get(key)
    if held is None:
        fields = {f.name: f for kind in (first, other) for f in dataclasses.fields(kind)
                  if role_of(f) is Role.ALLOCATION and f.name not in _NOT_TYPE}
        held = _TYPE_FIELDS[key] = tuple((name, None if f.default is dataclasses.MISSING else f.default)
                                         for name, f in fields.items())
    return held


def is_uniform_type(specs_by_layer: Mapping[str, KVCacheSpec]) -> bool:
    """Whether the layers may share one group, each keeping its own spec (PLAN-TYPE-1): one
    block size, one DCP sharding, one block manager, equal ALLOCATION values. Symmetric.

    post: __return__ == (len(specs_by_layer) <= 1 or __return__)
    """
    specs = list(dict.fromkeys(specs_by_layer.values()))  # equal layers pass alike: each once
    return all(type_mismatch(specs[0], s) is None for s in specs[1:])  # equalities: one pass suffices


# -- groups ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlanGroup:
    """One group of a plan: its layers, the merged spec (None when every member keeps its
    own, PLAN-TYPE-1), and the spec each layer is allocated with."""

    layer_names: tuple[str, ...]
    spec: KVCacheSpec | None
    layer_specs: tuple[tuple[str, KVCacheSpec], ...]

    @property
    def block_size(self) -> int:
        return self.layer_specs[0][1].block_size

    @property
    def per_member(self) -> bool:
        return self.spec is None

    def describe(self) -> str:
        kinds = sorted({type(s).__name__ for _, s in self.layer_specs})
        pages = sorted({s.page_size_bytes for _, s in self.layer_specs})
        form = "per-member" if self.spec is None else "merged"
        return (f"{len(self.layer_names)} layers, {'+'.join(kinds)}, {form}, block_size {self.block_size}, "
                f"page {'/'.join(map(str, pages))} B")


def _replace(spec: KVCacheSpec, why: str, **changes: Any) -> KVCacheSpec:
    """``spec`` with ``changes``; a value no spec can have is a planning failure (GroupingError)."""
    try:
        return dataclasses.replace(spec, **changes)
    except InvalidSpec as exc:
        raise GroupingError(f"{type(spec).__name__}: cannot {why}: {exc}") from None


def _merged(names: Sequence[str], specs: Sequence[KVCacheSpec]) -> PlanGroup:
    spec = merge(list(specs))
    return PlanGroup(tuple(names), spec, tuple((n, spec) for n in names))


def _per_member(table: Mapping[str, KVCacheSpec]) -> PlanGroup:
    return PlanGroup(tuple(table), None, tuple(table.items()))


def promote_local(table: Mapping[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """PLAN-HYBRID-1: with the hybrid manager off, a table that mixes full attention with
    sliding-window or chunked-local layers allocates the local layers as full attention
    (:func:`~kvcontract.reference.full_allocation_form`): at the full layers' block size
    when they have one, the page padding scaled with it. A table that is already uniform,
    or of one type, is returned as it is. Raises :class:`GroupingError` when the result
    still cannot share one group.

    raises: GroupingError
    post: sorted(__return__) == sorted(table)
    """
    out = dict(table)
    if is_uniform(out) or is_uniform_type(out):
        return out
    local = (SlidingWindowSpec, ChunkedLocalAttentionSpec)
    has_full = any(isinstance(s, FullAttentionSpec) for s in out.values())
    if has_full and any(isinstance(s, local) for s in out.values()):
        full_sizes = {s.block_size for s in out.values() if isinstance(s, FullAttentionSpec)}
        for name, spec in table.items():
            if not isinstance(spec, local):
                continue
            block_size = next(iter(full_sizes)) if len(full_sizes) == 1 else spec.block_size
            try:
                promoted = full_allocation_form(spec)
            except InvalidSpec as exc:
                raise GroupingError(f"layer {name!r}: no full-allocation form: {exc} (PLAN-HYBRID-1)") from None
            out[name] = _at_block_size(promoted, spec, block_size)
    if not (is_uniform(out) or is_uniform_type(out)):
        raise GroupingError("the local layers, allocated as full attention, still cannot share one "
                            "group with the others (PLAN-HYBRID-1)")
    return out


def _at_block_size(promoted: KVCacheSpec, original: KVCacheSpec, block_size: int) -> KVCacheSpec:
    """``promoted`` at ``block_size``; a padded page grows with the block (PLAN-HYBRID-1)."""
    changes: dict[str, Any] = {"block_size": block_size}
    padded = getattr(original, "page_size_padded", None)
    if padded is not None and isinstance(original, AttentionSpec) and getattr(promoted, "alignment", None) is None:
        content = original.unpadded_page_size_bytes * block_size // original.block_size
        changes["page_size_padded"] = max(padded, content)
    return _replace(promoted, "be allocated as full attention (PLAN-HYBRID-1)", **changes)


def sharding_parts(table: Mapping[str, KVCacheSpec]) -> list[dict[str, KVCacheSpec]]:
    """The layers by DCP sharding: replicated attention layers (not DCP-sharded), and the
    others (PLAN-HYBRID-1), in table order."""
    parts: dict[bool, dict[str, KVCacheSpec]] = {}
    for name, spec in table.items():
        parts.setdefault(isinstance(spec, AttentionSpec) and not spec.dcp_sharded, {})[name] = spec
    return list(parts.values())


def unify_hybrid(table: Mapping[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """PLAN-HYBRID-1 per sharding: replicated attention layers and the others are promoted
    apart, as the hybrid-disabled planner does.

    raises: GroupingError
    post: sorted(__return__) == sorted(table)
    """
    out = dict(table)
    for part in sharding_parts(table):
        out.update(promote_local(part))
    return out


def _one_group(part: Mapping[str, KVCacheSpec], packed: bool = False) -> PlanGroup:
    """One sharding's group: merged where its layers merge, else per member; packed groups keep
    their members' own specs, as every packed group does (:func:`_packed_groups`)."""
    if is_uniform(part) and not packed:
        return _merged(list(part), list(part.values()))
    if is_uniform_type(part):
        return _per_member(part)
    raise GroupingError("the layers of one sharding do not form one group (PLAN-HYBRID-1)")


def _equal_groups(buckets: list[tuple[list[str], list[KVCacheSpec]]]) -> list[PlanGroup]:
    """Split buckets into groups of about equal size (the contract's free choice; the
    reference takes vLLM's: the smallest bucket's size, or the largest's when no bucket is
    half as large again as the smallest; ``layers[i::n]`` to the i-th of n groups)."""
    sizes = [len(names) for names, _ in buckets]
    group_size = max(sizes) if max(sizes) < min(sizes) * 1.5 else min(sizes)
    groups = []
    for names, members in buckets:
        count = -(-len(names) // group_size)
        by_name = dict(zip(names, members, strict=True))
        for i in range(count):
            part = names[i::count]
            groups.append(_merged(part, [by_name[n] for n in part]))
    return groups


def _full_allocation_fallback(table: Mapping[str, KVCacheSpec]) -> PlanGroup | None:
    """GROUP-MERGED-1's fallback where pages cannot be unified: MLA beside sliding-window
    layers, none chunked-local or hidden-state, allocated as one per-member full-attention
    group (PLAN-TYPE-1); None when that does not apply."""
    specs = list(table.values())
    if any(isinstance(s, HiddenStateCacheSpec | ChunkedLocalAttentionSpec) for s in specs):
        return None
    if not (any(isinstance(s, MLAAttentionSpec) for s in specs)
            and any(isinstance(s, SlidingWindowSpec) for s in specs)):
        return None
    try:
        promoted = promote_local(table)
    except GroupingError:
        return None
    return _per_member(promoted) if is_uniform_type(promoted) else None


def _hidden_state_groups(groups: list[PlanGroup], hidden: Mapping[str, KVCacheSpec]) -> list[PlanGroup]:
    """PLAN-HIDDEN-1: each hidden-state layer in a group of its own, its page padded to the
    groups' common page; the block size the largest divisor of the groups' block sizes whose
    tokens fit that page (the groups' blocks grow first when one token does not)."""
    common = groups[0].layer_specs[0][1].page_size_bytes
    per_token = max(_bytes_per_token(s) for s in hidden.values())
    if per_token > common:
        scale = -(-per_token // common)
        common *= scale
        groups = [_scaled(g, scale) for g in groups]
    gcd = math.gcd(*(g.block_size for g in groups))
    out = list(groups)
    for name, spec in hidden.items():
        fits = max(common // _bytes_per_token(spec), 1)
        block_size = next(d for d in range(min(gcd, fits), 0, -1) if gcd % d == 0)
        aligned = _replace(spec, f"pad hidden-state layer {name!r} to the common page of {common} bytes "
                           "(PLAN-HIDDEN-1)", block_size=block_size, page_size_padded=common)
        if aligned.page_size_bytes != common:
            raise GroupingError(f"hidden-state layer {name!r}: its page is {aligned.page_size_bytes} bytes, "
                                f"not the common {common} (its alignment derives the padding; PLAN-HIDDEN-1)")
        out.append(PlanGroup((name,), aligned, ((name, aligned),)))
    return out


def _bytes_per_token(spec: KVCacheSpec) -> int:
    """A hidden-state layer's content bytes per token (its page at one token per block)."""
    return -(-getattr(spec, "unpadded_page_size_bytes", spec.page_size_bytes) // spec.block_size)


def _scaled(group: PlanGroup, scale: int) -> PlanGroup:
    def grow(spec: KVCacheSpec) -> KVCacheSpec:
        changes: dict[str, Any] = {"block_size": spec.block_size * scale}
        padded = getattr(spec, "page_size_padded", None)
        if padded is not None:
            changes["page_size_padded"] = padded * scale
        return _replace(spec, f"grow its blocks {scale}-fold for the hidden states (PLAN-HIDDEN-1)", **changes)

    spec = None if group.spec is None else grow(group.spec)
    return PlanGroup(group.layer_names, spec, tuple((n, spec or grow(s)) for n, s in group.layer_specs))


def approximate_gcd(values: Sequence[int], lower_bound: int = 1) -> int:
    """The chunk ``d >= lower_bound`` that pads ``values`` up to multiples of ``d`` least (ties:
    the larger ``d``): how many pattern repeats a packed group takes (PLAN-TYPE-1's packing)."""
    low, high = max(1, lower_bound), max(values)
    if low > high:
        return low
    return min(range(low, high + 1), key=lambda d: (sum((d - x % d) % d for x in values), -d))


def _packed_groups(table: Mapping[str, KVCacheSpec]) -> list[PlanGroup]:
    """Block-outermost packing of layers of different pages (vLLM 0.34.0's
    ``_get_packed_kv_cache_groups``): layers in buckets of one type, first fit; a bucket whose
    page sizes occur equally often is a repeating pattern and is split into groups of about
    the same number of repeats (``approximate_gcd``, no fewer than the largest mixed pattern);
    state buckets (Mamba, rings) are split to the states one block of the widest group holds
    (a bucket whose pages repeat unevenly has no pattern: every n-th layer to a group).
    Every group keeps its members' own specs."""
    buckets: list[dict[str, KVCacheSpec]] = []
    for name, spec in table.items():
        bucket = next((b for b in buckets if is_uniform_type({**b, name: spec})), None)
        if bucket is None:
            buckets.append({name: spec})
        else:
            bucket[name] = spec
    shaped = []
    for bucket in buckets:
        by_page: dict[int, list[str]] = {}
        for name, spec in bucket.items():
            by_page.setdefault(spec.page_size_bytes, []).append(name)
        balanced = len({len(names) for names in by_page.values()}) == 1
        shaped.append((bucket, by_page, balanced, max(len(names) for names in by_page.values())))
    floor = max((most for _, by_page, balanced, most in shaped if balanced and len(by_page) > 1), default=0)
    repeats = approximate_gcd([most for *_, balanced, most in shaped if balanced], floor) if floor else None

    def count(balanced: bool, most: int) -> int:
        return -(-most // repeats) if balanced and repeats else 1

    def is_state(bucket: Mapping[str, KVCacheSpec]) -> bool:
        first = next(iter(bucket.values()))
        return isinstance(first, MambaSpec | CircularBufferSpec) or (
            repeats is None and isinstance(first, SlidingWindowSpec))

    def widest(by_page: Mapping[int, list[str]], n: int) -> int:
        return sum(-(-len(names) // n) * page for page, names in by_page.items())

    anchor = max(widest(by_page, len(bucket) if is_state(bucket) else count(balanced, most))
                 for bucket, by_page, balanced, most in shaped)
    groups = []
    for bucket, by_page, balanced, most in shaped:
        n = count(balanced, most)
        if anchor and is_state(bucket):
            per_block = max(anchor // next(iter(bucket.values())).page_size_bytes, 1)
            n = max(n, -(-len(bucket) // per_block))
        if n == 1:
            groups.append(_per_member(bucket))
            continue
        if balanced:  # whole pattern repeats, every n-th to the i-th group
            pattern = list(zip(*by_page.values(), strict=True))
            parts = [[name for repeat in pattern[i::n] for name in repeat] for i in range(n)]
        else:  # no repeating pattern (a state bucket of several pages): every n-th layer
            parts = [list(bucket)[i::n] for i in range(n)]
        groups.extend(_per_member({name: bucket[name] for name in names}) for names in parts if names)
    return groups


def _split_hidden(table: Mapping[str, KVCacheSpec]) -> tuple[dict[str, KVCacheSpec], dict[str, KVCacheSpec]]:
    """The hidden-state layers, and the others (PLAN-HIDDEN-1 sets the first apart)."""
    hidden: dict[str, KVCacheSpec] = {n: s for n, s in table.items() if isinstance(s, HiddenStateCacheSpec)}
    return hidden, {n: s for n, s in table.items() if n not in hidden}


def _with_hidden(groups: list[PlanGroup], hidden: Mapping[str, KVCacheSpec], packed: bool) -> list[PlanGroup]:
    """``groups`` and the hidden-state layers, one group each (PLAN-HIDDEN-1): padded to the
    common page where the pages are unified; as they are where the groups are packed (a
    block-outermost block holds every page side by side); one per-member group where there is
    nothing else and they are of one type."""
    if not hidden:
        return groups
    if not groups:
        return [_per_member(hidden)] if is_uniform_type(hidden) else [_merged([n], [s]) for n, s in hidden.items()]
    if packed:
        return [*groups, *(_merged([n], [s]) for n, s in hidden.items())]
    return _hidden_state_groups(groups, hidden)


def _is_packed(table: Mapping[str, KVCacheSpec], block_outermost: bool) -> bool:
    """Whether the layers are packed rather than brought to one page: a block-outermost block
    holds every layer's page side by side, so layers of several pages need no common page."""
    return block_outermost and len({s.page_size_bytes for s in table.values()}) > 1


def _hybrid_off_groups(table: Mapping[str, KVCacheSpec], block_outermost: bool
                       ) -> tuple[dict[str, KVCacheSpec], list[PlanGroup] | None]:
    """PLAN-HYBRID-1: the local layers promoted per DCP sharding, and no groups when the result
    is of one type (the general path then plans it as one group), else one group per sharding,
    on one page size unless the layout packs them, the hidden-state layers in groups of their
    own (PLAN-HIDDEN-1)."""
    unified = unify_hybrid(table)
    if is_uniform(unified) or is_uniform_type(unified):
        return unified, None
    hidden, rest = _split_hidden(unified)
    packed = _is_packed(rest, block_outermost)
    groups = [_one_group(part, packed) for part in sharding_parts(rest if packed else unify_page_sizes(rest))]
    return unified, _with_hidden(groups, hidden, packed)


def plan_groups(table: Mapping[str, KVCacheSpec], *, hybrid: bool = True,
                block_outermost: bool = False) -> list[PlanGroup]:
    """Arrange the layers into KV-cache groups (chapters GROUP and PLAN).

    In order: no layers: no groups; with ``hybrid=False`` the local layers are promoted and
    each DCP sharding is one group (PLAN-HYBRID-1), the hidden-state layers set apart as below;
    layers that all merge: one merged group (GROUP-SHARE-1); layers of one type: one
    per-member group (PLAN-TYPE-1); otherwise hidden-state layers are set apart
    (PLAN-HIDDEN-1); with ``block_outermost`` (every block holds all layers' pages side by
    side) layers of several page sizes are packed (:func:`_packed_groups`); else the pages
    are unified (GROUP-PAGE-1), falling back to full allocation where they cannot be
    (GROUP-MERGED-1), bucketed by merge and split into groups of about equal size; the
    hidden-state layers come last, one group each.

    raises: GroupingError
    post: sorted(n for g in __return__ for n in g.layer_names) == sorted(table)
    """
    if not table:
        return []
    if not hybrid:
        table, groups = _hybrid_off_groups(table, block_outermost)
        if groups is not None:
            return groups
    if is_uniform(table):
        return [_merged(list(table), list(table.values()))]
    if is_uniform_type(table):
        return [_per_member(table)]
    hidden, rest = _split_hidden(table)
    if rest and _is_packed(rest, block_outermost):
        return _with_hidden(_packed_groups(rest), hidden, packed=True)
    try:
        unified = unify_page_sizes(rest)
    except GroupingError:
        fallback = _full_allocation_fallback(table)
        if fallback is None:
            raise
        return [fallback]
    return _with_hidden(_equal_groups(merge_buckets(unified)) if unified else [], hidden, packed=False)
