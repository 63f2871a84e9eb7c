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
from kvcontract.conformance.contract.model import Example
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.conformance.run.symbolic.blocks import (
    Blocks,
    KindBlocks,
    _enum_values,
    in_field_domain,
    replace_spec,
)
from kvcontract.conformance.run.symbolic.choices import Chooser
from kvcontract.conformance.run.symbolic.oracles import (
    Outside,
    group_difference,
    merge_difference,
    route_difference,
    uniform_difference,
)
from kvcontract.conformance.run.symbolic.probes import Probe, group_cases, merge_cases, route_cases
from kvcontract.reference import (
    InvalidRoutingRequest,
    InvalidSpec,
    KVCacheSpec,
    QueryLenSupport,
    Role,
    RoutingRequest,
    role_of,
)

VALUE_OPERATIONS: dict[str, str] = {"value-merge": "merge", "value-group": "group", "value-route": "route"}
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


def value_group_probe(c: Chooser, engine: Engine, kb: KindBlocks, bounds: Sequence[FieldBound],
                      record: Recorded | None = None) -> Probe:
    """A layer table of 1-3 layers of one kind whose chosen field is symbolic per layer (so
    one layer may merge with two groups: no window beside two windows), grouped by the engine;
    then planned like every grouping table when a difference is judged."""
    bound: FieldBound = c.pick(list(bounds), "field")
    n = 1 + c.choose(ENUM_MEMBERS if bound.choices else MAX_MEMBERS, "layers")
    values = [_member_value(c, bound, i) for i in range(n)]

    def run() -> tuple[dict[str, KVCacheSpec], str | None]:
        try:
            table = {f"layers.{i}": dataclasses.replace(kb.base, **{bound.field: v}) for i, v in enumerate(values)}
        except (InvalidSpec, TypeError, ValueError, ArithmeticError):
            raise Outside("the kit's constructor refuses the values") from None
        return table, group_difference(engine, table)

    table, difference = _guarded(run)
    features = {f"{bound.field}:n={n}:{difference or 'same'}"}
    cases = group_cases(_realized(table)) if difference is not None or record is not None else []
    if difference is None:
        if record is not None:
            record.extend(cases)
        return Probe([], features, reached=True)
    return Probe(cases, features | {f"difference:{difference}"}, reached=True, difference=difference)


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


def page_neutral(base: KVCacheSpec, bounds: Sequence[FieldBound]) -> list[FieldBound]:
    """The fields whose values leave the page size alone: not LAYOUT by role (windows, chunk
    sizes, cache modes, speculative blocks), and the page checked unchanged at the bound's ends
    and middle. What ``value-group`` varies. A field that sizes the page sends grouping through page-size
    unification (a least common multiple, block sizes scaled by a quotient): non-linear
    arithmetic the solver did not decide in time (half a second a path on the reference,
    against a few milliseconds); the structural group varies those over the engine's values."""
    def sizes(bound: FieldBound) -> bool:
        values = bound.choices if bound.choices else (bound.lo, bound.hi, (bound.lo + bound.hi) // 2)
        for v in values:
            other = replace_spec(base, {bound.field: v})
            if other is not None and other.page_size_bytes != base.page_size_bytes:
                return True
        return False

    layout = {f.name for f in dataclasses.fields(base) if role_of(f) is Role.LAYOUT}
    return [b for b in bounds if b.field not in layout and not sizes(b)]


def describe_bounds(operation: str, kind: str, bounds: Sequence[FieldBound]) -> str:
    """The bounds a value group explores, in words (the proof line's premise)."""
    if operation == "value-route":
        return (f"1-{ROUTE_REQUESTS} requests, query and context lengths in [0,{ROUTE_MAX_LEN}], "
                f"threshold in [1,{ROUTE_MAX_THRESHOLD}], every flag and query-length support")
    if operation == "value-group":
        return f"{kind}, grouping of 1-{MAX_MEMBERS} layers with the page size of the base (enumerations and strings 1-{ENUM_MEMBERS}), one of " + \
            ", ".join(b.describe() for b in bounds) + " per layer, the other fields the base's"
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
