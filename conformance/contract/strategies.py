"""Hypothesis strategies over reference specs, driven by the field roles.

- :func:`specs` — one valid spec of a kind;
- :func:`compatible_specs` — a list that merges: equal in LAYOUT/ALLOCATION fields, free
  in CAPABILITY and ANNOTATION fields;
- :func:`near_misses` — a list that is compatible except for exactly one field, for
  every field and every role (ERROR-DETECT-1);
- :func:`layer_tables` — layer-name -> spec tables for grouping: hybrid models,
  target + draft layers, several kinds at once (chapter GROUP).

Values come from small, realistic domains (:data:`FIELD_DOMAINS`), so that every
engine can represent them and shrinking ends on readable examples. Enumerated value
sets (dtypes, enum members) come from the engine when its adapter offers
``value_domains()`` (:func:`domain_for`): every value the engine accepts, not a
hand-picked few. By default only what the engine's code builds (``producible_fields()``,
:func:`producible_domain`); ``--domain constructor`` draws every field and value. Counts
that are almost always at their default (``tokens_per_state``,
Mamba's ``num_heads``) keep it most of the time.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from kvcontract.conformance.engines.protocol import ProducibleDomain, ValueDomains
from kvcontract.reference import (
    SPEC_KINDS,
    AnnotationRule,
    InvalidSpec,
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    MambaSpec,
    MambaType,
    MLAAttentionSpec,
    Role,
    SlidingWindowMLASpec,
    SparseCacheRole,
    role_of,
    rule_of,
)

ATTENTION_DTYPES = (KVDtype.BFLOAT16, KVDtype.FLOAT16, KVDtype.FLOAT32, KVDtype.FLOAT8_E4M3, KVDtype.UINT8)
"""The first dtypes drawn (shrinking ends on them); every other ``KVDtype`` follows."""

ALL_DTYPES = (*ATTENTION_DTYPES, *(d for d in KVDtype if d not in ATTENTION_DTYPES))

ENUM_TYPES: dict[str, type[enum.Enum]] = {
    "KVDtype": KVDtype, "KVQuantMode": KVQuantMode, "SparseCacheRole": SparseCacheRole,
    "MambaType": MambaType,
}
"""Reference value types whose value set an engine may narrow or fill (``Domain.values``)."""


def _optional(values: Sequence[Any]) -> Any:
    return st.sampled_from([None, *values])


def _mostly(default: Any, others: Sequence[Any], weight: int = 7) -> Any:
    """``default`` about ``weight`` times in ``weight + len(others)``; shrinks to it."""
    return st.sampled_from([default] * weight + list(others))


FIELD_DOMAINS: dict[str, Any] = {
    "block_size": st.sampled_from([16, 1, 2, 32, 64, 128]),
    "dcp_sharded": st.booleans(),
    "block_stride_alignment": _optional([256, 4096]),
    "is_draft": st.booleans(),
    "max_tp_shards": _optional([1, 2, 8]),
    "num_kv_heads": st.sampled_from([1, 2, 4, 8]),
    "head_size": st.sampled_from([64, 128, 256, 576]),
    "dtype": st.sampled_from(ATTENTION_DTYPES),
    "head_size_v": _optional([64, 128]),
    "kv_quant_mode": st.sampled_from(list(KVQuantMode)),
    "page_size_padded": st.just(None),
    "num_head_slots": _optional([1, 2, 16]),
    "state_content_bytes": _optional([128, 656]),
    "kv_head_major_slots": st.booleans(),
    "tokens_per_state": _mostly(1, [4]),
    "sliding_window": _optional([128, 4096]),
    "attention_chunk_size": _optional([256, 8192]),
    "non_causal": st.booleans(),
    "cache_dtype_str": _optional(["auto", "fp8_ds_mla"]),
    "topk_buffer_width": _optional([2048]),
    "alignment": _optional([576, 4096]),
    "model_version": _optional(["deepseek_v4"]),
    "cache_role": st.sampled_from(list(SparseCacheRole)),
    "is_index_group_leader": st.booleans(),
    "non_causal_multi_token_decode": st.booleans(),
    "rswa_window": st.sampled_from([512, 2048]),
    "sink_len": _optional([16, 64]),
    "extra_retained_tokens": st.sampled_from([0, 3]),
    "bounded_replay": st.booleans(),
    # Some states are not multiples of any alignment drawn: 3x5 and 7x33 elements.
    "shapes": st.sampled_from([((3, 1024), (16, 64, 64)), ((4, 256),), ((2, 64, 32), (8, 8)),
                               ((3, 5),), ((7, 33), (5, 3))]),
    "state_alignment": st.sampled_from([1, 128, 64]),
    "mamba_type": st.sampled_from(list(MambaType)),
    "mamba_cache_mode": st.sampled_from(["none", "align"]),
    "num_speculative_blocks": st.sampled_from([0, 2]),
    "num_prefill_checkpoint_blocks": _mostly(0, [1, 2], weight=3),
    "prefill_checkpoint_alignment": _mostly(None, [16, 64], weight=3),
    "num_heads": _mostly(1, [2, 8]),
    "tp_replicated": st.booleans(),
    "page_size": st.sampled_from([4096, 65536, 1536]),
    "blocks_per_request": st.sampled_from([1, 4]),
}
"""Values drawn per field name (``dtypes`` of Mamba follows ``shapes``)."""

KIND_DOMAINS: dict[tuple[type[KVCacheSpec], str], Any] = {
    # MLA stores one latent vector per token: no separate V head.
    (MLAAttentionSpec, "head_size_v"): st.just(0),
    (SlidingWindowMLASpec, "head_size_v"): st.just(0),
    (MLAAttentionSpec, "num_kv_heads"): st.just(1),
    (SlidingWindowMLASpec, "num_kv_heads"): st.just(1),
    # A Mamba page holds one state per block unless the view says otherwise.
    (MambaSpec, "tokens_per_state"): _mostly(-1, [1, 4]),
}
"""Per-kind domains; a kind inherits those of the kinds it extends."""
REQUIRED_DOMAINS: dict[str, Any] = {
    "sliding_window": st.sampled_from([128, 4096]),
    "attention_chunk_size": st.sampled_from([256, 8192]),
}


_FIELD_TYPES: dict[str, dict[str, Any]] = {}


def _field_types(kind: type[KVCacheSpec]) -> dict[str, Any]:
    key = f"{kind.__module__}.{kind.__qualname__}"
    if key not in _FIELD_TYPES:
        _FIELD_TYPES[key] = typing.get_type_hints(kind)
    return _FIELD_TYPES[key]


def _enum_key(kind: type[KVCacheSpec], name: str) -> str | None:
    """The :data:`ENUM_TYPES` key of a field's value type (``dtypes``: its elements')."""
    tp = _field_types(kind).get(name)
    if typing.get_origin(tp) is tuple:
        tp = typing.get_args(tp)[0]
    for key, enum_type in ENUM_TYPES.items():
        if tp is enum_type:
            return key
    return None


@dataclasses.dataclass(frozen=True)
class Domain:
    """What an engine can represent: its kinds, per kind the fields it lacks
    (kept at their defaults), and per enumerated value type (a key of
    :data:`ENUM_TYPES`) the values it accepts. The default domain is the whole
    reference: every kind, every field, every value."""

    kinds: tuple[type[KVCacheSpec], ...] = SPEC_KINDS
    pinned: tuple[tuple[type[KVCacheSpec], frozenset[str]], ...] = ()
    values: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    """``(type key, values)``: the engine's value set for that type, in the
    reference's values; a type not listed takes every reference value."""
    restricted: tuple[tuple[type[KVCacheSpec], str, tuple[Any, ...]], ...] = ()
    """``(kind, field, values)``: the only values the field takes on that kind (the
    producible domain: the literals the engine's code passes)."""

    def __hash__(self) -> int:
        """Once per domain: it keys the strategies' caches, and hashing its tuples cost more than a draw."""
        held: int | None = self.__dict__.get("_hash")
        if held is None:
            held = hash((self.kinds, self.pinned, self.values, self.restricted))
            object.__setattr__(self, "_hash", held)
        return held

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}  # a type's hash is per process

    def restricted_values(self, kind: type[KVCacheSpec], name: str) -> tuple[Any, ...] | None:
        """The values field ``name`` of ``kind`` is restricted to; None: unrestricted."""
        return next((values for k, n, values in self.restricted if k is kind and n == name), None)

    def allows(self, kind: type[KVCacheSpec], name: str, value: Any) -> bool:
        """Whether ``value`` is in the domain's restriction of the field (True when none)."""
        values = self.restricted_values(kind, name)
        return values is None or any(value == v and type(value) is type(v) for v in values)

    def pinned_fields(self, kind: type[KVCacheSpec]) -> frozenset[str]:
        for k, names in self.pinned:
            if k is kind:
                return names
        return frozenset()

    def values_of(self, key: str) -> tuple[Any, ...]:
        """The values of an enumerated type (e.g. ``"KVDtype"``) in this domain."""
        for k, values in self.values:
            if k == key:
                return values
        return ALL_DTYPES if key == "KVDtype" else tuple(ENUM_TYPES[key])


