"""The systematic phase: the contract's finite structure, enumerated.

Kinds x fields x roles is small. Before any random search, every law runs on
examples built deterministically from it:

- every kind, alone and with each field set to another valid value
  (:func:`single_specs`);
- every (kind, field that must agree): two members that differ in that field
  only, the odd one first and last (:func:`near_misses`);
- every (kind, capability or any-annotation field): 2- and 3-member lists
  with the flag at each position (:func:`flag_patterns`); every (kind,
  common-annotation field): members that set it or leave it None;
- every ordered pair of kinds, agreeing on every shared field
  (:func:`kind_pairs`);
- layer tables built from those: one kind with target and draft layers, two
  kinds side by side, page sizes that do and do not divide
  (:func:`tables`).

Values come from the field's own domain: a table of realistic values where
one exists, else derived from the field's default (a flag flipped, a count
doubled, an enum's other members), so a field added to a kind is enumerated
the day it appears.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Iterator
from typing import Any

from kvcontract.conformance.contract.strategies import (
    KIND_DOMAINS,
    Domain,
    disagreeing_fields,
)
from kvcontract.conformance.contract.values import (
    ALTERNATIVES,
    REQUIRED,
    derived_alternatives,
    fits,
    in_domain,
)
from kvcontract.reference import (
    AnnotationRule,
    InvalidSpec,
    KVCacheSpec,
    KVDtype,
    Role,
    role_of,
    rule_of,
)


def _build(kind: type[KVCacheSpec], values: dict[str, Any]) -> KVCacheSpec | None:
    try:
        return kind(**values)
    except (InvalidSpec, TypeError, ValueError):
        return None


def _settable(kind: type[KVCacheSpec], domain: Domain) -> list[dataclasses.Field[Any]]:
    pinned = domain.pinned_fields(kind)
    return [f for f in dataclasses.fields(kind) if f.init and f.name not in pinned]


@functools.cache
def _base(kind: type[KVCacheSpec], pinned: frozenset[str]) -> KVCacheSpec | None:
    values = {f.name: REQUIRED[f.name] for f in dataclasses.fields(kind)
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
              and f.name in REQUIRED}
    if any("MLA" in c.__name__ for c in kind.__mro__) and "head_size" in values:
        values["head_size"] = 576  # one latent vector of 512 + 64 per token
    return _build(kind, values)


def base_spec(kind: type[KVCacheSpec], domain: Domain) -> KVCacheSpec | None:
    """The base spec of ``kind``: defaults, required fields at realistic values."""
    return _base(kind, domain.pinned_fields(kind))  # type: ignore[arg-type]  # classes hash


def kind_values(kind: type[KVCacheSpec], name: str) -> tuple[Any, ...] | None:
    """The values a kind (or a kind it derives from) restricts a field to, e.g.
    an MLA cache's single latent head; None when the kind does not restrict it."""
    for cls in kind.__mro__:
        strategy = KIND_DOMAINS.get((cls, name))
        if strategy is not None:
            return tuple(getattr(strategy, "elements", ()))
    return None


_kind_values = kind_values


def variants(kind: type[KVCacheSpec], name: str, domain: Domain) -> list[KVCacheSpec]:
    """Valid specs equal to the base except for field ``name`` (each alternative value)."""
    base = base_spec(kind, domain)
    if base is None:
        return []
    current = getattr(base, name)
    candidates = _kind_values(kind, name)
    if candidates is None:
        candidates = domain.restricted_values(kind, name)
    if candidates is None:
        candidates = ALTERNATIVES.get(name)
    if name == "page_size_padded":
        candidates = (base.page_size_bytes * 2,)  # padded beyond the content
    if candidates is None:
        f = next(f for f in dataclasses.fields(kind) if f.name == name)
        default = f.default if f.default is not dataclasses.MISSING else current
        candidates = derived_alternatives(default)
    out = []
    for value in candidates:
        if value == current or not in_domain(value, domain) or not fits(kind, name, value) \
                or not domain.allows(kind, name, value):
            continue
        changes = {name: value}
        # A field the engine lacks stays at its declared default, so that one derived
        # from another (head_size_v from head_size) is derived again, not copied.
        for f in dataclasses.fields(kind):
            if f.init and f.name in domain.pinned_fields(kind) and f.name != name \
                    and f.default is not dataclasses.MISSING:
                changes[f.name] = f.default
        if name == "shapes":
            changes["dtypes"] = tuple(KVDtype.BFLOAT16 for _ in value)
        try:
            spec = dataclasses.replace(base, **changes)
        except (InvalidSpec, TypeError, ValueError):
            continue
        if getattr(spec, name) != current and spec.page_size_bytes > 0:
            out.append(spec)
    return out


