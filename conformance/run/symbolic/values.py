"""Symbolic values that reach the engine: the ``value-*`` search groups.

The other groups choose among concrete building blocks; here a field's values stay CrossHair
symbolic integers through the kit's spec constructors, the engine adapter's conversion and
the engine's own operation, so the engine's branches on values (``block_size == 48``,
``num_kv_heads % 4``, a 17-row block) become path conditions the solver decides. One path:

1. choose the shape (members, the symbolic field; for routing the flags and request count);
2. make the values symbolic within the field's bound (:class:`FieldBound`: from the engine's
   own values, widened; a field the domain restricts to literals stays concrete);
3. with tracing on, build the input and ask the *value oracle* whether the engine's answer
   differs from the contract: for a merge, the reference's verdict (merge or refuse) and the
   role rules on the merged spec (must-agree fields equal the members', capabilities and
   flags unioned, the page size the members'), and ``is_uniform`` of the same specs as a
   layer table answering as the merge does; for routing, the reference's routing;
4. on a difference, realize the values (a model of the path condition) and judge the
   concrete example with the clauses of its shape, exactly as ``check`` does: only a law's
   violation is a finding; a difference no law confirms is counted (``unconfirmed``).

A group whose path tree CrossHair exhausts has judged every input within its bounds: for the
engine, no difference from the contract there; for the reference, a bounded proof of the role
rules (:func:`proof_line`). Native code (torch) realizes what it touches: the tree is then
bigger, never wrong.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.laws.common import to_engine
from kvcontract.conformance.contract.model import Example, KitFailure
from kvcontract.conformance.engines.dispatch import router_for
from kvcontract.conformance.engines.native import concrete_int
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.conformance.run.symbolic.blocks import (
    Blocks,
    KindBlocks,
    _enum_values,
    in_field_domain,
    replace_spec,
)
from kvcontract.conformance.run.symbolic.choices import Chooser
from kvcontract.conformance.run.symbolic.probes import Probe, merge_cases, route_cases
from kvcontract.reference import (
    AnnotationRule,
    DispatchError,
    IncompatibleSpecs,
    InvalidRoutingRequest,
    InvalidSpec,
    KVCacheSpec,
    QueryLenSupport,
    Role,
    RoutingRequest,
    is_advisory,
    role_of,
    rule_of,
)

VALUE_OPERATIONS: dict[str, str] = {"value-merge": "merge", "value-route": "route"}
"""The value groups, each with the operation whose clauses judge its differences."""

MIN_HIGH = 64
"""The least upper bound of a symbolic field: 48 and other real block sizes outside a value
list are inside it however small the engine's own values are."""
NOT_SOLVED = frozenset({"alignment"})
"""Fields left at the base's value: an MLA page rounds up to ``alignment``, a division by a
symbolic divisor, non-linear arithmetic the solver does not decide in time (the structural
groups still vary it over the engine's values)."""
MAX_MEMBERS = 3
ENUM_MEMBERS = 2
MAX_STR = 12
"""The longest free symbolic string: every literal the engines compare against fits."""
ROUTE_REQUESTS = 4
ROUTE_MAX_LEN = 64
"""Query and context lengths of a routing path: up to 64 tokens (longer than a kernel tile)."""
ROUTE_MAX_THRESHOLD = 16


@dataclasses.dataclass(frozen=True)
class FieldBound:
    """One field a value group varies: an integer, symbolic within [lo, hi] (inclusive), or an
    enumeration, chosen among ``choices``."""

    field: str
    lo: int
    hi: int
    optional: bool
    choices: tuple[Any, ...] = ()
    """An enumerated field: every value of the engine's own set, chosen per member (no bound);
    a string field: the literals the domain restricts it to (its symbolic value equals one)."""
    text: bool = False
    """A string field: a CrossHair string equal to one of ``choices`` or (``free``) any of at
    most ``hi`` characters; never the very object of a value list (``is`` is not ``==``)."""
    free: bool = False

    def describe(self) -> str:
        if self.text:
            values = f"str{{{', '.join(map(repr, self.choices))}}}" + (f"|str[len<={self.hi}]" if self.free else "")
        else:
            values = f"{{{len(self.choices)} values}}" if self.choices else f"[{self.lo},{self.hi}]"
        return f"{self.field}∈{values}" + ("|None" if self.optional else "")


def _hint(kind: type[KVCacheSpec], name: str, wanted: type) -> tuple[bool, bool]:
    """(whether the field holds a ``wanted``, whether it is optional)."""
    tp = typing.get_type_hints(kind).get(name)
    args = set(typing.get_args(tp)) or {tp}
    optional = type(None) in args
    return (args - {type(None)}) == {wanted}, optional


