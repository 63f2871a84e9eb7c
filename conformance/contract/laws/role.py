"""The law of chapter ROLE that an engine can be checked against: ROLE-COVER-1, the
drift guard. Every spec class and field the engine defines must be classified by the
contract (:mod:`kvcontract.conformance.contract.surface`), or by the adapter's declaration
for a field only a fork or plugin adds; an unclassified class must still keep every field
through ``merge([o])`` and ``merge([o, o])``; a declared field is merged by its role (kept by
a merge of one, refused when members differ in a layout or allocation field, unioned as a
capability or any-annotation)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st

from kvcontract import reference
from kvcontract.conformance.contract import shapes, surface
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.expectations import DeclaredRule, RoleFree, Unclassified
from kvcontract.conformance.contract.laws.common import describe, needs_merge, to_engine
from kvcontract.conformance.contract.model import (
    Example,
    Law,
    Violation,
    domain_of,
    per_field,
    signature,
)
from kvcontract.conformance.engines.protocol import DeclaredRoles, Engine, ValueIntrospectable
from kvcontract.reference import is_advisory


def _cover_examples(engine: Engine) -> Iterator[Example]:
    """One example per unclassified kind or field (``field`` is its name), and per
    unclassified class one role-free example (``cut=1``); first a sentinel that
    passes when nothing is unclassified, so the clause always runs."""
    yield Example()
    items = surface.unclassified(engine)
    for item in items:
        yield Example(field=item.name)
    for cls in surface.unclassified_classes(engine):
        yield Example(field=cls.__name__, cut=1)
    if isinstance(engine, DeclaredRoles):
        for declared in engine.declared_roles():
            kind = reference.KINDS_BY_NAME.get(str(declared.kind))
            base = sysm.base_spec(kind, domain_of(engine)) if kind is not None else None
            if base is not None:
                yield Example(specs=(base,), field=f"{declared.kind}.{declared.field}", cut=DECLARED)


def check_cover(engine: Engine, ex: Example) -> None:
    """ROLE-COVER-1: every spec class and field the engine defines has a role; an
    unclassified class still keeps every field through merge([o]) and merge([o, o])."""
    if ex.field is None:
        return
    if ex.cut in (1, DECLARED) and needs_merge(engine) is not None:
        return  # a release without merge: only the drift guard itself
    if ex.cut == 1:
        _role_free(engine, ex.field)
        return
    if ex.cut == DECLARED:
        _declared_role(engine, ex)
        return
    for item in surface.unclassified(engine):
        if item.name == ex.field:
            raise Violation(item.message, Unclassified(item.name),
                            signature("unclassified", [item.kind], [item.field] if item.field else []))


def _role_free_objects(engine: Engine, cls: type, fields: set[str]) -> Any:
    """Engine objects of ``cls``: for a classified kind, its systematic base spec with
    the unclassified ``fields`` drawn from their own types (the classified fields stay
    valid); for an unclassified kind, objects built from every field's own type."""
    kind = surface.standing_kind(engine, cls)
    if kind is not None and kind in engine.unsupported_kinds():  # the adapter cannot build it from a spec
        kind = None  # (vLLM 0.10.0's MambaSpec requires a dtype the contract has no field for)
    base = sysm.base_spec(kind, domain_of(engine)) if kind is not None else None
    if base is None or not fields:
        return surface.engine_objects_for(engine, cls).filter(_valid_by_contract)
    opaque = engine.engine_value_domains() if isinstance(engine, ValueIntrospectable) else {}
    drawn = {f.name: surface.field_strategy(cls, f, opaque) for f in dataclasses.fields(cls) if f.name in fields}
    base_obj = to_engine(engine, base)  # never the kit's own spec (common.to_engine)
    if type(base_obj) is not cls:  # another class stands for the kind (a plugin's subclass, a subkind)
        base_obj = cls(**{f.name: getattr(base_obj, f.name) for f in dataclasses.fields(cls)
                          if f.init and hasattr(base_obj, f.name)})

    def build(values: dict[str, Any]) -> Any:
        try:
            return dataclasses.replace(base_obj, **values)
        except Exception:  # noqa: BLE001 - the engine's class refuses these values: not an input
            return None

    return st.fixed_dictionaries(drawn).map(build).filter(lambda obj: obj is not None)


_EXCLUSIVE = {names for k in reference.SPEC_KINDS for names in k.mutually_exclusive}


def _valid_by_contract(obj: Any) -> bool:
    """An engine object no spec of the contract can be (fields that exclude each other both
    set, SPEC-VALID-1) is not an input: role-free laws do not draw it."""
    return all(sum(getattr(obj, n, None) is not None for n in names) <= 1 for names in _EXCLUSIVE)


