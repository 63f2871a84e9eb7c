"""The laws of chapter MERGE: the engine's merge of compatible specs against the
reference's (:func:`kvcontract.reference.merge`), field by field and role by role,
and its algebra (identity, order, steps, purity, page size)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from kvcontract import reference
from kvcontract.conformance.contract import shapes
from kvcontract.conformance.contract.expectations import (
    Accepted,
    Aliased,
    FieldsDiffer,
    Mutated,
    Page,
    Raised,
)
from kvcontract.conformance.contract.laws.common import (
    describe,
    engine_objects,
    fields_differ,
    from_engine,
    has_role,
    merge,
    merging,
    needs_capability,
)
from kvcontract.conformance.contract.laws.error import expect_rejection
from kvcontract.conformance.contract.model import (
    Example,
    KitFailure,
    Law,
    Shape,
    Violation,
    domain_of,
    per_field,
    signature,
)
from kvcontract.conformance.contract.repro import MergeOf
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.reference import Role, is_advisory, role_of


def _compare_with_reference(engine: Engine, ex: Example, roles: set[Role] | None,
                            outcome: str = "wrong-value", advisory: bool | None = False,
                            reverse: bool = False) -> None:
    """The engine's merge of ``ex.specs`` (reversed with ``reverse``) against the reference's."""
    members = tuple(reversed(ex.specs)) if reverse else ex.specs
    call = MergeOf(order=tuple(reversed(range(len(ex.specs))))) if reverse else MergeOf()
    got = merge(engine, members, ex, call)
    want = reference.merge(list(ex.specs))
    bad = fields_differ(got, want, roles, advisory)
    if not bad:
        return
    if "kind" in bad:
        detail = f"kind {type(got).__name__} (contract: {type(want).__name__})"
        sig: str | list[str] = signature("wrong-kind", ex.kinds())
    else:
        detail = ", ".join(f"{n}: {getattr(got, n, None)!r} (contract: {getattr(want, n)!r})" for n in bad)
        sig = per_field(outcome, ex.kinds(), bad)
    order = " (members in reverse order)" if reverse else ""
    raise Violation(f"merged spec differs from the contract's merge{order}: {detail}",
                    FieldsDiffer(call, want, tuple(bad)), sig)


def check_identity(engine: Engine, ex: Example) -> None:
    (spec,) = ex.specs
    got = merge(engine, [spec], ex)
    bad = fields_differ(got, spec)
    if bad:
        detail = ", ".join(f"{n}: {getattr(spec, n, None)!r} -> {getattr(got, n, None)!r}" for n in bad)
        raise Violation(f"merge([s]) changed {detail}", FieldsDiffer(MergeOf(), spec, tuple(bad)),
                        per_field("changed", ex.kinds(), bad))


def check_order(engine: Engine, ex: Example) -> None:
    permuted = [ex.specs[i] for i in ex.order]
    a, b = merge(engine, ex.specs, ex), merge(engine, permuted, ex, MergeOf(order=ex.order))
    bad = fields_differ(b, a)
    if bad:
        detail = ", ".join(f"{n}: {getattr(a, n, None)!r} vs {getattr(b, n, None)!r}" for n in bad)
        raise Violation(f"merge result depends on input order: {detail}",
                        FieldsDiffer(MergeOf(order=ex.order), MergeOf(), tuple(bad)),
                        per_field("order-dependent", ex.kinds(), bad))


def check_assoc(engine: Engine, ex: Example) -> None:
    left, right = ex.specs[: ex.cut], ex.specs[ex.cut:]
    at_once = merge(engine, ex.specs, ex)
    stepwise_call = MergeOf(cut=ex.cut)
    try:
        halves = [engine.merge(engine_objects(engine, left)), engine.merge(engine_objects(engine, right))]
        stepwise_obj = engine.merge(halves)
    except KitFailure:
        raise
    except Exception as exc:
        raise Violation(f"merging two merged halves raised {describe(exc)}", Raised(stepwise_call),
                        signature(f"stepwise-raised-{type(exc).__name__}", ex.kinds())) from exc
    stepwise = from_engine(engine, stepwise_obj, ex, stepwise_call)
    bad = fields_differ(stepwise, at_once)
    if bad:
        detail = ", ".join(f"{n}: {getattr(stepwise, n, None)!r} vs {getattr(at_once, n, None)!r}" for n in bad)
        raise Violation(f"merging in steps differs from merging at once: {detail}",
                        FieldsDiffer(stepwise_call, MergeOf(), tuple(bad)),
                        per_field("not-associative", ex.kinds(), bad))


def _role_check(roles: set[Role] | None) -> Callable[[Engine, Example], None]:
    def check(engine: Engine, ex: Example) -> None:
        _compare_with_reference(engine, ex, roles)
    return check


def check_union(engine: Engine, ex: Example) -> None:
    """MERGE-UNION-1. A merge that raises on a list is judged here only when the
    same list with every capability cleared merges: otherwise the exception is
    another clause's finding, not the union's."""
    try:
        _compare_with_reference(engine, ex, {Role.CAPABILITY}, "capability-not-unioned", advisory=None)
    except Violation as violation:
        if violation.signature.startswith("raised-") and not _merges_without_capabilities(engine, ex):
            return
        raise


def _merges_without_capabilities(engine: Engine, ex: Example) -> bool:
    cleared = []
    for spec in ex.specs:
        changes = {f.name: False for f in dataclasses.fields(spec) if role_of(f) is Role.CAPABILITY}
        cleared.append(dataclasses.replace(spec, **changes))
    try:
        engine.merge(engine_objects(engine, cleared))
    except KitFailure:
        raise
    except Exception:  # noqa: BLE001
        return False
    return True


def check_kind(engine: Engine, ex: Example) -> None:
    got = merge(engine, ex.specs, ex)
    if type(got) is not type(ex.specs[0]):
        raise Violation(f"merged spec is a {type(got).__name__}, members are {type(ex.specs[0]).__name__}",
                        FieldsDiffer(MergeOf(), ex.specs[0]), signature("wrong-kind", ex.kinds()))


def check_annotations(engine: Engine, ex: Example) -> None:
    _compare_with_reference(engine, ex, {Role.ANNOTATION})


def check_advisory(engine: Engine, ex: Example) -> None:
    """MERGE-ANNOTATION-2: advisory fields (of any role) follow their role, kept by merge([s]),
    independent of order (one law: they are one SHOULD)."""
    if ex.field:  # a near miss on an advisory field its role says must agree: rejected all the same
        if expect_rejection(engine, ex) is None:
            raise Violation(f"merge accepted specs that differ in {ex.field}",
                            Accepted(MergeOf(), f"specs that differ in {ex.field}"),
                            signature("accepted", ex.kinds(), [ex.field]))
        return
    _compare_with_reference(engine, ex, None, advisory=True)
    if len(ex.specs) > 1:
        _compare_with_reference(engine, ex, None, advisory=True, reverse=True)


def check_page(engine: Engine, ex: Example) -> None:
    objs = engine_objects(engine, ex.specs)
    try:
        merged = engine.merge(objs)
        page = engine.page_size(merged)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge of compatible specs raised {describe(exc)}", Raised(MergeOf()),
                        signature(f"raised-{type(exc).__name__}", ex.kinds())) from exc
    want = ex.specs[0].page_size_bytes  # every member's page size, by SPEC-PAGE-1
    if page != want:
        engine_pages = {engine.page_size(o) for o in objs}
        why = (f" (the engine sizes the members' pages {page} too: its page rule differs from SPEC-PAGE-1)"
               if engine_pages == {page} else "")
        raise Violation(f"merged page size {page} != members' {want}{why}", Page(MergeOf(), want),
                        signature("wrong-page", ex.kinds()))


def _state(obj: Any) -> Any:
    """A deep value snapshot of an engine object, independent of any adapter."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__,
                tuple((f.name, _state(getattr(obj, f.name, None))) for f in dataclasses.fields(obj)))
    if isinstance(obj, list | tuple):
        return tuple(_state(o) for o in obj)
    if isinstance(obj, dict):
        return tuple(sorted((repr(k), _state(v)) for k, v in obj.items()))
    return repr(obj)