def int_bounds(kind: type[KVCacheSpec], domain: strat.Domain, base: KVCacheSpec,
               accepts: Callable[[KVCacheSpec | None], bool] = lambda s: s is not None) -> list[FieldBound]:
    """The kind's integer fields the search makes symbolic, each bounded from the engine's
    values: [0 or 1, max(64, twice the largest)]; then its enumerated fields (dtypes,
    quantisation modes), every value the engine accepts on the base. Fields the kind or the
    domain restricts to literals (an MLA cache's single head, producible literals) stay concrete."""
    bounds = []
    for f in sysm._settable(kind, domain):
        choices = tuple(v for v in _enum_values(kind, f.name, domain)
                        if in_field_domain(kind, f.name, v, domain) and accepts(replace_spec(base, {f.name: v})))
        if len(choices) > 1:
            bounds.append(FieldBound(f.name, 0, 0, False, choices))
    for f in sysm._settable(kind, domain):
        is_int, optional = _hint(kind, f.name, int)
        if not is_int or f.name in NOT_SOLVED or sysm.kind_values(kind, f.name) is not None \
                or domain.restricted_values(kind, f.name) is not None:
            continue
        values = [getattr(v, f.name) for v in sysm.variants(kind, f.name, domain)] + [getattr(base, f.name)]
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if not ints:
            continue
        lo = 0 if min(ints) <= 0 else 1
        if replace_spec(base, {f.name: lo}) is None:  # a floor of its own (a padded page): the engine's least
            lo = min(ints)
        bounds.append(FieldBound(f.name, lo, max(MIN_HIGH, 2 * max(ints)), optional))
    return bounds + str_bounds(kind, domain)


def str_bounds(kind: type[KVCacheSpec], domain: strat.Domain) -> list[FieldBound]:
    """The kind's string fields (a cache dtype name, a mode, a model version): symbolic strings
    equal to one of the domain's literals where it restricts the field (the producible domain);
    else equal to one of the engine's values or any string up to :data:`MAX_STR` characters
    (at least the engine's longest value)."""
    bounds = []
    for f in sysm._settable(kind, domain):
        is_str, optional = _hint(kind, f.name, str)
        if not is_str:
            continue
        restricted = domain.restricted_values(kind, f.name)
        literals = tuple(v for v in restricted or () if isinstance(v, str))
        if restricted is not None and not literals:
            continue  # only None is producible: nothing to vary
        values = literals or tuple(dict.fromkeys(
            v for v in (getattr(s, f.name) for s in sysm.variants(kind, f.name, domain)) if isinstance(v, str)))
        longest = max((len(v) for v in values), default=0)
        bounds.append(FieldBound(f.name, 0, max(MAX_STR, longest), optional or None in (restricted or ()),
                                 values, text=True, free=restricted is None))
    return bounds


def _symbolic_int(c: Chooser, lo: int, hi: int, name: str) -> Any:
    """A CrossHair integer in [lo, hi]: the bound is asserted in the path condition, not
    branched on (a branch per bound would spend a path on each value's outside)."""
    from crosshair.core import proxy_for_type
    from crosshair.util import IgnoreAttempt

    value: Any = proxy_for_type(int, name)
    var = getattr(value, "var", None)
    if var is None:  # CrossHair may hand over a plain integer here: bounded as one
        if not lo <= value <= hi:
            raise IgnoreAttempt
        return value
    c.space.add(var >= lo)
    c.space.add(var <= hi)
    return value


def _symbolic_str(bound: FieldBound, free: bool, name: str) -> Any:
    """A CrossHair string: equal to one of ``bound.choices`` (compared, so the value stays
    symbolic and a fresh object), or (``free``) any of at most ``bound.hi`` characters."""
    from crosshair.core import proxy_for_type
    from crosshair.util import IgnoreAttempt

    value: Any = proxy_for_type(str, name)
    outside = (lambda: len(value) > bound.hi) if free else (lambda: not any(value == v for v in bound.choices))
    if _traced(outside):
        raise IgnoreAttempt
    return value


def _member_value(c: Chooser, bound: FieldBound, i: int) -> Any:
    if bound.optional and c.flag(f"{bound.field}{i}-none"):
        return None
    if bound.text:
        free = not bound.choices or (bound.free and c.flag(f"{bound.field}{i}-free"))
        return _symbolic_str(bound, free, f"{bound.field}{i}")
    if bound.choices:
        return c.pick(bound.choices, f"{bound.field}{i}")
    return _symbolic_int(c, bound.lo, bound.hi, f"{bound.field}{i}")


def _traced(fn: Callable[[], Any]) -> Any:
    from crosshair.tracers import ResumedTracing

    with ResumedTracing():  # type: ignore[no-untyped-call]
        return fn()


def _realized(value: Any) -> Any:
    from crosshair.core import deep_realize

    return deep_realize(value)


class Outside(Exception):
    """The path's values build no spec the kit and the engine both accept: not an input."""