FULL_DOMAIN = Domain()

_P = typing.ParamSpec("_P")
_R = typing.TypeVar("_R")


def _once(build: typing.Callable[_P, _R]) -> typing.Callable[_P, _R]:
    """``build`` once per arguments: hypothesis validates each new strategy it draws from (a fifth of a draw)."""
    return typing.cast(typing.Callable[_P, _R], functools.cache(build))

UNGROUPED_KINDS: dict[str, str] = {
    "HiddenStateCacheSpec": "hidden-state layers keep their own block table; vLLM sizes their block "
                            "to the common page after grouping (kv_cache_planning.py, _ensure_min_page_size), "
                            "a rule this version of the contract does not model",
    "HiSparseHotSpec": "HiSparse layers are grouped by their own planner when HiSparse is configured "
                       "(get_hisparse_kv_cache_groups); they do not occur in tables without it",
    "HiSparseResidentSpec": "as HiSparseHotSpec",
    "EncoderOnlyAttentionSpec": "encoder-only layers get no KV cache; engines build their attention "
                                "groups outside KV-cache grouping",
}
"""Kinds the GROUP clauses do not draw into layer tables, with the reason (SPEC.md §7)."""


def grouping_domain(domain: Domain) -> Domain:
    """``domain`` without the kinds grouping tables leave out (:data:`UNGROUPED_KINDS`)."""
    return dataclasses.replace(domain, kinds=tuple(k for k in domain.kinds if k.__name__ not in UNGROUPED_KINDS))