def check_pure(engine: Engine, ex: Example) -> None:
    """MERGE-PURE-1, by value: every input object is snapshotted before the call."""
    objs = engine_objects(engine, ex.specs)
    before = [_state(copy.deepcopy(o)) for o in objs]
    listing = list(objs)
    try:
        merged = engine.merge(listing)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge of compatible specs raised {describe(exc)}", Raised(MergeOf()),
                        signature(f"raised-{type(exc).__name__}", ex.kinds())) from exc
    after = [_state(o) for o in objs]
    if [id(o) for o in listing] != [id(o) for o in objs] or after != before:
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        raise Violation(f"merge modified its inputs (members {changed or 'list'})", Mutated(),
                        signature("mutated-inputs", ex.kinds()))
    if any(merged is o for o in objs):
        raise Violation("merge returned one of its input objects", Aliased(),
                        signature("returned-input", ex.kinds()))


# -- requirements ----------------------------------------------------------------------


def _needs_annotation(engine: Engine) -> str | None:
    return None if has_role(engine, Role.ANNOTATION) else "the engine has no annotation field"


def _needs_advisory(engine: Engine) -> str | None:
    domain = domain_of(engine)
    if any(is_advisory(f) and f.name not in domain.pinned_fields(kind)
           for kind in domain.kinds for f in dataclasses.fields(kind)):
        return None
    return "the engine has no advisory field"


MERGE_OPS = frozenset({"to_engine", "from_engine", "merge", "page_size"})


def _merge_law(clause: str, shape: Shape, check: Callable[[Engine, Example], None],
               requires: Callable[[Engine], str | None] | None = None) -> Law:
    return Law(clause, shape, check, merging(requires), operations=MERGE_OPS,
               searched=frozenset({"merge"}))


MERGE_LAWS: tuple[Law, ...] = (
    _merge_law("MERGE-IDENTITY-1", shapes.ONE_SPEC, check_identity),
    _merge_law("MERGE-ORDER-1", shapes.PERMUTED, check_order),
    _merge_law("MERGE-ASSOC-1", shapes.SPLIT, check_assoc),
    _merge_law("MERGE-KIND-1", shapes.COMPATIBLE, check_kind),
    _merge_law("MERGE-AGREE-1", shapes.COMPATIBLE, _role_check({Role.LAYOUT, Role.ALLOCATION})),
    _merge_law("MERGE-UNION-1", shapes.COMPATIBLE, check_union, needs_capability),
    _merge_law("MERGE-ANNOTATION-1", shapes.COMPATIBLE, check_annotations, _needs_annotation),
    _merge_law("MERGE-ANNOTATION-2", shapes.ADVISORY, check_advisory, _needs_advisory),
    _merge_law("MERGE-PAGE-1", shapes.COMPATIBLE, check_page),
    _merge_law("MERGE-PURE-1", shapes.COMPATIBLE, check_pure),
)
"""The laws of chapter MERGE, in SPEC.md order."""