PAGE_BLOCK_SIZES = (16, 64, 128)
"""Block sizes of the page grid: the default, and large blocks where packed formats round."""


def single_specs(domain: Domain) -> Iterator[KVCacheSpec]:
    """Every kind's base spec, then the base with each settable field changed, then
    the page grid: every dtype the engine accepts at each of :data:`PAGE_BLOCK_SIZES`
    (page-size edge layouts: a formula that goes wrong for one dtype at large blocks)."""
    for kind in domain.kinds:
        base = base_spec(kind, domain)
        if base is None:
            continue
        yield base
        for f in _settable(kind, domain):
            yield from variants(kind, f.name, domain)[:1]
    yield from page_grid(domain)


def page_grid(domain: Domain) -> Iterator[KVCacheSpec]:
    """Per kind with a ``dtype`` field: every accepted dtype x every grid block size."""
    for kind in domain.kinds:
        base = base_spec(kind, domain)
        if base is None or "dtype" not in {f.name for f in _settable(kind, domain)}:
            continue
        for dtype in domain.values_of("KVDtype"):
            for block_size in PAGE_BLOCK_SIZES:
                if (dtype, block_size) == (base.dtype, base.block_size):  # type: ignore[attr-defined]
                    continue
                spec = _build_replace(base, {"dtype": dtype, "block_size": block_size})
                if spec is not None and spec.page_size_bytes > 0:
                    yield spec


def near_misses(domain: Domain) -> Iterator[tuple[list[KVCacheSpec], str]]:
    """Every (kind, field that must agree): [base, odd], [odd, base], [base, base, odd]."""
    for kind in domain.kinds:
        base = base_spec(kind, domain)
        if base is None:
            continue
        pinned = domain.pinned_fields(kind)
        for name in disagreeing_fields(kind):
            if name in pinned:
                continue
            f = next(f for f in dataclasses.fields(kind) if f.name == name)
            left = base
            if role_of(f) is Role.ANNOTATION:
                # a common annotation disagrees only between members that set it
                options = variants(kind, name, domain)
                if len(options) < 2:
                    continue
                left, odd = options[0], options[1]
            else:
                options = variants(kind, name, domain)
                if not options:
                    continue
                odd = options[0]
            yield [left, odd], name
            yield [odd, left], name
            yield [left, left, odd], name  # a third member: a check of the first two only misses it


def page_equal_near_misses(domain: Domain) -> Iterator[tuple[list[KVCacheSpec], str]]:
    """Every near miss whose odd member's page is larger, with the other member padded
    (``page_size_padded``) to that same page: an engine that compares pages instead of the
    field is seen accepting the disagreement."""
    for specs, name in near_misses(domain):
        if len(specs) != 2 or name == "page_size_padded":
            continue
        left, odd = specs
        if "page_size_padded" not in {f.name for f in dataclasses.fields(type(left))} \
                or "page_size_padded" in domain.pinned_fields(type(left)) \
                or odd.page_size_bytes <= left.page_size_bytes:
            continue
        padded = _build_replace(left, {"page_size_padded": odd.page_size_bytes})
        if padded is not None and padded.page_size_bytes == odd.page_size_bytes:
            yield [padded, odd], name


def annotated_kind_pairs(domain: Domain) -> Iterator[tuple[KVCacheSpec, KVCacheSpec]]:
    """Every ordered pair of distinct kinds that share a common annotation, each setting it
    to a different value: a merge that tripped on the annotation before the kind check
    raises that error, not the contract's."""
    for first, second in kind_pairs(domain):
        shared = set(_common_fields(type(first), domain)) & set(_common_fields(type(second), domain))
        for name in sorted(shared):
            a = [v for v in variants(type(first), name, domain) if getattr(v, name) is not None]
            b = [v for v in variants(type(second), name, domain) if getattr(v, name) is not None]
            if not a or len(b) < 2:
                continue
            other = next((v for v in b if getattr(v, name) != getattr(a[0], name)), None)
            left = _build_replace(first, {name: getattr(a[0], name)})
            right = _build_replace(second, {name: getattr(other, name)}) if other is not None else None
            if left is not None and right is not None:
                yield left, right