def _role_free(engine: Engine, class_name: str) -> None:
    """Merge of one engine object, and of two identical ones, keeps every field."""
    cls = next((c for c in surface.unclassified_classes(engine) if c.__name__ == class_name), None)
    if cls is None:
        return
    items = [u for u in surface.unclassified(engine) if u.kind == class_name]
    try:
        objects = _role_free_objects(engine, cls, {u.field for u in items if u.field})
    except surface.CannotGenerate:
        return  # reported by the unclassified finding itself
    watched = {u.field for u in items if u.field}
    if any(u.field is None for u in items):  # the whole kind: every field but advisory ones
        advisory = {f.name for k in reference.SPEC_KINDS for f in dataclasses.fields(k) if is_advisory(f)}
        watched = {f.name for f in dataclasses.fields(cls)} - advisory
    check = RoleFree(class_name, f"{check_cover.__module__}:{check_cover.__name__}")
    found: list[Violation] = []

    @settings(max_examples=20, derandomize=True, database=None, deadline=None, verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
    @given(objects)
    def probe(obj: Any) -> None:
        if found:
            return
        for members in ([obj], [obj, copy.deepcopy(obj)]):
            try:
                merged = engine.merge(members)
            except Exception as exc:  # noqa: BLE001 - the engine's own merge of its own objects
                found.append(Violation(
                    f"{class_name}.merge of {len(members)} identical object(s) raised {describe(exc)}",
                    check, signature(f"role-free-raised-{type(exc).__name__}", [class_name])))
                return
            diffs = [d for d in surface.field_differences(merged, obj) if d[0] in watched or d[0] == "kind"]
            if diffs:
                detail = ", ".join(f"{n}: {a!r} -> {b!r}" for n, b, a in diffs)
                found.append(Violation(
                    f"merge of {len(members)} identical {class_name} object(s) changed {detail}",
                    check, per_field("role-free-changed", [class_name], [n for n, _, _ in diffs])))
                return

    probe()
    if found:
        raise found[0]


DECLARED = 2
"""``Example.cut`` of a declared field's role check (``field``: ``Kind.field``)."""
RULES = {"layout": "agree", "allocation": "agree", "capability": "union", "annotation-any": "union",
         "annotation-common": "keep"}
"""A declared role -> the merge rule judged beyond ``keep`` (a merge of one keeps the value)."""


def _declared_role(engine: Engine, ex: Example) -> None:
    """A declared field (``DeclaredRoles``) merged by its role, on the example's base spec in the
    engine's own class with the field set to each declared value."""
    kind, _, name = str(ex.field).partition(".")
    found = [r for r in engine.declared_roles() if (r.kind, r.field) == (kind, name)] \
        if isinstance(engine, DeclaredRoles) else []
    if not found or not ex.specs:
        return
    values = tuple(found[0].values)
    obj = to_engine(engine, ex.specs[0])
    members = [dataclasses.replace(obj, **{name: v}) for v in values]
    for member, value in zip(members, values, strict=True):
        kept = getattr(engine.merge([member]), name)
        if not (kept == value and type(kept) is type(value)):
            raise Violation(f"merge of one {kind} with its declared {found[0].role} field {name}={value!r} returned "
                            f"{name}={kept!r}", DeclaredRule(name, values, "keep"),
                            per_field("declared-changed", [kind], [name]))
    rule = RULES[str(found[0].role)]
    if rule == "agree":
        try:
            merged = engine.merge(members)
        except Exception:  # noqa: BLE001 - refused, as a layout or allocation field's disagreement must be
            return
        raise Violation(f"{kind} members differing only in their declared {found[0].role} field {name} "
                        f"({', '.join(map(repr, values))}) were merged into {name}={getattr(merged, name)!r}",
                        DeclaredRule(name, values, "agree"), per_field("declared-accepted", [kind], [name]))
    if rule == "union":
        union = getattr(engine.merge(members), name)
        if union != any(values):
            raise Violation(f"merge of {kind} members with {name}={values} gave {union!r}, not their union",
                            DeclaredRule(name, values, "union"), per_field("declared-not-union", [kind], [name]))


ROLE_LAWS: tuple[Law, ...] = (
    Law("ROLE-COVER-1", shapes.NOTHING, check_cover, operations=frozenset({"introspect", "to_engine", "merge"}),
        not_searched="its input is the engine's classes, not a value", engine_examples=_cover_examples),
)
"""The laws of chapter ROLE: the drift guard (the role table itself is the contract's)."""