@_once
def field_domain(kind: type[KVCacheSpec], f: dataclasses.Field[Any], domain: Domain = FULL_DOMAIN) -> Any:
    """The strategy for one field of one kind (``dtypes`` of Mamba: :func:`state_dtypes`),
    within the domain's restriction of the field when it has one (:data:`KIND_DOMAINS` first)."""
    restricted = domain.restricted_values(kind, f.name)
    if restricted is None or any((k, f.name) in KIND_DOMAINS for k in kind.__mro__):
        return _field_domain(kind, f, domain)
    return st.sampled_from(sorted(restricted, key=lambda v: v != f.default))  # shrink towards the default


def _field_domain(kind: type[KVCacheSpec], f: dataclasses.Field[Any], domain: Domain) -> Any:
    for k in kind.__mro__:
        if (k, f.name) in KIND_DOMAINS:
            return KIND_DOMAINS[(k, f.name)]
    if f.default is dataclasses.MISSING and f.name in REQUIRED_DOMAINS:
        return REQUIRED_DOMAINS[f.name]
    key = _enum_key(kind, f.name)
    if key is not None and f.name != "dtypes":
        values = list(domain.values_of(key))
        if f.default in values:  # shrink towards the default
            values.remove(f.default)
            values.insert(0, f.default)
        return st.sampled_from(values)
    if f.name not in FIELD_DOMAINS:
        raise KeyError(f"no value domain for field {kind.__name__}.{f.name}")
    return FIELD_DOMAINS[f.name]


