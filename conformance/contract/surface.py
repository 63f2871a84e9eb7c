"""The engine's whole surface: its spec classes and fields, found by introspection
and classified against the contract's roles (ROLE-COVER-1).

Pure functions, no laws. An adapter that can list its engine's spec classes
satisfies :class:`~kvcontract.conformance.engines.protocol.Introspectable`; for it,

- :func:`unclassified` lists every engine kind and field the contract does not
  classify, each with a message that says where to classify it;
- :func:`coverage_rows` is the table kind x field x role behind
  ``kvcontract coverage``, and :func:`coverage_summary` its one-line summary;
- :func:`engine_objects` builds engine objects of any engine class from the
  engine's own field types, so that role-free laws (merge of one, of identical
  specs, order) can run on kinds and fields the contract does not know yet;
  :func:`field_differences` compares two of them field by field, by value.

An adapter without ``spec_classes()`` is not introspected: nothing is reported
unclassified for it, and :func:`coverage_summary` says so.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import json
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from kvcontract.conformance.engines.protocol import DeclaredRoles, KindMapping
from kvcontract.conformance.engines.protocol import Introspectable as Introspectable  # re-exported
from kvcontract.conformance.engines.protocol import ValueIntrospectable as ValueIntrospectable
from kvcontract.reference import (
    BASE_KINDS,
    CONTAINER_KINDS,
    SPEC_KINDS,
    AnnotationRule,
    Role,
    role_of,
    rule_of,
)

WHERE_KIND = ("reference/specs.py (a kind in SPEC_KINDS whose fields declare their roles, or a "
              "container in CONTAINER_KINDS with the reason) and spec/SPEC.md's role table")
WHERE_FIELD = ("reference/specs.py: declare the field on that kind with its role in the field "
               "metadata (layout(), allocation(), capability() or annotation(default, rule)), "
               "and add its row with the reason to spec/SPEC.md's role table")
WHERE_VALUE = ("reference/dtypes.py: add the member to the reference type, and map it in the "
               "engine's adapter")


@dataclasses.dataclass(frozen=True)
class Unclassified:
    """An engine kind (``field`` None), field, or value the contract does not classify."""

    kind: str
    """The engine class's name (for a value: the engine type's name)."""
    field: str | None
    """The field's name; None for a whole kind (for a value: the member's name)."""
    message: str
    """What is unclassified and where to classify it (ROLE-COVER-1)."""

    @property
    def name(self) -> str:
        return self.kind if self.field is None else f"{self.kind}.{self.field}"


@dataclasses.dataclass(frozen=True)
class CoverageRow:
    """One row of the coverage table: an engine class's field and its role."""

    kind: str
    field: str
    role: str
    """``layout``, ``allocation``, ``capability``, ``annotation (any|common)``,
    ``container``, ``declared <role>`` (a field the adapter declares), or ``UNCLASSIFIED``."""
    status: str
    """The class's standing: ``kind``, ``base``, ``container`` or ``UNCLASSIFIED``."""

    @property
    def key(self) -> str:
        return f"{self.kind}.{self.field}"

    @property
    def classified(self) -> bool:
        return self.role != UNCLASSIFIED


UNCLASSIFIED = "UNCLASSIFIED"
_REFERENCE_CLASSES: dict[str, type] = {k.__name__: k for k in (*BASE_KINDS, *SPEC_KINDS)}


# -- discovery --------------------------------------------------------------

def spec_subclasses(base: type) -> list[type]:
    """``base`` and every dataclass subclass of it, transitively, in discovery
    order; only classes their module still exposes under their name (classes
    replaced in their module, or local to a function, are not the engine's)."""
    found: list[type] = []
    seen: set[type] = set()
    queue = [base]
    while queue:
        cls = queue.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        queue.extend(cls.__subclasses__())
        module = sys.modules.get(cls.__module__)
        if dataclasses.is_dataclass(cls) and getattr(module, cls.__qualname__, None) is cls:
            found.append(cls)
    return found


