"""The value oracles: whether the engine's answer on a value path differs from the contract.

Each runs traced (every comparison of a symbolic value is a path condition) and answers a
short description of the difference, or None. A difference is only a lead: the value group
realizes the input and the clauses' own laws judge it (:mod:`.values`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kvcontract import reference
from kvcontract.conformance.contract.laws.common import to_engine
from kvcontract.conformance.contract.model import KitFailure
from kvcontract.conformance.engines.dispatch import router_for
from kvcontract.conformance.engines.native import concrete_int
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.reference import (
    AnnotationRule,
    DispatchError,
    GroupingError,
    IncompatibleSpecs,
    KVCacheSpec,
    Role,
    RoutingRequest,
    is_advisory,
    role_of,
    rule_of,
)


class Outside(Exception):
    """The path's values build no spec the kit and the engine both accept: not an input."""





def merge_difference(engine: Engine, specs: Sequence[KVCacheSpec]) -> str | None:
    """How the engine's merge of ``specs`` breaks the contract, or None (runs traced: every
    comparison is a path condition)."""
    try:
        expected: KVCacheSpec | None = reference.merge(list(specs))
    except IncompatibleSpecs:
        expected = None
    try:
        objs = [to_engine(engine, s) for s in specs]
    except KitFailure:
        raise Outside("the engine's constructor refuses the values") from None
    try:
        out = engine.merge(objs)
    except AssertionError:
        return None if expected is None else "refused a compatible list"
    except Exception as exc:  # noqa: BLE001 - the engine's own failure: what the oracle reports
        return f"raised {type(exc).__name__}"
    if expected is None:
        return "merged an incompatible list"
    try:
        got = engine.from_engine(out)
    except Exception as exc:  # noqa: BLE001 - a result the adapter cannot read back
        return f"an unreadable result ({type(exc).__name__})"
    return role_difference(specs, got, frozenset(engine.unsupported_fields(type(specs[0])))) or (
        "page size" if engine.page_size(out) != specs[0].page_size_bytes else None)


def uniform_difference(engine: Engine, specs: Sequence[KVCacheSpec], mergeable: bool) -> str | None:
    """Whether the engine's ``is_uniform`` of ``specs`` as a layer table answers as the merge
    does (UNIFORM-MERGE-1) without raising (UNIFORM-NORAISE-1) (traced)."""
    table = {f"layers.{i}": to_engine(engine, s) for i, s in enumerate(specs)}
    try:
        uniform = engine.is_uniform(table)
    except Exception as exc:  # noqa: BLE001 - the engine's own failure
        return f"is_uniform raised {type(exc).__name__}"
    return None if bool(uniform) == mergeable else "is_uniform answered otherwise"


def role_difference(specs: Sequence[KVCacheSpec], got: KVCacheSpec, unread: frozenset[str]) -> str | None:
    """The role rules on a merged spec: must-agree fields equal every member's, capabilities
    and ANY flags the union, COMMON annotations the members' common value (``unread``: the
    fields the engine does not have, not judged)."""
    if type(got) is not type(specs[0]):
        return "kind"
    for f in dataclasses.fields(got):
        if f.name in unread:
            continue
        role = role_of(f)
        values = [getattr(s, f.name) for s in specs]
        value = getattr(got, f.name)
        if role is Role.CAPABILITY or (role is Role.ANNOTATION and rule_of(f) is AnnotationRule.ANY):
            if bool(value) != any(values):
                return f"{f.name} not unioned"
        elif role is Role.ANNOTATION:
            common = [v for v in values if v is not None]
            if (value is None) != (not common) or (common and value != common[0]):
                return f"{f.name} not the common value"
        elif is_advisory(f):
            continue
        elif any(value != v for v in values):
            return f"{f.name} differs from a member's"
    return None


def route_difference(engine: Engine, request: RoutingRequest) -> str | None:
    """Whether the engine routes ``request`` as the reference does (traced)."""
    router = router_for(engine)
    if router is None:
        raise Outside("the engine has no router")
    try:
        expected = reference.route(request)
    except DispatchError:
        expected = None
    # the threshold picks the engine's metadata builder (an adapter keys its cache by it): one
    # concrete value per path; the lengths stay symbolic into the engine (an adapter realizes
    # them where native code reads them, kvcontract.conformance.engines.native)
    engine_request = dataclasses.replace(request, decode_threshold=concrete_int(request.decode_threshold))
    try:
        got = router(engine_request)
    except Exception as exc:  # noqa: BLE001 - the engine's own failure
        return None if expected is None else f"raised {type(exc).__name__}"
    if expected is None:
        return "routed a batch the contract refuses"
    return None if got == expected else "routed differently"



def group_difference(engine: Engine, table: Mapping[str, KVCacheSpec]) -> str | None:
    """Whether the engine's grouping of ``table`` breaks the grouping contract (traced): it
    refuses a table the reference groups, its groups are not a partition of the layers, or a
    group's merged spec is not the merge of its (page-unified) members by the role rules. The
    partition itself may differ from the reference's: the contract does not fix it."""
    try:
        reference.group_layers(dict(table))
        groupable = True
    except GroupingError:
        groupable = False
    try:
        objs = {n: to_engine(engine, s) for n, s in table.items()}
    except KitFailure:
        raise Outside("the engine's constructor refuses the values") from None
    try:
        groups = engine.group_layers(objs)
    except Exception as exc:  # noqa: BLE001 - the engine's own failure
        return f"grouping raised {type(exc).__name__}" if groupable else None
    names = [n for g in groups for n in g.layer_names]
    if sorted(names) != sorted(table):
        return "not a partition"
    try:
        unified = dict(reference.unify_page_sizes(dict(table)))
    except GroupingError:
        unified = dict(table)
    for g in groups:
        if g.spec is None:
            continue  # per-member specs: each member keeps its own
        members = [unified[n] for n in g.layer_names]
        unread = frozenset(engine.unsupported_fields(type(members[0])))
        try:
            reference.merge(members)
        except IncompatibleSpecs:
            return "incompatible layers grouped"
        difference = role_difference(members, g.spec, unread)
        if difference is not None:
            return f"group spec: {difference}"
    return None
