"""The building blocks of the symbolic search: valid specs only.

Per kind of an engine's domain (:class:`Blocks`, computed once per kind; the domain ``check``
draws from, ``KIND_DOMAINS`` pins and the producible domain's pins and literals included): its
base spec, its *atoms* (one field set to another value the constructor and the engine accept), its
flags (capabilities and any-annotations) and its *templates* (the base, with one atom,
with two that combine); and the choices over them that a probe makes on a path.
"""

from __future__ import annotations

import dataclasses
import itertools
import typing
from collections.abc import Callable, Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.run.symbolic.choices import Chooser, Rejected
from kvcontract.reference import AnnotationRule, InvalidSpec, KVCacheSpec, Role, role_of, rule_of


def _enum_values(kind: type[KVCacheSpec], name: str, domain: strat.Domain) -> tuple[Any, ...]:
    """Every value of the engine's own value set for an enumerated field ("" when not enumerated)."""
    key = strat._enum_key(kind, name)
    if key is None:
        return ()
    hints = typing.get_type_hints(kind)
    tp = hints.get(name)
    if typing.get_origin(tp) is tuple:
        return ()  # a tuple of enum values (Mamba state dtypes): realistic alternatives only
    return tuple(domain.values_of(key))


def _kind_allows(kind: type[KVCacheSpec], name: str, value: Any) -> bool:
    fixed = sysm.kind_values(kind, name)
    return fixed is None or any(value == v and type(value) is type(v) for v in fixed)


def in_field_domain(kind: type[KVCacheSpec], name: str, value: Any, domain: strat.Domain) -> bool:
    """Whether ``value`` is one check draws for the field too: within the values the kind fixes
    it to (``KIND_DOMAINS``: an MLA cache's ``head_size_v`` 0, ``num_kv_heads`` 1) and the
    domain's restriction (the producible domain's literals)."""
    return _kind_allows(kind, name, value) and domain.allows(kind, name, value)


def is_optional(kind: type[KVCacheSpec], name: str) -> bool:
    tp = typing.get_type_hints(kind).get(name)
    return type(None) in typing.get_args(tp)


@dataclasses.dataclass
class KindBlocks:
    """One kind's valid building blocks in an engine's domain."""

    kind: type[KVCacheSpec]
    base: KVCacheSpec
    atoms: list[tuple[str, Any]]
    """(field, value) pairs that the base accepts."""
    flags: list[str]
    """Capability and any-annotation fields (toggled on a template)."""
    templates: list[KVCacheSpec]
    """The base, the base with each atom, with each pair of atoms that combine."""
    singles: int
    """``templates[1:1 + singles]`` are the one-atom templates."""

    def with_atom(self, spec: KVCacheSpec, atom: tuple[str, Any]) -> KVCacheSpec | None:
        return replace_spec(spec, {atom[0]: atom[1]})


def replace_spec(spec: KVCacheSpec, changes: dict[str, Any]) -> KVCacheSpec | None:
    """``spec`` with ``changes`` (a change to a value its kind does not take, ``KIND_DOMAINS``,
    is left out, as check's kind pairs leave it: an MLA spec aligned with a full-attention one
    keeps its latent ``head_size_v`` 0); None when the result is not a valid spec."""
    kind = type(spec)
    changes = {n: v for n, v in changes.items() if n == "dtypes" or _kind_allows(kind, n, v)}
    if "shapes" in changes and "dtypes" not in changes:
        current = getattr(spec, "dtypes", ())
        first = current[0] if current else reference.KVDtype.BFLOAT16
        changes = {**changes, "dtypes": tuple(first for _ in changes["shapes"])}
    try:
        out = dataclasses.replace(spec, **changes)
    except (InvalidSpec, TypeError, ValueError):
        return None
    try:
        if out.page_size_bytes <= 0:
            return None
    except (InvalidSpec, TypeError, ValueError, ArithmeticError):
        return None
    return out