@_once
def state_dtypes(count: int, domain: Domain = FULL_DOMAIN) -> Any:
    """Element types of ``count`` Mamba states."""
    return st.tuples(*[st.sampled_from(domain.values_of("KVDtype")) for _ in range(count)])


DOMAIN_MODES = ("producible", "constructor")
"""``producible`` (default): what the engine's own code builds; ``constructor``: every field and value."""
DOMAIN_ENV = "KVCONTRACT_DOMAIN"
"""The process's domain mode, inherited by the workers it starts (:func:`use_domain`)."""


def domain_mode(mode: str | None = None) -> str:
    """``mode``, else this process's domain mode (:data:`DOMAIN_ENV`, default ``producible``)."""
    mode = mode or os.environ.get(DOMAIN_ENV) or DOMAIN_MODES[0]
    if mode not in DOMAIN_MODES:
        raise ValueError(f"unknown domain {mode!r}; expected one of {', '.join(DOMAIN_MODES)}")
    return mode


def use_domain(mode: str | None) -> None:
    """Make ``mode`` (when given) the domain mode of this process and of the workers it starts."""
    if mode is not None:
        os.environ[DOMAIN_ENV] = domain_mode(mode)


def domain_for(engine: Any, mode: str | None = None) -> Domain:
    """The domain an engine can represent: its kinds, its missing fields pinned, and
    the value sets of its ``value_domains()`` when the adapter offers one (an
    adapter without it gets every reference value). In the ``producible`` mode (``mode``
    None: :func:`domain_mode`), an adapter with ``producible_fields()`` also gets the
    fields its engine never sets pinned and literal-only fields restricted
    (:func:`producible_domain`); an adapter without it keeps the constructor domain."""
    mode = domain_mode(mode)
    missing = engine.unsupported_kinds()
    kinds_ = tuple(k for k in SPEC_KINDS if k not in missing)
    pinned = tuple((k, frozenset(engine.unsupported_fields(k))) for k in kinds_)
    values: Mapping[str, Sequence[Any]] = engine.value_domains() if isinstance(engine, ValueDomains) else {}
    unknown = sorted(set(values) - set(ENUM_TYPES))
    if unknown:
        raise ValueError(f"{type(engine).__name__}.value_domains(): unknown value types {unknown}; "
                         f"expected keys of {sorted(ENUM_TYPES)}")
    domain = Domain(kinds=kinds_, pinned=pinned,
                    values=tuple((key, tuple(values[key])) for key in ENUM_TYPES if key in values))
    if mode == "producible" and isinstance(engine, ProducibleDomain):
        return producible_domain(domain, engine.producible_fields())
    return domain


def producible_domain(domain: Domain, produced: Mapping[str, Mapping[str, Any]]) -> Domain:
    """``domain`` narrowed to what an engine's code builds (``produced``: see ``ProducibleDomain``).
    Per kind, a field with a default that no site sets is pinned (one the spec derives is derived
    again); a field every site sets to a literal takes those literals, and its default too where
    some construction leaves it out."""
    pinned, restricted = [], []
    for kind in domain.kinds:
        sets = produced.get(kind.__name__, {})
        names = set(domain.pinned_fields(kind))
        for f in dataclasses.fields(kind) if "*" not in sets else ():  # "*": a call sets fields unread
            if not f.init or f.name in names:
                continue
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            record = sets.get(f.name)
            if record is None:
                if has_default:
                    names.add(f.name)
                continue
            if getattr(record, "literals", None) is None or f.name == "dtypes":
                continue
            values = list(record.literals)
            if has_default and not getattr(record, "always_set", False) \
                    and not any(f.default == v and type(f.default) is type(v) for v in values):
                values.append(f.default)
            if values == [f.default]:
                names.add(f.name)  # only ever its default (``page_size_padded=None``)
            else:
                restricted.append((kind, f.name, tuple(values)))
        pinned.append((kind, frozenset(names)))
    return dataclasses.replace(domain, pinned=tuple(pinned), restricted=tuple(restricted))