def spec_classes_of(engine: Any) -> list[type] | None:
    """The engine's spec classes, or None when its adapter is not introspectable."""
    if not isinstance(engine, Introspectable):
        return None
    return list(engine.spec_classes())


def _role_name(f: dataclasses.Field[Any]) -> str:
    role = role_of(f)
    if role is Role.ANNOTATION:
        rule = rule_of(f)
        return f"annotation ({'any' if rule is AnnotationRule.ANY else 'common'})"
    return str(role.value)


def _reference_field(reference: type, name: str) -> dataclasses.Field[Any] | None:
    return next((f for f in dataclasses.fields(reference) if f.name == name), None)


def _type_text(f: dataclasses.Field[Any]) -> str:
    tp = f.type
    return tp if isinstance(tp, str) else str(getattr(tp, "__name__", repr(tp)))


def _standing(engine: Any, cls: type) -> tuple[str, type | None]:
    """The name a class is classified under (the contract kind it stands for: by the adapter's
    ``kind_of``, else its own name) and that reference class, if the contract has one."""
    name = (engine.kind_of(cls) if isinstance(engine, KindMapping) else None) or cls.__name__
    return name, _REFERENCE_CLASSES.get(name)


def standing_kind(engine: Any, cls: type) -> Any:
    """The contract kind (a reference class of ``SPEC_KINDS``) an engine class stands for, or None."""
    reference = _standing(engine, cls)[1]
    return reference if reference in SPEC_KINDS else None


def declared(engine: Any) -> dict[tuple[str, str], str]:
    """``(kind, field)`` -> role, for the fields the adapter declares (:class:`DeclaredRoles`)."""
    if not isinstance(engine, DeclaredRoles):
        return {}
    return {(str(r.kind), str(r.field)): str(r.role) for r in engine.declared_roles()}


def _engine_label(engine: Any) -> str:
    return f"{getattr(engine, 'name', type(engine).__name__)} {getattr(engine, 'version', '')}".strip()


def coverage_rows(engine: Any) -> list[CoverageRow]:
    """Kind x field x role for every spec class of an introspectable engine
    (empty for one that is not)."""
    rows: list[CoverageRow] = []
    roles = declared(engine)
    for cls in spec_classes_of(engine) or ():
        kind, reference = _standing(engine, cls)
        name = cls.__name__
        if name in CONTAINER_KINDS:
            status = "container"
        elif reference is None:
            status = UNCLASSIFIED
        else:
            status = "base" if reference in BASE_KINDS else "kind"
        for f in dataclasses.fields(cls):
            if status == "container":
                role = "container"
            else:
                ref_field = None if reference is None else _reference_field(reference, f.name)
                role = (_role_name(ref_field) if ref_field is not None
                        else f"declared {roles[kind, f.name]}" if (kind, f.name) in roles else UNCLASSIFIED)
            rows.append(CoverageRow(name, f.name, role, status))
    return rows


def unclassified(engine: Any) -> list[Unclassified]:
    """Every engine kind, field and enumerated value the contract does not
    classify (ROLE-COVER-1), each with where to classify it. Empty for an
    adapter that is not introspectable."""
    classes = spec_classes_of(engine)
    if classes is None:
        return []
    label = _engine_label(engine)
    roles = declared(engine)
    out: list[Unclassified] = []
    for cls in classes:
        name = cls.__name__
        if name in CONTAINER_KINDS:
            continue
        kind, reference = _standing(engine, cls)
        if reference is None:
            fields = ", ".join(f.name for f in dataclasses.fields(cls))
            out.append(Unclassified(name, None, (
                f"{label} defines spec class {name} ({cls.__module__}; fields: {fields}), which "
                f"the contract does not classify; classify it in {WHERE_KIND} (ROLE-COVER-1)")))
            continue
        for f in dataclasses.fields(cls):
            if _reference_field(reference, f.name) is None and (kind, f.name) not in roles:
                out.append(Unclassified(name, f.name, (
                    f"{label}'s {name}.{f.name} ({_type_text(f)}) has no role in the contract; "
                    f"classify it in {WHERE_FIELD} (ROLE-COVER-1)")))
    if isinstance(engine, ValueIntrospectable):
        for type_name, value in engine.unmapped_values():
            out.append(Unclassified(type_name, value, (
                f"{label} accepts {type_name}.{value}, which the reference cannot express; "
                f"add it in {WHERE_VALUE} (ROLE-COVER-1)")))
    return out