# -- the value oracle -------------------------------------------------------------------------


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
    return _role_difference(specs, got, frozenset(engine.unsupported_fields(type(specs[0])))) or (
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


def _role_difference(specs: Sequence[KVCacheSpec], got: KVCacheSpec, unread: frozenset[str]) -> str | None:
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


# -- the probes -------------------------------------------------------------------------------


class _First:
    """A chooser that takes the first option of every decision (no fork): the realized cases
    a value path records for a coverage replay."""

    def choose(self, n: int, what: str) -> int:
        return 0

    def flag(self, what: str) -> bool:
        return False


Recorded = list[tuple[Example, tuple[str, ...]]]
"""Realized inputs of value paths with no difference (``Search(record_value_inputs=True)``):
what scripts/engine_coverage.py judges again under its tracer."""


def value_merge_probe(c: Chooser, engine: Engine, kb: KindBlocks, bounds: Sequence[FieldBound],
                      record: Recorded | None = None) -> Probe:
    bound: FieldBound = c.pick(list(bounds), "field")
    # an enumerated or string field's values are choices, every combination a path: pairs, not triples
    n = 1 + c.choose(ENUM_MEMBERS if bound.choices else MAX_MEMBERS, "members")
    values = [_member_value(c, bound, i) for i in range(n)]

    def build() -> list[KVCacheSpec]:
        try:
            return [dataclasses.replace(kb.base, **{bound.field: v}) for v in values]
        except (InvalidSpec, TypeError, ValueError, ArithmeticError):
            raise Outside("the kit's constructor refuses the values") from None

    def run() -> tuple[list[KVCacheSpec], str | None]:
        specs = build()
        difference = merge_difference(engine, specs)
        if difference is None:
            difference = uniform_difference(engine, specs, reference.is_uniform(
                {f"layers.{i}": s for i, s in enumerate(specs)}))
        return specs, difference

    specs, difference = _guarded(run)
    features = {f"{bound.field}:n={n}:{difference or 'same'}"}
    if difference is None:
        if record is not None:
            record.extend(merge_cases(_First(), [_realized(s) for s in specs]))  # type: ignore[arg-type]
        return Probe([], features, reached=True)
    concrete = [_realized(s) for s in specs]
    return Probe(merge_cases(c, concrete), features | {f"difference:{difference}"}, reached=True,
                 difference=difference)


def value_route_probe(c: Chooser, engine: Engine, record: Recorded | None = None) -> Probe:
    causal = c.flag("causal")
    capability = c.flag("capability")
    backend = c.flag("backend")
    n = 1 + c.choose(ROUTE_REQUESTS, "requests")
    support = c.pick(list(QueryLenSupport), "support")
    lens = tuple(_symbolic_int(c, 0, ROUTE_MAX_LEN, f"len{i}") for i in range(n))
    ctx = tuple(_symbolic_int(c, 0, ROUTE_MAX_LEN, f"ctx{i}") for i in range(n))
    threshold = _symbolic_int(c, 1, ROUTE_MAX_THRESHOLD, "threshold")

    def run() -> tuple[RoutingRequest, str | None]:
        try:
            request = RoutingRequest(lens, tuple(q + k for q, k in zip(lens, ctx, strict=True)), causal=causal,
                                     capability=capability, backend_non_causal=backend,
                                     decode_threshold=threshold, query_len_support=support)
        except InvalidRoutingRequest:
            raise Outside("not a valid request") from None
        return request, route_difference(engine, request)

    request, difference = _guarded(run)
    features = {f"n={n}:causal={causal}:{difference or 'same'}"}
    if difference is None:
        if record is not None:
            record.extend(route_cases(_realized(request)))
        return Probe([], features, reached=True)
    concrete = _realized(request)
    return Probe(route_cases(concrete), features | {f"difference:{difference}"}, reached=True,
                 difference=difference)


def _guarded(run: Callable[[], Any]) -> Any:
    """``run`` traced; a path whose values are outside the domain is ignored (CrossHair's
    :class:`IgnoreAttempt`), never judged."""
    from crosshair.util import IgnoreAttempt

    try:
        return _traced(run)
    except Outside:
        raise IgnoreAttempt from None


def bounds_of(kb: KindBlocks, blocks: Blocks) -> list[FieldBound]:
    """The value group's fields for one kind (the engine's constructor accepting each enum value)."""
    return int_bounds(kb.kind, blocks.domain, kb.base, blocks.ok)


def describe_bounds(operation: str, kind: str, bounds: Sequence[FieldBound]) -> str:
    """The bounds a value group explores, in words (the proof line's premise)."""
    if operation == "value-route":
        return (f"1-{ROUTE_REQUESTS} requests, query and context lengths in [0,{ROUTE_MAX_LEN}], "
                f"threshold in [1,{ROUTE_MAX_THRESHOLD}], every flag and query-length support")
    return f"{kind}, merge and is_uniform of 1-{MAX_MEMBERS} members (enumerations and strings 1-{ENUM_MEMBERS}), one of " + \
        ", ".join(b.describe() for b in bounds) + " per member, the other fields the base's"


def proof_line(name: str, bounds: str, exhausted: bool, paths: int, findings: int, unconfirmed: int,
               *, short: bool = False) -> str:
    """One line of a value group's outcome: a counterexample, a bounded proof, or neither
    (``short``: the bounds left out, for the console; the report's JSON keeps them)."""
    within = "" if short else f" within {bounds}"
    if findings:
        return f"{name}: {findings} finding(s){within}"
    if exhausted:
        tail = f" ({unconfirmed} oracle difference(s) no clause confirms)" if unconfirmed else ""
        return f"{name}: explored exhaustively{within}: no difference ({paths} paths){tail}"
    return f"{name}: no difference in {paths} paths, not exhaustive{within}"