def aligned_edge_tables(domain: Domain) -> Iterator[dict[str, KVCacheSpec]]:
    """Per aligned edge (a padded page) and per field changed on it: the changed edge first,
    beside two layers of the same spec without the alignment. A merge that takes the
    padding of its first member and another field from elsewhere returns a page smaller
    than its content."""
    for edge in _aligned_edges(domain):
        kind = type(edge)
        plain = _build_replace(edge, {"alignment": None, "page_size_padded": None})
        if plain is None:
            continue
        for f in _settable(kind, domain):
            if f.name in ("alignment", "page_size_padded"):
                continue
            for changed in variants(kind, f.name, domain)[:1]:
                moved = _build_replace(edge, {f.name: getattr(changed, f.name), "page_size_padded": None})
                if moved is not None:
                    yield {"layers.0": moved, "layers.1": plain, "layers.2": plain}


def near_misses_beside_flags(domain: Domain) -> Iterator[tuple[list[KVCacheSpec], str]]:
    """Every near miss with a third member that also sets a flag field (a capability or
    any-annotation, which members may set freely): an engine that rejects the list for the
    flag, not for the disagreement, is seen (its error names the flag, not the field)."""
    for specs, name in near_misses(domain):
        if len(specs) != 2:
            continue
        left = specs[0]
        for flag in _flag_fields(type(left), domain):
            if flag == name:
                continue
            flagged = _build_replace(left, {flag: not getattr(left, flag)})
            if flagged is not None:
                yield [*specs, flagged], name


def exclusive_pairs(domain: Domain) -> Iterator[tuple[KVCacheSpec, KVCacheSpec]]:
    """Per kind with fields of which at most one may be set (SPEC-VALID-1), a spec
    setting one and a spec setting the other, in both orders: merged, they would be
    an invalid spec."""
    for kind in domain.kinds:
        for names in kind.mutually_exclusive:
            set_ = [next((v for v in variants(kind, n, domain) if getattr(v, n) is not None), None)
                    for n in names]
            present = [v for v in set_ if v is not None]
            yield from itertools.permutations(present, 2)


def _flag_fields(kind: type[KVCacheSpec], domain: Domain) -> list[str]:
    """Capability and any-annotation fields that the domain lets take both values."""
    pinned = domain.pinned_fields(kind)
    return [f.name for f in dataclasses.fields(kind) if f.name not in pinned and (
        role_of(f) is Role.CAPABILITY
        or (role_of(f) is Role.ANNOTATION and rule_of(f) is AnnotationRule.ANY))
        and domain.allows(kind, f.name, True) and domain.allows(kind, f.name, False)]


def _common_fields(kind: type[KVCacheSpec], domain: Domain) -> list[str]:
    pinned = domain.pinned_fields(kind)
    return [f.name for f in dataclasses.fields(kind) if f.name not in pinned
            and role_of(f) is Role.ANNOTATION and rule_of(f) is AnnotationRule.COMMON]


def bridging_tables(domain: Domain) -> Iterator[dict[str, KVCacheSpec]]:
    """Per kind and common annotation: two layers that set it to different values (two groups)
    and a third that leaves it None, which merges with either: a layer that can join more than
    one group (GROUP-PARTITION-1: it joins exactly one)."""
    for kind in domain.kinds:
        base = base_spec(kind, domain)
        if base is None:
            continue
        for name in _common_fields(kind, domain):
            if getattr(base, name) is not None:
                continue
            values = [v for v in variants(kind, name, domain) if getattr(v, name) is not None]
            distinct = list({repr(getattr(v, name)): v for v in values}.values())
            if len(distinct) >= 2:
                yield {"layers.0": distinct[0], "layers.1": distinct[1], "layers.2": base}