def coverage_summary(engine: Any) -> str:
    """One line for ``kvcontract check``: how much of the engine's surface the
    contract classifies (ROLE-COVER-1)."""
    label = _engine_label(engine)
    classes = spec_classes_of(engine)
    if classes is None:
        return (f"coverage: {label}'s adapter does not list its spec classes "
                "(no spec_classes()); ROLE-COVER-1 not checked")
    rows = coverage_rows(engine)
    missing = unclassified(engine)
    kinds = sum(1 for c in classes if _standing(engine, c)[1] in SPEC_KINDS)
    fields = sum(1 for r in rows if r.classified)
    head = (f"coverage: {label}: {len(classes)} spec classes ({kinds} kinds), "
            f"{fields}/{len(rows)} fields classified")
    if not missing:
        return head + "; nothing unclassified (ROLE-COVER-1)"
    names = ", ".join(u.name for u in missing[:5]) + (", ..." if len(missing) > 5 else "")
    return (f"{head}; {len(missing)} unclassified: {names} (ROLE-COVER-1; "
            f"kvcontract coverage --engine {getattr(engine, 'name', '?')})")


def exercised_by(report_path: str | Path) -> dict[str, list[str]]:
    """``"Kind.field"`` -> clause IDs, from the top-level ``coverage`` key of a
    ``kvcontract check --json`` report; empty when the report has none.
    Raises ``ValueError`` for a file that is not such a report."""
    path = Path(report_path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a check report (expected a JSON object)")
    coverage = data.get("coverage", {})
    if not isinstance(coverage, dict) or not all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in coverage.values()):
        raise ValueError(f"{path}: 'coverage' must map \"Kind.field\" to a list of clause IDs")
    return {str(k): list(v) for k, v in coverage.items()}


# -- engine objects from the engine's own field types -----------------------

class CannotGenerate(TypeError):
    """An engine class has a required field of a type no value can be built for."""


def _resolve_parts(cls: type, annotation: Any) -> tuple[list[Any], bool]:
    """The types of a field annotation's ``|`` members that resolve in the class's
    module, and whether None is one of them. Unresolvable members (names imported
    only for type checking) are dropped."""
    if not isinstance(annotation, str):
        args = typing.get_args(annotation) if typing.get_origin(annotation) in (
            typing.Union, types.UnionType) else (annotation,)
        return [a for a in args if a is not type(None)], type(None) in args
    namespace = {**vars(builtins), **vars(sys.modules[cls.__module__])}
    parts: list[Any] = []
    optional = False
    depth, start = 0, 0
    pieces = []
    for i, ch in enumerate(annotation):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            pieces.append(annotation[start:i])
            start = i + 1
    pieces.append(annotation[start:])
    for piece in (p.strip() for p in pieces):
        if piece == "None":
            optional = True
            continue
        try:
            parts.append(eval(piece, namespace))
        except Exception:  # noqa: BLE001, S112 - a TYPE_CHECKING-only name: not constructible here
            continue
    return parts, optional