@_once
def kinds(domain: Domain = FULL_DOMAIN) -> Any:
    """Any concrete spec kind of the domain."""
    return st.sampled_from(domain.kinds)


@st.composite
def specs(draw: Any, kind: type[KVCacheSpec] | None = None, domain: Domain = FULL_DOMAIN) -> KVCacheSpec:
    """One valid spec of ``kind`` (any kind of the domain when None)."""
    if kind is None:
        kind = draw(kinds(domain))
    pinned = domain.pinned_fields(kind)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        if f.name == "dtypes" or f.name in pinned:
            continue
        values[f.name] = draw(field_domain(kind, f, domain))
    if "shapes" in values:
        values["dtypes"] = draw(state_dtypes(len(values["shapes"]), domain))
    try:
        spec = kind(**values)
    except InvalidSpec:
        assume(False)
        raise  # unreachable: assume(False) aborts the example
    assume(spec.page_size_bytes > 0)
    return spec


@_once
def _flag(kind: type[KVCacheSpec], name: str, domain: Domain) -> Any:
    """A free flag's values: both, or the domain's restriction of it."""
    restricted = domain.restricted_values(kind, name)
    return st.booleans() if restricted is None else st.sampled_from(restricted)


def _free(f: dataclasses.Field[Any]) -> bool:
    """Fields whose members may differ in a compatible list."""
    role = role_of(f)
    return role is Role.CAPABILITY or (role is Role.ANNOTATION and rule_of(f) is AnnotationRule.ANY)


@st.composite
def compatible_specs(
    draw: Any, kind: type[KVCacheSpec] | None = None, min_size: int = 1, max_size: int = 4,
    domain: Domain = FULL_DOMAIN,
) -> list[KVCacheSpec]:
    """Specs that merge: one base, with capabilities and annotations varied per member.

    A *common* annotation is either the base's value or None in each member.
    """
    base = draw(specs(kind, domain))
    pinned = domain.pinned_fields(type(base))
    size = draw(st.integers(min_size, max_size))
    members = []
    for _ in range(size):
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(base):
            if f.name in pinned:
                continue
            if _free(f):
                changes[f.name] = draw(_flag(type(base), f.name, domain))
            elif role_of(f) is Role.ANNOTATION and getattr(base, f.name) is not None:
                changes[f.name] = draw(st.sampled_from([getattr(base, f.name), None]))
        try:
            members.append(dataclasses.replace(base, **changes))
        except InvalidSpec:
            assume(False)
    return members


def _must_agree(f: dataclasses.Field[Any]) -> bool:
    return role_of(f) in (Role.LAYOUT, Role.ALLOCATION) or (
        role_of(f) is Role.ANNOTATION and rule_of(f) is AnnotationRule.COMMON
    )


def disagreeing_fields(kind: type[KVCacheSpec]) -> tuple[str, ...]:
    """Fields on which two members may not differ (near-miss targets)."""
    return tuple(f.name for f in dataclasses.fields(kind) if _must_agree(f))