def flag_patterns(domain: Domain) -> Iterator[list[KVCacheSpec]]:
    """Compatible lists: for every (kind, flag field), 2 and 3 members with the
    flag set at each position; for every common annotation, members that set it
    and members that leave it None, in each order."""
    for kind in domain.kinds:
        base = base_spec(kind, domain)
        if base is None:
            continue
        for name in _flag_fields(kind, domain):
            on = _build_replace(base, {name: not getattr(base, name)})
            if on is None:
                continue
            for size in (2, 3, 4):
                for position in range(size):
                    yield [on if i == position else base for i in range(size)]
        for name in _common_fields(kind, domain):
            options = [v for v in variants(kind, name, domain) if getattr(v, name) is not None]
            if not options or getattr(base, name) is not None:
                continue
            set_ = options[0]
            yield [set_, base]
            yield [base, set_]
            yield [base, set_, set_]


def _build_replace(base: KVCacheSpec, changes: dict[str, Any]) -> KVCacheSpec | None:
    try:
        return dataclasses.replace(base, **changes)
    except (InvalidSpec, TypeError, ValueError):
        return None


def kind_pairs(domain: Domain) -> Iterator[tuple[KVCacheSpec, KVCacheSpec]]:
    """Every ordered pair of distinct kinds, the second agreeing with the first
    on every field they share (only the kind tells them apart)."""
    for first_kind, second_kind in itertools.permutations(domain.kinds, 2):
        first = base_spec(first_kind, domain)
        second = base_spec(second_kind, domain)
        if first is None or second is None:
            continue
        required = {f.name for f in dataclasses.fields(second_kind) if f.default is dataclasses.MISSING}
        shared = {f.name for f in _settable(second_kind, domain)} & {f.name for f in dataclasses.fields(first)}
        aligned = _build_replace(second, {n: getattr(first, n) for n in shared
                                          if not (n in required and getattr(first, n) is None)
                                          and _kind_values(second_kind, n) is None
                                          and domain.allows(second_kind, n, getattr(first, n))})
        yield first, aligned if aligned is not None else second


def tables(domain: Domain) -> Iterator[dict[str, KVCacheSpec]]:
    """Layer tables: each kind with target and draft layers (flags set on some),
    each pair of kinds side by side, and pairs whose pages do not divide."""
    for kind in domain.kinds:
        base = base_spec(kind, domain)
        if base is None:
            continue
        table = {"layers.0": base, "layers.1": base}
        for i, name in enumerate(_flag_fields(kind, domain)):
            on = _build_replace(base, {name: not getattr(base, name)})
            if on is not None:
                table[f"layers.{i + 2}"] = on
        yield table
    for first_kind, second_kind in itertools.permutations(domain.kinds, 2):
        first, second = base_spec(first_kind, domain), base_spec(second_kind, domain)
        if first is None or second is None:
            continue
        yield {"layers.0": first, "layers.1": second, "layers.2": first}
        bigger = variants(second_kind, "block_size", domain)
        if bigger:
            yield {"layers.0": first, "layers.1": bigger[0]}