def _values_for(tp: Any, default: Any, opaque: Mapping[type, Sequence[Any]]) -> list[Any]:
    """Candidate values of one type, the default first when it has one."""
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        inner = _values_for(args[0], dataclasses.MISSING, opaque) if args else []
        return [(inner[0],)] if inner else []
    if tp is bool:
        return [False, True]
    if tp is int:
        return [16, 1, 2, 64]
    if tp is str:
        return ["auto"]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return [m for m in tp if m.value is not None]  # a None value is a placeholder member
    for engine_type, values in opaque.items():
        if isinstance(tp, type) and issubclass(tp, engine_type) or tp is engine_type:
            return list(values)
    return []


def field_strategy(cls: type, f: dataclasses.Field[Any],
                   opaque: Mapping[type, Sequence[Any]] | None = None) -> Any:
    """Values of one engine field, from its own type: its default most of the
    time, else small ints, both bools, every enum member, the engine's own values
    of opaque types (``opaque``, e.g. ``{torch.dtype: (...)}``). Raises
    :class:`CannotGenerate` for a required field of a type it cannot build."""
    has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    default = f.default if f.default is not dataclasses.MISSING else (
        f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
    parts, optional = _resolve_parts(cls, f.type)
    values: list[Any] = []
    for tp in parts:
        values += [v for v in _values_for(tp, default, opaque or {}) if v not in values]
    if optional:
        values.append(None)
    if has_default:
        values = [v for v in values if not (v == default and type(v) is type(default))]
        return st.sampled_from([default] * 3 + values) if values else st.just(default)
    if not values:
        raise CannotGenerate(f"{cls.__name__}.{f.name}: no value can be built for {_type_text(f)}")
    return st.sampled_from(values)


def engine_objects(cls: type, opaque: Mapping[type, Sequence[Any]] | None = None,
                   pinned: Callable[[str], bool] = lambda _name: False) -> Any:
    """A strategy of objects of an engine spec class, built from its own field
    types (:func:`field_strategy`); fields for which ``pinned(name)`` holds keep
    their defaults. Objects the class rejects on construction are not drawn.
    Raises :class:`CannotGenerate` when a required field cannot be built."""
    strategies = {f.name: field_strategy(cls, f, opaque) for f in dataclasses.fields(cls)
                  if f.init and not (pinned(f.name) and f.default is not dataclasses.MISSING)}

    @st.composite
    def build(draw: Any) -> Any:
        kwargs = {name: draw(s) for name, s in strategies.items()}
        try:
            obj = cls(**kwargs)
            if hasattr(cls, "page_size_bytes"):
                obj.page_size_bytes  # noqa: B018 - some engines validate only here
        except NotImplementedError:
            pass  # an abstract base: no page size of its own
        except Exception:
            assume(False)
            raise
        return obj

    return build()


def engine_objects_for(engine: Any, cls: type) -> Any:
    """:func:`engine_objects` with the engine's own value sets, when its adapter
    offers ``engine_value_domains()``."""
    opaque = engine.engine_value_domains() if isinstance(engine, ValueIntrospectable) else {}
    return engine_objects(cls, opaque)


def field_differences(a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    """``(field, a's value, b's value)`` for every dataclass field (those excluded
    from the class's equality too) on which two engine objects differ by value,
    plus ``("kind", ...)`` when their classes differ."""
    out: list[tuple[str, Any, Any]] = []
    if type(a) is not type(b):
        out.append(("kind", type(a).__name__, type(b).__name__))
    names = [f.name for f in dataclasses.fields(a)]
    names += [f.name for f in dataclasses.fields(b) if f.name not in names]
    for name in names:
        va, vb = getattr(a, name, dataclasses.MISSING), getattr(b, name, dataclasses.MISSING)
        if not (va == vb and type(va) is type(vb)):
            out.append((name, va, vb))
    return out


def unclassified_classes(engine: Any) -> list[type]:
    """The engine classes that are not kinds, bases or containers of the contract,
    or that have an unclassified field: the classes role-free laws must run on."""
    names = {u.kind for u in unclassified(engine)}
    return [c for c in spec_classes_of(engine) or () if c.__name__ in names]