class Blocks:
    """The building blocks of every kind of an engine's domain (computed once per kind)."""

    def __init__(self, domain: strat.Domain, accepts: Callable[[KVCacheSpec], Any] | None = None) -> None:
        self.domain = domain
        self.accepts = accepts
        self._accepted: dict[KVCacheSpec, bool] = {}
        self._kinds: dict[type[KVCacheSpec], KindBlocks | None] = {}
        self._valid: dict[tuple[type[KVCacheSpec], KVCacheSpec], list[tuple[str, Any]]] = {}

    def ok(self, spec: KVCacheSpec | None) -> bool:
        """A spec the engine accepts too (its constructor may be stricter than the reference's)."""
        if spec is None:
            return False
        if self.accepts is None:
            return True
        if spec not in self._accepted:
            try:
                self.accepts(spec)
                self._accepted[spec] = True
            except Exception:  # noqa: BLE001 - the engine rejects the value: not a building block
                self._accepted[spec] = False
        return self._accepted[spec]

    def of(self, kind: type[KVCacheSpec]) -> KindBlocks | None:
        if kind not in self._kinds:
            self._kinds[kind] = self._build(kind)
        return self._kinds[kind]

    def _build(self, kind: type[KVCacheSpec]) -> KindBlocks | None:
        base = sysm.base_spec(kind, self.domain)
        if base is None or not self.ok(base):
            return None
        atoms: list[tuple[str, Any]] = []
        flags: list[str] = []
        for f in sysm._settable(kind, self.domain):
            current = getattr(base, f.name)
            values: list[Any] = [getattr(v, f.name) for v in sysm.variants(kind, f.name, self.domain)]
            values += [v for v in _enum_values(kind, f.name, self.domain)]
            if current is not None and is_optional(kind, f.name):
                values.append(None)
            seen: list[Any] = []
            for value in values:
                if value == current or any(value == s and type(value) is type(s) for s in seen) \
                        or not in_field_domain(kind, f.name, value, self.domain):
                    continue
                if not self.ok(replace_spec(base, {f.name: value})):
                    continue
                seen.append(value)
                atoms.append((f.name, value))
            if role_of(f) is Role.CAPABILITY or (role_of(f) is Role.ANNOTATION
                                                 and rule_of(f) is AnnotationRule.ANY):
                if isinstance(current, bool) and in_field_domain(kind, f.name, not current, self.domain):
                    flags.append(f.name)
        templates: list[KVCacheSpec] = [base]
        for atom in atoms:
            spec = replace_spec(base, {atom[0]: atom[1]})
            if spec is not None:
                templates.append(spec)
        singles = len(templates) - 1
        for a, b in itertools.combinations(atoms, 2):
            if a[0] == b[0]:
                continue
            spec = replace_spec(base, {a[0]: a[1], b[0]: b[1]})
            if spec is not None and self.ok(spec):
                templates.append(spec)
        return KindBlocks(kind, base, atoms, flags, templates, singles)

    def valid_atoms(self, blocks: KindBlocks, template: KVCacheSpec) -> list[tuple[str, Any]]:
        """The atoms that ``template`` accepts (and that change it)."""
        key = (blocks.kind, template)
        if key not in self._valid:
            self._valid[key] = [a for a in blocks.atoms if getattr(template, a[0]) != a[1]
                                and blocks.with_atom(template, a) is not None]
        return self._valid[key]

    # -- choices over the blocks ---------------------------------------------------------------

    def template(self, c: Chooser, blocks: KindBlocks) -> KVCacheSpec:
        shape = c.choose(3, "template")
        if shape == 0 or len(blocks.templates) == 1:
            return blocks.base
        singles = blocks.templates[1:1 + blocks.singles]
        pairs = blocks.templates[1 + blocks.singles:]
        if shape == 1 or not pairs:
            if not singles:
                return blocks.base
            spec = blocks.with_atom(blocks.base, pick_atom(c, self.valid_atoms(blocks, blocks.base), "template"))
            if spec is None:
                raise Rejected(f"{blocks.kind.__name__}: an atom did not apply")  # pragma: no cover
            return spec
        pair: KVCacheSpec = c.pick(pairs, "template-pair")
        return pair

    def member(self, c: Chooser, blocks: KindBlocks, template: KVCacheSpec, what: str) -> KVCacheSpec:
        """The template again, with a flag set, or with one more atom."""
        shape = c.choose(3, what)
        if shape == 0:
            return template
        if shape == 1:
            flags = [n for n in blocks.flags if not getattr(template, n)
                     and self.ok(replace_spec(template, {n: True}))]
            if flags:
                spec = replace_spec(template, {c.pick(flags, what + "-flag"): True})
                if spec is None:
                    raise Rejected(f"{blocks.kind.__name__}: a flag cannot be set on {template}")
                return spec
        atoms = self.valid_atoms(blocks, template)
        if not atoms:
            return template
        spec = blocks.with_atom(template, pick_atom(c, atoms, what))
        if spec is None:
            raise Rejected(f"{blocks.kind.__name__}: an atom did not apply")  # pragma: no cover
        return spec


def pick_atom(c: Chooser, atoms: Sequence[tuple[str, Any]], what: str) -> tuple[str, Any]:
    """A field first, then one of its values: every field gets its share of the paths
    however many values its domain has (14 quantisation modes, 2 block sizes)."""
    fields = list(dict.fromkeys(name for name, _ in atoms))
    name = c.pick(fields, what + "-field")
    atom: tuple[str, Any] = c.pick([a for a in atoms if a[0] == name], what + "-value")
    return atom