@st.composite
def near_misses(
    draw: Any, kind: type[KVCacheSpec] | None = None, field_name: str | None = None,
    domain: Domain = FULL_DOMAIN,
) -> tuple[list[KVCacheSpec], str]:
    """A compatible list plus one member that differs in exactly one field that
    must agree; returns ``(specs, field_name)``. The odd member sits at a random
    position."""
    if kind is None and field_name is None:
        # Stratified over (kind, field): every field of every kind is equally likely.
        kind, field_name = draw(st.sampled_from(kind_field_pairs(domain)))
    elif kind is None:
        kind = draw(kinds(domain))
    members = draw(compatible_specs(kind, min_size=1, max_size=3, domain=domain))
    if field_name is None:
        candidates = [n for n in disagreeing_fields(kind) if n not in domain.pinned_fields(kind)]
        field_name = draw(st.sampled_from(candidates))
    f = next(f for f in dataclasses.fields(kind) if f.name == field_name)
    if role_of(f) is Role.ANNOTATION and getattr(members[0], field_name) is None:
        # A common annotation disagrees only between members that set it.
        common = draw(field_domain(kind, f, domain).filter(lambda v: v is not None))
        try:
            members = [dataclasses.replace(m, **{field_name: common}) for m in members]
        except InvalidSpec:
            assume(False)
    base = members[0]
    current = getattr(base, field_name)
    if field_name == "dtypes":
        values = state_dtypes(len(getattr(base, "shapes")), domain)  # noqa: B009 - MambaSpec only
    else:
        values = field_domain(kind, f, domain)
    value = draw(values.filter(lambda v: v != current and v is not None)
                 if role_of(f) is Role.ANNOTATION else values.filter(lambda v: v != current))
    if role_of(f) is Role.ANNOTATION:
        assume(current is not None)
    try:
        odd = dataclasses.replace(base, **{field_name: value})
    except InvalidSpec:
        assume(False)
        raise
    assume(getattr(odd, field_name) != current)
    position = draw(st.integers(0, len(members)))
    return [*members[:position], odd, *members[position:]], field_name


def kind_field_pairs(domain: Domain = FULL_DOMAIN) -> list[tuple[type[KVCacheSpec], str]]:
    """Every (kind, field that must agree) of the domain."""
    return [(k, n) for k in domain.kinds for n in disagreeing_fields(k) if n not in domain.pinned_fields(k)]


@st.composite
def mixed_kind_pairs(draw: Any, domain: Domain = FULL_DOMAIN) -> tuple[KVCacheSpec, KVCacheSpec]:
    """Two specs of different kinds that agree on every field they share (e.g. a
    FullAttentionSpec and an RSWASpec identical but for rswa_window): the hardest
    case for ERROR-KIND-1, since only the kind tells them apart."""
    first = draw(specs(domain=domain))
    other = draw(st.sampled_from([k for k in domain.kinds if k is not type(first)]))
    pinned = domain.pinned_fields(other)
    shared = {f.name for f in dataclasses.fields(first)}
    values: dict[str, Any] = {}
    for f in dataclasses.fields(other):
        if f.name in pinned:
            continue
        if f.name in shared and domain.allows(other, f.name, getattr(first, f.name)):
            values[f.name] = getattr(first, f.name)
        elif f.name != "dtypes":
            values[f.name] = draw(field_domain(other, f, domain))
    if "shapes" in values and "dtypes" not in values:
        values["dtypes"] = draw(state_dtypes(len(values["shapes"]), domain))
    try:
        second = other(**values)
    except (InvalidSpec, TypeError):
        assume(False)
        raise
    return first, second


@st.composite
def layer_tables(
    draw: Any, max_groups: int = 3, max_layers_per_kind: int = 4, domain: Domain = FULL_DOMAIN,
) -> dict[str, KVCacheSpec]:
    """A model's layer table: several kinds at once, some layers of a kind
    differing only in capabilities (target + draft), in interleaved order."""
    bases = draw(st.lists(specs(domain=domain), min_size=1, max_size=max_groups))
    layers: list[tuple[str, KVCacheSpec]] = []
    for b, base in enumerate(bases):
        count = draw(st.integers(1, max_layers_per_kind))
        for i in range(count):
            spec = base
            if draw(st.booleans()):
                pinned = domain.pinned_fields(type(base))
                changes = {f.name: draw(_flag(type(base), f.name, domain)) for f in dataclasses.fields(base)
                           if _free(f) and f.name not in pinned}
                spec = dataclasses.replace(base, **changes)
            layers.append((f"layers.{b}.{i}", spec))
    order = draw(st.permutations(layers))
    return dict(order)