def grouping_tables(domain: Domain) -> Iterator[dict[str, KVCacheSpec]]:
    """:func:`tables`, then every single spec twice (one group whose merged spec
    carries that field), every near miss as two layers (two groups, or a refusal),
    every page changed by one field beside every other kind's base (page-size
    unification), and, for kinds that derive from one another, the pair differing
    in each field they share (the case where one kind's merge admits the other)."""
    yield from tables(domain)
    for spec in single_specs(domain):
        yield {"layers.0": spec, "layers.1": spec}
    for specs, _name in near_misses(domain):
        yield {"layers.0": specs[0], "layers.1": specs[1]}
    for a, b in exclusive_pairs(domain):  # two groups, or one whose spec would be invalid
        yield {"layers.0": a, "layers.1": b}
    yield from aligned_edge_tables(domain)
    yield from bridging_tables(domain)
    for specs in flag_patterns(domain):  # one group, its spec advertising every member's flag
        if len(specs) == 2:
            yield {"layers.0": specs[0], "layers.1": specs[1]}
    bases = [b for b in (base_spec(k, domain) for k in domain.kinds) if b is not None]
    for kind in domain.kinds:
        base = base_spec(kind, domain)
        if base is None:
            continue
        pages: set[tuple[int, int]] = set()
        for f in _settable(kind, domain):
            changed = variants(kind, f.name, domain)[:1]
            if not changed or changed[0].page_size_bytes == base.page_size_bytes:
                continue
            page = (changed[0].page_size_bytes, changed[0].block_size)
            if page in pages:  # unification reads pages and block sizes, not which field made them
                continue
            pages.add(page)
            for other in bases:  # a page changed by one field, beside every other kind's page
                if type(other) is not kind:
                    yield {"layers.0": changed[0], "layers.1": other}
                    yield {"layers.0": other, "layers.1": changed[0]}  # the other kind's merge first
    wide = [w for w in (_build_replace(b, {"dtype": KVDtype.FLOAT32}) for b in bases if hasattr(b, "dtype"))
            if w is not None and in_domain(KVDtype.FLOAT32, domain)]
    for aligned in _aligned_edges(domain):  # alignment padding that does not divide (SPEC-PAGE-2)
        for other in [*bases, *wide]:
            if type(other) is not type(aligned):
                yield {"layers.0": aligned, "layers.1": other}
                yield {"layers.0": other, "layers.1": aligned}
    for first, second in kind_pairs(domain):
        if not (issubclass(type(first), type(second)) or issubclass(type(second), type(first))):
            continue
        for name in disagreeing_fields(type(second)):
            if name not in {f.name for f in dataclasses.fields(first)}:
                continue
            changed = variants(type(second), name, domain)
            odd = _build_replace(second, {name: getattr(changed[0], name)}) if changed else None
            if odd is not None and getattr(odd, name) != getattr(first, name):
                yield {"layers.0": first, "layers.1": odd}


def _aligned_edges(domain: Domain) -> Iterator[KVCacheSpec]:
    """Per kind with an ``alignment`` field: a small page padded by its alignment to a
    size that divides few other pages (64-wide heads, float32, alignment 576)."""
    for kind in domain.kinds:
        if "alignment" not in {f.name for f in _settable(kind, domain)}:
            continue
        base = base_spec(kind, domain)
        edge = _build_replace(base, {"head_size": 64, "dtype": KVDtype.FLOAT32, "alignment": 576}) \
            if base is not None and in_domain(KVDtype.FLOAT32, domain) else None
        if edge is not None and getattr(edge, "page_size_padded", None) is not None:
            yield edge


def uniform_tables(domain: Domain) -> Iterator[dict[str, KVCacheSpec]]:
    """Tables whose specs all merge: one kind, flags varied per layer."""
    for specs in flag_patterns(domain):
        yield {f"layers.{i}": s for i, s in enumerate(specs)}


def exercised(specs: list[KVCacheSpec]) -> set[tuple[str, str]]:
    """(kind, field) pairs an example exercises: the field differs between
    members, or from the field's default in some member."""
    out: set[tuple[str, str]] = set()
    distinct = {id(spec): spec for spec in specs}.values()  # a table repeats its layers' spec objects
    for spec in distinct:
        try:
            out |= _off_default(spec)
        except TypeError:  # an unhashable field value: not cached
            out |= _off_default.__wrapped__(spec)
    by_kind: dict[type[KVCacheSpec], list[KVCacheSpec]] = {}
    for spec in distinct:
        by_kind.setdefault(type(spec), []).append(spec)
    for kind, members in by_kind.items():
        if len(members) < 2:
            continue
        for f in dataclasses.fields(kind):
            if len({repr(getattr(m, f.name)) for m in members}) > 1:
                out.add((kind.__name__, f.name))
    return out


@functools.lru_cache(maxsize=1 << 16)
def _off_default(spec: KVCacheSpec) -> frozenset[tuple[str, str]]:
    return frozenset((type(spec).__name__, f.name) for f in dataclasses.fields(spec)
                     if f.default is not dataclasses.MISSING and getattr(spec, f.name) != f.default)


def all_pairs(domain: Domain) -> set[tuple[str, str]]:
    """Every (kind, field) of the domain that can vary: pinned fields and fields a
    kind fixes to one value (an MLA cache's single latent head) are left out."""
    return {(k.__name__, f.name) for k in domain.kinds for f in _settable(k, domain)
            if len(_kind_values(k, f.name) or (0, 1)) > 1
            and len(set(map(repr, domain.restricted_values(k, f.name) or (0, 1)))) > 1}
