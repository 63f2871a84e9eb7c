"""The conformance laws of chapters MERGE, ERROR, UNIFORM and GROUP.

Each :class:`~kvcontract.conformance.contract.model.Law` enumerates the clause's finite
structure (:mod:`kvcontract.conformance.contract.systematic`), draws further examples
from a role-driven strategy restricted to what the engine can represent,
checks the engine's answer against the reference, and raises
:class:`~kvcontract.conformance.contract.model.Violation` — with a signature naming
kinds, fields and outcome — when they differ. A violation renders as a repro
snippet that uses the engine's own classes. All judgement is here; adapters
only convert and call. An exception of the kit's own (an adapter's
conversion) is a :class:`~kvcontract.conformance.contract.model.KitFailure`, never a
finding.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st

from kvcontract import reference
from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import surface
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.model import (
    Example,
    KitFailure,
    Law,
    Shape,
    Violation,
    domain_of,
    no_requirement,
    per_field,
    signature,
)
from kvcontract.conformance.engines.protocol import Engine, EngineGroup
from kvcontract.reference import InvalidSpec, KVCacheSpec, KVDtype, Role, is_advisory, role_of

# -- engine calls: the engine's exceptions are findings, the adapter's are not ------


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


_KIND_NAMES = re.compile(r"\b(" + "|".join(sorted({k.__name__ for k in reference.SPEC_KINDS}, key=len,
                                                   reverse=True)) + r")\b")
_ATTRIBUTE = re.compile(r"has no attribute '(\w+)'")


def raised_signature(exc: BaseException, kinds: Sequence[str] | None, prefix: str = "raised") -> str:
    """The signature of an engine exception: its type, and — when its message names
    them — the kind and the attribute it tripped on (``'X' object has no attribute
    'f'``); else the example's ``kinds``, or with ``kinds=None`` the message's
    words (numbers dropped). The message decides, not the drawn values, so one
    defect is one finding however it was reached."""
    text = str(exc)
    named = sorted(set(_KIND_NAMES.findall(text)))
    attribute = _ATTRIBUTE.findall(text)
    outcome = f"{prefix}-{type(exc).__name__}"
    if named and attribute:
        return signature(outcome, named, attribute)
    if kinds is None:
        words = " ".join(re.sub(r"[^A-Za-z_ ]+", " ", text.splitlines()[0] if text else "").split()[:12])
        return f"{outcome}:{words}" if words else outcome
    return signature(outcome, kinds)


def _to_engine(engine: Engine, spec: KVCacheSpec) -> Any:
    try:
        return engine.to_engine(spec)
    except Exception as exc:
        raise KitFailure(f"{engine.name} adapter could not convert {type(spec).__name__}: "
                         f"{_describe(exc)}") from exc


def _from_engine(engine: Engine, obj: Any, ex: Example, what: str) -> KVCacheSpec:
    """The engine's result as a reference spec. A result that no valid spec can
    be (SPEC-VALID-1) is the engine's finding; any other failure is the kit's."""
    try:
        return engine.from_engine(obj)
    except InvalidSpec as exc:
        raise Violation(f"{what} returned an invalid spec: {exc}",
                        f"print('{what} returned', {_repr_expr(what)})\n"
                        f"raise SystemExit({('VIOLATION: ' + what + ' returned an invalid spec: ' + str(exc))!r})",
                        _invalid_signature(exc, ex)) from exc
    except Exception as exc:
        raise KitFailure(f"{engine.name} adapter could not read back {type(obj).__name__}: "
                         f"{_describe(exc)}") from exc


def _invalid_signature(exc: InvalidSpec, ex: Example) -> str:
    """What is invalid about the engine's result: its kind and the fields at fault (the
    example's kinds only where the rule names no kind), never the rest of the example."""
    return signature("invalid-result", [exc.kind] if exc.kind else ex.kinds(), exc.fields)


def _repr_expr(what: str) -> str:
    return "MERGE(specs)" if what == "merge" else "GROUP_PAIRS(GROUPS(table))"


def _objs(engine: Engine, specs: Sequence[KVCacheSpec]) -> list[Any]:
    return [_to_engine(engine, s) for s in specs]


def _merge(engine: Engine, specs: Sequence[KVCacheSpec], ex: Example) -> KVCacheSpec:
    objs = _objs(engine, specs)
    try:
        merged = engine.merge(objs)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge of compatible specs raised {_describe(exc)}", RAISES_CHECK,
                        signature(f"raised-{type(exc).__name__}", ex.kinds())) from exc
    return _from_engine(engine, merged, ex, "merge")


RAISES_CHECK = (
    "try:\n    merged = MERGE(specs)\nexcept Exception as exc:\n"
    "    raise SystemExit(f'VIOLATION: merge raised {type(exc).__name__}: {exc} "
    "(the contract says these specs merge)')\nprint('no violation: merged', merged)"
)


def _fields_differ(got: KVCacheSpec, want: KVCacheSpec, roles: set[Role] | None = None,
                   advisory: bool = False) -> list[str]:
    """Fields (of ``roles``) in which ``got`` differs from ``want``: ``["kind"]`` for
    another kind. Advisory annotations count only with ``advisory`` (then only they
    do): they are MERGE-ANNOTATION-2's alone (ROLE-ANNOTATION-1)."""
    if type(got) is not type(want):
        return ["kind"]
    return [f.name for f in dataclasses.fields(want)
            if (roles is None or role_of(f) in roles) and is_advisory(f) == advisory
            and getattr(got, f.name) != getattr(want, f.name)]


def _diff_check(clause: str, expected_var: str, names: Sequence[str]) -> str:
    names = [n for n in names if n != "kind"]
    return (
        f"bad = [n for n in {list(names)!r} if getattr(merged, n) != getattr({expected_var}, n)]\n"
        f"if type(merged).__name__ != type({expected_var}).__name__ or bad:\n"
        f"    raise SystemExit(f'VIOLATION of {clause}: got {{type(merged).__name__}} with '\n"
        f"                     + ', '.join(f'{{n}}={{getattr(merged, n)!r}} (contract: {{getattr({expected_var}, n)!r}})' for n in bad))\n"
        "print('no violation: merged spec as the contract requires')"
    )


def _compare_with_reference(clause: str, engine: Engine, ex: Example, roles: set[Role] | None,
                            outcome: str = "wrong-value", advisory: bool = False,
                            reverse: bool = False) -> None:
    """The engine's merge of ``ex.specs`` (reversed with ``reverse``) against the reference's."""
    members = tuple(reversed(ex.specs)) if reverse else ex.specs
    got = _merge(engine, members, ex)
    want = reference.merge(list(ex.specs))
    bad = _fields_differ(got, want, roles, advisory)
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
                    f"merged = MERGE({'specs[::-1]' if reverse else 'specs'})\nexpected = EXPECTED[0]\n"
                    + _diff_check(clause, "expected", bad),
                    sig)


# -- strategies and systematic enumerators per example shape -------------------------


def _one_spec(domain: strat.Domain) -> Any:
    return strat.specs(domain=domain).map(lambda s: Example(specs=(s,)))


def _sys_one_spec(domain: strat.Domain) -> Iterator[Example]:
    for spec in sysm.single_specs(domain):
        yield Example(specs=(spec,))


def _compatible(domain: strat.Domain, min_size: int = 2) -> Any:
    return strat.compatible_specs(min_size=min_size, domain=domain).map(lambda ss: Example(specs=tuple(ss)))


def _sys_compatible(domain: strat.Domain) -> Iterator[Example]:
    """Flag patterns, and every single spec merged with itself."""
    for specs in sysm.flag_patterns(domain):
        yield Example(specs=tuple(specs))
    for spec in sysm.single_specs(domain):
        yield Example(specs=(spec, spec))


def _sys_advisory(domain: strat.Domain) -> Iterator[Example]:
    yield from _sys_one_spec(domain)
    yield from _sys_compatible(domain)


def _permuted(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=2, domain=domain).flatmap(
        lambda ss: st.permutations(range(len(ss))).map(
            lambda p: Example(specs=tuple(ss), order=tuple(p))))


def _sys_permuted(domain: strat.Domain) -> Iterator[Example]:
    for ex in _sys_compatible(domain):
        yield dataclasses.replace(ex, order=tuple(reversed(range(len(ex.specs)))))


def _split(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=2, max_size=5, domain=domain).flatmap(
        lambda ss: st.integers(1, len(ss) - 1).map(lambda c: Example(specs=tuple(ss), cut=c)))


def _sys_split(domain: strat.Domain) -> Iterator[Example]:
    """Flag patterns cut at each point, and every single spec merged with itself, cut once
    (a merge that loses a field of the first member fails to merge with the second)."""
    for specs in sysm.flag_patterns(domain):
        for cut in range(1, len(specs)):
            yield Example(specs=tuple(specs), cut=cut)
    for spec in sysm.single_specs(domain):
        yield Example(specs=(spec, spec), cut=1)


def _near_miss(domain: strat.Domain) -> Any:
    return strat.near_misses(domain=domain).map(lambda case: Example(specs=tuple(case[0]), field=case[1]))


def _sys_near_miss(domain: strat.Domain) -> Iterator[Example]:
    for specs, name in sysm.near_misses(domain):
        yield Example(specs=tuple(specs), field=name)
    for specs, name in sysm.near_misses_beside_flags(domain):
        yield Example(specs=tuple(specs), field=name)
    for specs, name in sysm.page_equal_near_misses(domain):
        yield Example(specs=tuple(specs), field=name)


def _mixed_kinds(domain: strat.Domain) -> Any:
    independent = st.tuples(strat.specs(domain=domain), strat.specs(domain=domain)).filter(
        lambda ab: type(ab[0]) is not type(ab[1]))
    return st.one_of(strat.mixed_kind_pairs(domain), independent).map(lambda ab: Example(specs=tuple(ab)))


def _sys_mixed_kinds(domain: strat.Domain) -> Iterator[Example]:
    for a, b in sysm.kind_pairs(domain):
        yield Example(specs=(a, b))
    for a, b in sysm.annotated_kind_pairs(domain):
        yield Example(specs=(a, b))


def _table(domain: strat.Domain) -> Any:
    return strat.layer_tables(domain=strat.grouping_domain(domain)).map(lambda t: Example(table=tuple(t.items())))


def _sys_table(domain: strat.Domain) -> Iterator[Example]:
    for table in sysm.grouping_tables(strat.grouping_domain(domain)):
        yield Example(table=tuple(table.items()))


def _uniform_table(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=1, max_size=5, domain=strat.grouping_domain(domain)).map(
        lambda ss: Example(table=tuple((f"layers.{i}", s) for i, s in enumerate(ss))))


def _sys_uniform_table(domain: strat.Domain) -> Iterator[Example]:
    for table in sysm.uniform_tables(strat.grouping_domain(domain)):
        yield Example(table=tuple(table.items()))


def _uniform_cases(domain: strat.Domain) -> Any:
    return st.one_of(_near_miss(domain), _compatible(domain, 1), _mixed_kinds(domain))


def _sys_uniform_cases(domain: strat.Domain) -> Iterator[Example]:
    yield from _sys_near_miss(domain)
    yield from _sys_compatible(domain)
    yield from _sys_mixed_kinds(domain)


def _incompatible(domain: strat.Domain) -> Any:
    return st.one_of(_near_miss(domain), _mixed_kinds(domain))


def _sys_incompatible(domain: strat.Domain) -> Iterator[Example]:
    yield from _sys_near_miss(domain)
    yield from _sys_mixed_kinds(domain)


def _nothing(_domain: strat.Domain) -> Any:
    return st.just(Example())


def _sys_nothing(_domain: strat.Domain) -> Iterator[Example]:
    yield Example()


ONE_SPEC = Shape("one-spec", _one_spec, _sys_one_spec)
COMPATIBLE = Shape("compatible", _compatible, _sys_compatible)
ADVISORY = Shape("advisory", _compatible, _sys_advisory)
PERMUTED = Shape("permuted", _permuted, _sys_permuted)
SPLIT = Shape("split", _split, _sys_split)
NEAR_MISS = Shape("near-miss", _near_miss, _sys_near_miss)
MIXED_KINDS = Shape("mixed-kinds", _mixed_kinds, _sys_mixed_kinds)
TABLE = Shape("table", _table, _sys_table)
UNIFORM_TABLE = Shape("uniform-table", _uniform_table, _sys_uniform_table)
UNIFORM_CASES = Shape("uniform-cases", _uniform_cases, _sys_uniform_cases)
INCOMPATIBLE = Shape("incompatible", _incompatible, _sys_incompatible)
NOTHING = Shape("nothing", _nothing, _sys_nothing)


# -- merge laws ------------------------------------------------------------------------


def check_identity(engine: Engine, ex: Example) -> None:
    (spec,) = ex.specs
    got = _merge(engine, [spec], ex)
    bad = _fields_differ(got, spec)
    if bad:
        detail = ", ".join(f"{n}: {getattr(spec, n, None)!r} -> {getattr(got, n, None)!r}" for n in bad)
        raise Violation(f"merge([s]) changed {detail}",
                        "merged = MERGE(specs)\nexpected = specs[0]\n"
                        + _diff_check("MERGE-IDENTITY-1", "expected", bad),
                        per_field("changed", ex.kinds(), bad))


def check_order(engine: Engine, ex: Example) -> None:
    permuted = [ex.specs[i] for i in ex.order]
    a, b = _merge(engine, ex.specs, ex), _merge(engine, permuted, ex)
    bad = _fields_differ(b, a)
    if bad:
        detail = ", ".join(f"{n}: {getattr(a, n, None)!r} vs {getattr(b, n, None)!r}" for n in bad)
        raise Violation(
            f"merge result depends on input order: {detail}",
            f"merged = MERGE([specs[i] for i in {list(ex.order)!r}])\nexpected = MERGE(specs)\n"
            + _diff_check("MERGE-ORDER-1", "expected", bad),
            per_field("order-dependent", ex.kinds(), bad))


def check_assoc(engine: Engine, ex: Example) -> None:
    left, right = ex.specs[: ex.cut], ex.specs[ex.cut:]
    at_once = _merge(engine, ex.specs, ex)
    try:
        halves = [engine.merge(_objs(engine, left)), engine.merge(_objs(engine, right))]
        stepwise_obj = engine.merge(halves)
    except KitFailure:
        raise
    except Exception as exc:
        raise Violation(f"merging two merged halves raised {_describe(exc)}",
                        f"merged = MERGE([MERGE(specs[:{ex.cut}]), MERGE(specs[{ex.cut}:])])",
                        signature(f"stepwise-raised-{type(exc).__name__}", ex.kinds())) from exc
    stepwise = _from_engine(engine, stepwise_obj, ex, "merge")
    bad = _fields_differ(stepwise, at_once)
    if bad:
        detail = ", ".join(f"{n}: {getattr(stepwise, n, None)!r} vs {getattr(at_once, n, None)!r}" for n in bad)
        raise Violation(
            f"merging in steps differs from merging at once: {detail}",
            f"merged = MERGE([MERGE(specs[:{ex.cut}]), MERGE(specs[{ex.cut}:])])\nexpected = MERGE(specs)\n"
            + _diff_check("MERGE-ASSOC-1", "expected", bad),
            per_field("not-associative", ex.kinds(), bad))


def _role_check(clause: str, roles: set[Role] | None) -> Callable[[Engine, Example], None]:
    def check(engine: Engine, ex: Example) -> None:
        _compare_with_reference(clause, engine, ex, roles)
    return check


def check_union(engine: Engine, ex: Example) -> None:
    """MERGE-UNION-1. A merge that raises on a list is judged here only when the
    same list with every capability cleared merges: otherwise the exception is
    another clause's finding, not the union's."""
    try:
        _compare_with_reference("MERGE-UNION-1", engine, ex, {Role.CAPABILITY}, "capability-not-unioned")
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
        engine.merge(_objs(engine, cleared))
    except KitFailure:
        raise
    except Exception:  # noqa: BLE001
        return False
    return True


def check_kind(engine: Engine, ex: Example) -> None:
    got = _merge(engine, ex.specs, ex)
    if type(got) is not type(ex.specs[0]):
        raise Violation(f"merged spec is a {type(got).__name__}, members are {type(ex.specs[0]).__name__}",
                        "merged = MERGE(specs)\nexpected = specs[0]\n" + _diff_check("MERGE-KIND-1", "expected", []),
                        signature("wrong-kind", ex.kinds()))


def check_annotations(engine: Engine, ex: Example) -> None:
    _compare_with_reference("MERGE-ANNOTATION-1", engine, ex, {Role.ANNOTATION})


def check_advisory(engine: Engine, ex: Example) -> None:
    """MERGE-ANNOTATION-2: advisory annotations by their rule, kept by merge([s]),
    independent of order (one law: they are one SHOULD)."""
    _compare_with_reference("MERGE-ANNOTATION-2", engine, ex, {Role.ANNOTATION}, advisory=True)
    if len(ex.specs) > 1:
        _compare_with_reference("MERGE-ANNOTATION-2", engine, ex, {Role.ANNOTATION}, advisory=True,
                                reverse=True)


def check_page(engine: Engine, ex: Example) -> None:
    objs = _objs(engine, ex.specs)
    try:
        merged = engine.merge(objs)
        page = engine.page_size(merged)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge of compatible specs raised {_describe(exc)}", RAISES_CHECK,
                        signature(f"raised-{type(exc).__name__}", ex.kinds())) from exc
    want = ex.specs[0].page_size_bytes  # every member's page size, by SPEC-PAGE-1
    if page != want:
        engine_pages = {engine.page_size(o) for o in objs}
        why = (f" (the engine sizes the members' pages {page} too: its page rule differs from SPEC-PAGE-1)"
               if engine_pages == {page} else "")
        raise Violation(
            f"merged page size {page} != members' {want}{why}",
            "merged = MERGE(specs)\n"
            f"page = {engine.render_page_size('merged')}\n"
            f"if page != {want}:\n"
            f"    raise SystemExit(f'VIOLATION of MERGE-PAGE-1: page {{page}} != {want}')",
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
    objs = _objs(engine, ex.specs)
    before = [_state(copy.deepcopy(o)) for o in objs]
    listing = list(objs)
    try:
        merged = engine.merge(listing)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge of compatible specs raised {_describe(exc)}", RAISES_CHECK,
                        signature(f"raised-{type(exc).__name__}", ex.kinds())) from exc
    after = [_state(o) for o in objs]
    if [id(o) for o in listing] != [id(o) for o in objs] or after != before:
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        raise Violation(f"merge modified its inputs (members {changed or 'list'})",
                        "import copy\nbefore = copy.deepcopy([vars(s) for s in specs])\nmerged = MERGE(specs)\n"
                        "if [vars(s) for s in specs] != before:\n"
                        "    raise SystemExit('VIOLATION of MERGE-PURE-1: merge changed its inputs')\n"
                        "print('no violation')",
                        signature("mutated-inputs", ex.kinds()))
    if any(merged is o for o in objs):
        raise Violation("merge returned one of its input objects",
                        "merged = MERGE(specs)\nif any(merged is s for s in specs):\n"
                        "    raise SystemExit('VIOLATION of MERGE-PURE-1: merge returned an input object')",
                        signature("returned-input", ex.kinds()))


# -- error laws ------------------------------------------------------------------------


def _expect_rejection(engine: Engine, ex: Example) -> BaseException | None:
    """The engine's exception for specs that must not merge; None when it merged
    them (into a valid spec or, equally accepted, an invalid one)."""
    objs = _objs(engine, ex.specs)
    try:
        merged = engine.merge(objs)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:  # noqa: BLE001 - the exception is what is judged
        return exc
    try:
        _from_engine(engine, merged, ex, "merge")
    except Violation:
        pass  # an invalid merged spec: accepted all the same
    return None


def _what(ex: Example) -> str:
    return f"differ in {ex.field}" if ex.field else "are of different kinds"


def _fields_of(ex: Example) -> list[str]:
    return [ex.field] if ex.field else []


def check_detect(engine: Engine, ex: Example) -> None:
    outcome = _expect_rejection(engine, ex)
    if outcome is None:
        raise Violation(
            f"merge accepted specs that {_what(ex)}",
            "try:\n    merged = MERGE(specs)\nexcept Exception as exc:\n"
            "    print('no violation: rejected with', type(exc).__name__, exc)\nelse:\n"
            f"    raise SystemExit(f'VIOLATION of ERROR-DETECT-1: merge accepted specs that {_what(ex)}: {{merged}}')",
            signature("accepted", ex.kinds(), _fields_of(ex)))


def _type_check(clause: str, ex: Example, error: str) -> str:
    return (f"try:\n    merged = MERGE(specs)\nexcept {error} as exc:\n"
            "    print('no violation:', type(exc).__name__, exc)\nexcept Exception as exc:\n"
            f"    raise SystemExit(f'VIOLATION of {clause}: merge raised {{type(exc).__name__}}: {{exc}} "
            f"(contract: {error})')\nelse:\n"
            f"    raise SystemExit(f'VIOLATION of {clause}: merge accepted specs that {_what(ex)}: {{merged}}')")


def check_type(engine: Engine, ex: Example) -> None:
    outcome = _expect_rejection(engine, ex)
    if outcome is None:
        raise Violation(f"merge accepted specs that {_what(ex)} (no error at all)",
                        _type_check("ERROR-TYPE-1", ex, "AssertionError"),
                        signature("accepted", ex.kinds(), _fields_of(ex)))
    if not isinstance(outcome, AssertionError):
        raise Violation(f"incompatible specs raised {_describe(outcome)}, not an AssertionError",
                        _type_check("ERROR-TYPE-1", ex, "AssertionError"),
                        signature(f"raised-{type(outcome).__name__}", ex.kinds(), _fields_of(ex)))


def check_kind_error(engine: Engine, ex: Example) -> None:
    outcome = _expect_rejection(engine, ex)
    if not isinstance(outcome, AssertionError):
        got = "accepted them" if outcome is None else f"raised {_describe(outcome)}"
        pair = [f"{type(ex.specs[0]).__name__}>{type(ex.specs[1]).__name__}"]
        sig = signature("accepted", pair) if outcome is None else raised_signature(outcome, pair)
        raise Violation(f"merge of {type(ex.specs[0]).__name__} and {type(ex.specs[1]).__name__} {got}",
                        _type_check("ERROR-KIND-1", ex, "AssertionError"), sig)


def value_forms(value: Any) -> list[str]:
    """How a message may spell a field's value: ``repr``/``str``, a dtype's
    name with or without ``torch.``, an enum's name or value."""
    if isinstance(value, KVDtype):
        return [value.type_name, value.name, repr(value)]
    if isinstance(value, enum.Enum):
        return [value.name, str(value.value), repr(value)]
    if isinstance(value, tuple):
        return [str(value), repr(value), repr(list(value))]
    return [str(value), repr(value)]


def check_message(engine: Engine, ex: Example) -> None:
    """ERROR-MESSAGE-1: the message names the disagreeing field and both values."""
    outcome = _expect_rejection(engine, ex)
    if outcome is None or not ex.field:
        return
    text = str(outcome)
    values: list[Any] = []
    for spec in ex.specs:
        value = getattr(spec, ex.field)
        if value is not None and all(repr(value) != repr(v) for v in values):
            values.append(value)  # a member that leaves a common annotation unset does not disagree
    missing = [] if ex.field in text else [f"the field {ex.field!r}"]
    missing += [f"the value {v!r}" for v in values if not any(form in text for form in value_forms(v))]
    if missing:
        wanted = [(ex.field, [ex.field]), *((repr(v), value_forms(v)) for v in values)]
        raise Violation(
            f"the error does not name {', '.join(missing)}: {_describe(outcome)}",
            "try:\n    MERGE(specs)\nexcept Exception as exc:\n"
            f"    missing = [w for w, forms in {wanted!r} if not any(f in str(exc) for f in forms)]\n"
            "    if missing:\n"
            "        raise SystemExit(f'VIOLATION of ERROR-MESSAGE-1: message omits {missing}: {exc}')\n"
            "print('no violation')",
            signature("message-omits", ex.kinds(), _fields_of(ex)))


def check_empty(engine: Engine, ex: Example) -> None:
    try:
        engine.merge([])
    except AssertionError:
        return
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge([]) raised {_describe(exc)}, not an AssertionError",
                        "try:\n    MERGE([])\nexcept AssertionError as exc:\n    print('no violation:', exc)\n"
                        "except Exception as exc:\n"
                        "    raise SystemExit(f'VIOLATION of ERROR-EMPTY-1: merge([]) raised "
                        "{type(exc).__name__}: {exc}')",
                        signature(f"raised-{type(exc).__name__}")) from exc
    raise Violation("merge([]) returned a spec",
                    "try:\n    merged = MERGE([])\nexcept AssertionError as exc:\n    print('no violation:', exc)\n"
                    "else:\n    raise SystemExit(f'VIOLATION of ERROR-EMPTY-1: merge([]) returned {merged}')",
                    signature("returned"))


# -- uniformity ------------------------------------------------------------------------


def _uniform(engine: Engine, table: Sequence[tuple[str, KVCacheSpec]]) -> bool | BaseException:
    objs = {n: _to_engine(engine, s) for n, s in table}
    try:
        return engine.is_uniform(objs)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:  # noqa: BLE001
        return exc


def check_uniform_merge(engine: Engine, ex: Example) -> None:
    table = ex.table or tuple((f"layers.{i}", s) for i, s in enumerate(ex.specs))
    want = reference.is_uniform(dict(table))
    got = _uniform(engine, table)
    if isinstance(got, BaseException):
        return  # UNIFORM-NORAISE-1 judges exceptions
    if got != want:
        raise Violation(
            f"is_uniform returned {got}, the contract says {want}",
            f"got = UNIFORM(table)\nif got != {want}:\n"
            f"    raise SystemExit(f'VIOLATION of UNIFORM-MERGE-1: uniform is {{got}}, contract: {want}')",
            signature(f"uniform-{str(got).lower()}", ex.kinds(), _fields_of(ex)))


def check_uniform_noraise(engine: Engine, ex: Example) -> None:
    table = tuple((f"layers.{i}", s) for i, s in enumerate(ex.specs))
    got = _uniform(engine, table)
    if isinstance(got, BaseException):
        raise Violation(
            f"is_uniform raised {_describe(got)} instead of answering False",
            "try:\n    got = UNIFORM(table)\nexcept Exception as exc:\n"
            "    raise SystemExit(f'VIOLATION of UNIFORM-NORAISE-1: {type(exc).__name__}: {exc}')\n"
            "print('no violation: uniform =', got)",
            signature(f"raised-{type(got).__name__}", ex.kinds(), _fields_of(ex)))


def check_uniform_empty(engine: Engine, ex: Example) -> None:
    got = _uniform(engine, ())
    if got is not True:
        raise Violation(f"is_uniform({{}}) gave {got!r}",
                        "got = UNIFORM({})\nif got is not True:\n"
                        "    raise SystemExit(f'VIOLATION of UNIFORM-EMPTY-1: {got!r}')",
                        signature("not-true"))


# -- grouping --------------------------------------------------------------------------


_GROUPINGS: dict[str, tuple[Engine, list[EngineGroup] | BaseException]] = {}
_GROUPINGS_KEPT = 8192


def _groups(engine: Engine, ex: Example) -> list[EngineGroup] | BaseException:
    """The engine's grouping of the example's table, or what it raised. The engine is asked
    once per table in this interpreter; every grouping clause judges that one answer (five
    clauses share the systematic tables, and grouping is most of their time)."""
    key = repr(ex.table)  # repr, not ==: 4 and Fraction(4) are equal but may not be to an engine
    cached = _GROUPINGS.get(key)
    if cached is not None and cached[0] is engine:  # the entry holds its engine: no id reuse
        return cached[1]
    answer = _ask_groups(engine, ex)
    if len(_GROUPINGS) >= _GROUPINGS_KEPT:
        _GROUPINGS.clear()
    _GROUPINGS[key] = (engine, answer)
    return answer


def _ask_groups(engine: Engine, ex: Example) -> list[EngineGroup] | BaseException:
    objs = {n: _to_engine(engine, s) for n, s in ex.table}
    try:
        return engine.group_layers(objs)
    except InvalidSpec as exc:
        raise Violation(f"grouping returned an invalid spec: {exc}",
                        "groups = GROUPS(table)\nprint(GROUP_PAIRS(groups))\n"
                        f"raise SystemExit({('VIOLATION: grouping returned an invalid spec: ' + str(exc))!r})",
                        _invalid_signature(exc, ex)) from exc
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:  # noqa: BLE001
        return exc


def _grouping_ok(ex: Example) -> bool:
    try:
        reference.group_layers(dict(ex.table))
    except reference.GroupingError:
        return False
    return True


def _judged_groups(engine: Engine, ex: Example) -> list[EngineGroup] | None:
    """The engine's groups; None when it rightly refused (the reference refuses too).
    A refusal the reference does not share is GROUP-PARTITION-1's finding,
    judged there; the other grouping clauses cannot judge that example."""
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        return None
    return groups


GROUP_SETUP = "groups = GROUPS(table)\npairs = GROUP_PAIRS(groups)\n"


def check_partition(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        if _grouping_ok(ex):
            raise Violation(f"grouping raised {_describe(groups)}",
                            "try:\n    groups = GROUPS(table)\nexcept Exception as exc:\n"
                            "    raise SystemExit(f'VIOLATION of GROUP-PARTITION-1: grouping raised "
                            "{type(exc).__name__}: {exc}')\nprint('no violation')",
                            raised_signature(groups, None))
        return
    names = [n for g in groups for n in g.layer_names]
    if sorted(names) != sorted(n for n, _ in ex.table):
        raise Violation(
            f"groups hold layers {sorted(names)}, the model has {sorted(n for n, _ in ex.table)}",
            GROUP_SETUP + "names = sorted(n for names, _ in pairs for n in names)\n"
            "if names != sorted(table):\n"
            "    raise SystemExit(f'VIOLATION of GROUP-PARTITION-1: {names} vs {sorted(table)}')",
            signature("not-a-partition", ex.kinds()))


def _group_members(g: EngineGroup, table: Mapping[str, KVCacheSpec]) -> list[KVCacheSpec]:
    return [table[n] for n in g.layer_names if n in table]


def _unified(table: Mapping[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """The layers as grouping merges them: page sizes unified first (GROUP-PAGE-1)."""
    try:
        return dict(reference.unify_page_sizes(dict(table)))
    except reference.GroupingError:
        return dict(table)


def check_group_union(engine: Engine, ex: Example) -> None:
    groups = _judged_groups(engine, ex)
    if groups is None:
        return
    table = dict(ex.table)
    for g in groups:
        if g.spec is None:
            continue  # per-member specs carry each member's own flag
        members = _group_members(g, table)
        for f in dataclasses.fields(g.spec):
            if role_of(f) is not Role.CAPABILITY:
                continue
            need = any(getattr(m, f.name, False) for m in members)
            if getattr(g.spec, f.name) != need:
                raise Violation(
                    f"group {list(g.layer_names)} advertises {f.name}={getattr(g.spec, f.name)}, "
                    f"members need {need}",
                    GROUP_SETUP + "for names, spec in pairs:\n"
                    f"    need = any(getattr(table[n], {f.name!r}, False) for n in names)\n"
                    f"    have = getattr(spec, {f.name!r})\n"
                    "    if have != need:\n"
                    f"        raise SystemExit(f'VIOLATION of GROUP-UNION-1: group {{names}} has "
                    f"{f.name}={{have}}, members need {{need}}')",
                    signature("capability-not-unioned", [type(m).__name__ for m in members], [f.name]))


def _incompatible_signatures(kinds: Sequence[str], fields: Sequence[str], spec_kind: str | None = None) -> list[str]:
    """A group of incompatible layers: one finding per pair of kinds it mixes, or per
    field its layers of one kind disagree in (a third kind adds no new defect). Where
    the group's spec is of one of its members' kinds, the pairs are that kind with each
    other one: the merge of that kind admitted them (two others it admitted together
    are no defect of their own, and may never share a group without it)."""
    distinct = sorted(set(kinds))
    if len(distinct) > 1:
        if spec_kind in distinct:
            return [signature("incompatible-group", [spec_kind, k], ["kind"]) for k in distinct if k != spec_kind]
        return [signature("incompatible-group", [a, b], ["kind"])
                for i, a in enumerate(distinct) for b in distinct[i + 1:]]
    return per_field("incompatible-group", distinct, fields)


_NOT_COMPARED = frozenset({"block_size", "page_size_padded"})
"""Fields page-size unification may change (judged by GROUP-PAGE-1)."""


def _member_changes(got: KVCacheSpec, layer: KVCacheSpec) -> list[str]:
    """How a group's per-member spec differs from the layer's own, or from the
    layer's full-allocation form (GROUP-MERGED-1 allows that fallback)."""
    found = [x for x in _fields_differ(got, layer) if x not in _NOT_COMPARED]
    if found:
        promoted = reference.full_allocation_form(layer)
        if promoted is not layer and not [x for x in _fields_differ(got, promoted) if x not in _NOT_COMPARED]:
            return []
    return found


def check_group_merged(engine: Engine, ex: Example) -> None:
    groups = _judged_groups(engine, ex)
    if groups is None:
        return
    table = _unified(dict(ex.table))
    for g in groups:
        members = _group_members(g, table)
        kinds = [type(m).__name__ for m in members]
        if g.spec is None:
            diffs = {n: [x for x in _member_changes(s, table[n]) if x not in engine.unsupported_fields(type(s))]
                     for n, s in (g.member_specs or {}).items()}
            bad = {n: d for n, d in diffs.items() if d}
            if bad:
                raise Violation(f"per-member specs of group {list(g.layer_names)} differ from the "
                                f"layers' own: {bad}",
                                GROUP_SETUP + f"changed_fields = {bad!r}  # layer -> fields changed\n"
                                "for layer, names in changed_fields.items():\n"
                                "    member = next(s.kv_cache_specs[layer] for _, s in pairs\n"
                                "                  if layer in getattr(s, 'kv_cache_specs', {}))\n"
                                "    changed = [f for f in names if getattr(member, f) != getattr(table[layer], f)]\n"
                                "    if changed:\n"
                                "        raise SystemExit(f'VIOLATION of GROUP-MERGED-1: the per-member spec "
                                "of {layer} changed {changed}')\n"
                                "print('no violation')",
                                signature("member-spec-changed", kinds))
            continue
        names = tuple(g.layer_names)
        try:
            want = reference.merge(members)
        except reference.IncompatibleSpecs as exc:
            message = f"layers {list(names)} share a group but their specs are incompatible: {exc}"
            raise Violation(
                f"group {list(names)} holds incompatible layers: {exc}",
                GROUP_SETUP + f"# one merged spec for the layers (a per-member container is allowed)\n"
                f"if any(set(n) == set({names!r}) and not hasattr(s, 'kv_cache_specs') for n, s in pairs):\n"
                f"    raise SystemExit({('VIOLATION of GROUP-MERGED-1: ' + message)!r})\n"
                "print('no violation')",
                _incompatible_signatures(kinds, [d.field for d in exc.disagreements],
                                         type(g.spec).__name__)) from None
        lacks = engine.unsupported_fields(type(g.spec))  # a field the release lacks is never a finding
        wrong = [n for n in _fields_differ(g.spec, want) if n not in _NOT_COMPARED and n not in lacks]
        if wrong:
            detail = ", ".join(f"{n}={getattr(g.spec, n, None)!r} (contract: {getattr(want, n, None)!r})"
                               for n in wrong)
            raise Violation(
                f"group {list(names)} spec differs from its members' merge: {detail}",
                GROUP_SETUP + f"expected = {engine.render_spec(want)}\n"
                "for names, spec in pairs:\n"
                f"    if set(names) == set({names!r}):\n"
                f"        wrong = [n for n in {[b for b in wrong if b != 'kind']!r} if getattr(spec, n) != getattr(expected, n)]\n"
                "        if wrong or type(spec).__name__ != type(expected).__name__:\n"
                "            raise SystemExit(f'VIOLATION of GROUP-MERGED-1: group {names} has {type(spec).__name__} '\n"
                "                             + ', '.join(f'{n}={getattr(spec, n)!r} (contract: {getattr(expected, n)!r})' for n in wrong))\n"
                "print('no violation')",
                per_field("wrong-group-spec", kinds, wrong))


def check_group_compat(engine: Engine, ex: Example) -> None:
    groups = _judged_groups(engine, ex)
    if groups is None:
        return
    table = _unified(dict(ex.table))
    for g in groups:
        members = _group_members(g, table)
        kinds = [type(m).__name__ for m in members]
        specs = [(g.member_specs or {}).get(n, g.spec) for n in g.layer_names]
        block_sizes = {s.block_size for s in specs if s is not None}
        if len(block_sizes) > 1:
            raise Violation(f"group {list(g.layer_names)} mixes block sizes {sorted(block_sizes)}",
                            GROUP_SETUP + f"raise SystemExit('VIOLATION of GROUP-COMPAT-1: group "
                            f"{list(g.layer_names)} mixes block sizes {sorted(block_sizes)}')",
                            signature("mixed-block-sizes", kinds))
        shared = set.intersection(*[{f.name for f in dataclasses.fields(m) if role_of(f) is Role.ALLOCATION
                                     and f.name not in engine.unsupported_fields(type(m))}
                                    for m in members]) if members else set()
        for name in sorted(shared):
            values = {repr(getattr(m, name)) for m in members}
            if len(values) > 1:
                raise Violation(
                    f"group {list(g.layer_names)} mixes {name} values {sorted(values)}",
                    GROUP_SETUP + f"for names, spec in pairs:\n    vals = {{repr(getattr(table[n], {name!r})) for n in names}}\n"
                    f"    if len(vals) > 1:\n        raise SystemExit(f'VIOLATION of GROUP-COMPAT-1: "
                    f"group {{names}} mixes {name} {{vals}}')\nprint('no violation')",
                    signature("mixed-allocation", kinds, [name]))


def check_group_page(engine: Engine, ex: Example) -> None:
    """GROUP-PAGE-1: every group ends with one page size, reached the way the
    contract states: the group's block size and page are the reference's."""
    groups = _judged_groups(engine, ex)
    if groups is None:
        return
    page_of = {g.layer_names: engine.page_size(_to_engine(engine, g.spec)) for g in groups if g.spec is not None}
    pages = set(page_of.values())
    if len(pages) > 1:
        table = dict(ex.table)
        largest = max(engine.page_size(_to_engine(engine, spec)) for spec in table.values())
        off_target = [type(table[n]).__name__ for names, page in page_of.items() if page != largest
                      for n in names if n in table]  # the layers that missed P, not those beside them
        raise Violation(f"groups have page sizes {sorted(pages)}; the largest layer page is {largest}, "
                        f"missed by {', '.join(sorted(set(off_target)))}",
                        GROUP_SETUP + "pages = {spec.page_size_bytes for _, spec in pairs}\n"
                        "if len(pages) > 1:\n    raise SystemExit(f'VIOLATION of GROUP-PAGE-1: {pages}')\n"
                        "print('no violation')",
                        signature("unequal-pages", off_target))
    try:
        expected = {frozenset(g.layer_names): g.spec for g in reference.group_layers(dict(ex.table))}
    except reference.GroupingError:
        return
    for g in groups:
        want = expected.get(frozenset(g.layer_names))
        if g.spec is None or want is None:
            continue
        got_page = engine.page_size(_to_engine(engine, g.spec))
        if g.spec.block_size != want.block_size or got_page != want.page_size_bytes:
            raise Violation(
                f"group {list(g.layer_names)} reached page {got_page} with block_size "
                f"{g.spec.block_size}; the contract's spec for that group has block_size {want.block_size} "
                f"(page {want.page_size_bytes})",
                GROUP_SETUP + "for names, spec in pairs:\n"
                f"    if set(names) == set({sorted(g.layer_names)!r}) and (spec.block_size, spec.page_size_bytes) != "
                f"({want.block_size}, {want.page_size_bytes}):\n"
                "        raise SystemExit(f'VIOLATION of GROUP-PAGE-1: block_size {spec.block_size}, page "
                f"{{spec.page_size_bytes}} (contract: {want.block_size}, {want.page_size_bytes})')\n"
                "print('no violation')",
                signature("page-not-by-block-size", [type(s).__name__ for n, s in ex.table
                                                     if n in g.layer_names]))


def check_group_share(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        raise Violation(f"grouping raised {_describe(groups)} for a uniform model",
                        "try:\n    groups = GROUPS(table)\nexcept Exception as exc:\n"
                        "    raise SystemExit(f'VIOLATION of GROUP-SHARE-1: grouping raised "
                        "{type(exc).__name__}: {exc}')\nprint('no violation')",
                        signature(f"raised-{type(groups).__name__}", ex.kinds()))
    if len(groups) != 1:
        raise Violation(f"layers whose specs all merge were split into {len(groups)} groups",
                        GROUP_SETUP + "if len(pairs) != 1:\n"
                        "    raise SystemExit(f'VIOLATION of GROUP-SHARE-1: {len(pairs)} groups')\n"
                        "print('no violation')",
                        signature("split", ex.kinds()))


# -- the engine's whole surface (ROLE-COVER-1) -------------------------------------------


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


def _cover_check(name: str) -> str:
    return ("from kvcontract.conformance.engines.registry import resolve_engine\n"
            "from kvcontract.conformance.contract.surface import unclassified\n"
            "names = [u.name for u in unclassified(resolve_engine(ENGINE))]\n"
            f"if {name!r} in names:\n"
            f"    raise SystemExit({('VIOLATION of ROLE-COVER-1: ' + name + ' is not classified')!r})\n"
            "print('no violation')")


def check_cover(engine: Engine, ex: Example) -> None:
    """ROLE-COVER-1: every spec class and field the engine defines has a role; an
    unclassified class still keeps every field through merge([o]) and merge([o, o])."""
    if ex.field is None:
        return
    if ex.cut == 1:
        _role_free(engine, ex.field)
        return
    for item in surface.unclassified(engine):
        if item.name == ex.field:
            raise Violation(item.message, _cover_check(item.name),
                            signature("unclassified", [item.kind], [item.field] if item.field else []))


def _role_free_objects(engine: Engine, cls: type, fields: set[str]) -> Any:
    """Engine objects of ``cls``: for a classified kind, its systematic base spec with
    the unclassified ``fields`` drawn from their own types (the classified fields stay
    valid); for an unclassified kind, objects built from every field's own type."""
    kind = reference.KINDS_BY_NAME.get(cls.__name__)
    base = sysm.base_spec(kind, domain_of(engine)) if kind is not None else None
    if base is None or not fields:
        return surface.engine_objects_for(engine, cls).filter(_valid_by_contract)
    opaque = engine.engine_value_domains() if isinstance(engine, surface.ValueIntrospectable) else {}
    drawn = {f.name: surface.field_strategy(cls, f, opaque) for f in dataclasses.fields(cls) if f.name in fields}
    base_obj = engine.to_engine(base)
    if type(base_obj) is not cls:
        base_obj = cls(**{f.name: getattr(base_obj, f.name) for f in dataclasses.fields(type(base_obj))
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
    check = ("from kvcontract.conformance.contract.laws.chapters import check_cover\n"
             "from kvcontract.conformance.contract.model import Example, Violation\n"
             "from kvcontract.conformance.engines.registry import resolve_engine\n"
             f"try:\n    check_cover(resolve_engine(ENGINE), Example(field={class_name!r}, cut=1))\n"
             "except Violation as v:\n    raise SystemExit(f'VIOLATION of ROLE-COVER-1: {v}')\n"
             "print('no violation')")
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
                    f"{class_name}.merge of {len(members)} identical object(s) raised {_describe(exc)}",
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


# -- requirements ----------------------------------------------------------------------


def _has_role(engine: Engine, role: Role) -> bool:
    domain = domain_of(engine)
    return any(role_of(f) is role and f.name not in domain.pinned_fields(kind)
               for kind in domain.kinds for f in dataclasses.fields(kind))


def _needs_capability(engine: Engine) -> str | None:
    return None if _has_role(engine, Role.CAPABILITY) else "the engine has no capability field"


def _needs_annotation(engine: Engine) -> str | None:
    return None if _has_role(engine, Role.ANNOTATION) else "the engine has no annotation field"


def _needs_advisory(engine: Engine) -> str | None:
    domain = domain_of(engine)
    if any(is_advisory(f) and f.name not in domain.pinned_fields(kind)
           for kind in domain.kinds for f in dataclasses.fields(kind)):
        return None
    return "the engine has no advisory annotation field"


def _needs_grouping(engine: Engine) -> str | None:
    """GROUP-*: the engine's grouping can be driven here (else skip with the adapter's reason)."""
    unavailable = getattr(engine, "grouping_unavailable", None)
    return unavailable() if callable(unavailable) else None


def _needs_grouping_and_capability(engine: Engine) -> str | None:
    return _needs_grouping(engine) or _needs_capability(engine)


def _needs_empty_merge(engine: Engine) -> str | None:
    return None if engine.supports_empty_merge else (
        f"{engine.name}'s adapter declares that its merge cannot be called with no spec")


MERGE_OPS = frozenset({"to_engine", "from_engine", "merge", "page_size"})
ERROR_OPS = frozenset({"to_engine", "from_engine", "merge"})
UNIFORM_OPS = frozenset({"to_engine", "is_uniform"})
GROUP_OPS = frozenset({"to_engine", "from_engine", "group_layers", "page_size"})
_OPTIMIZE = ("ERROR-OPTIMIZE-1",)
_MERGE = frozenset({"merge"})
_UNIFORM = frozenset({"merge", "mixed", "uniform"})
_GROUP = frozenset({"group"})


def _merge_law(clause: str, shape: Shape, check: Callable[[Engine, Example], None],
               requires: Callable[[Engine], str | None] | None = None) -> Law:
    return Law(clause, shape, check, requires or no_requirement, operations=MERGE_OPS, searched=_MERGE)


def _group_law(clause: str, shape: Shape, check: Callable[[Engine, Example], None],
               requires: Callable[[Engine], str | None]) -> Law:
    return Law(clause, shape, check, requires, operations=GROUP_OPS, searched=_GROUP)


MERGE_LAWS: tuple[Law, ...] = (
    Law("ROLE-COVER-1", NOTHING, check_cover, operations=frozenset({"introspect", "to_engine", "merge"}),
        not_searched="its input is the engine's classes, not a value", engine_examples=_cover_examples),
    _merge_law("MERGE-IDENTITY-1", ONE_SPEC, check_identity),
    _merge_law("MERGE-ORDER-1", PERMUTED, check_order),
    _merge_law("MERGE-ASSOC-1", SPLIT, check_assoc),
    _merge_law("MERGE-KIND-1", COMPATIBLE, check_kind),
    _merge_law("MERGE-AGREE-1", COMPATIBLE, _role_check("MERGE-AGREE-1", {Role.LAYOUT, Role.ALLOCATION})),
    _merge_law("MERGE-UNION-1", COMPATIBLE, check_union, _needs_capability),
    _merge_law("MERGE-ANNOTATION-1", COMPATIBLE, check_annotations, _needs_annotation),
    _merge_law("MERGE-ANNOTATION-2", ADVISORY, check_advisory, _needs_advisory),
    _merge_law("MERGE-PAGE-1", COMPATIBLE, check_page),
    _merge_law("MERGE-PURE-1", COMPATIBLE, check_pure),
    Law("ERROR-DETECT-1", NEAR_MISS, check_detect, operations=ERROR_OPS, searched=_MERGE, feeds=_OPTIMIZE),
    Law("ERROR-TYPE-1", NEAR_MISS, check_type, operations=ERROR_OPS, searched=_MERGE, feeds=_OPTIMIZE),
    Law("ERROR-MESSAGE-1", NEAR_MISS, check_message, operations=ERROR_OPS, searched=_MERGE, reads_values=True),
    Law("ERROR-KIND-1", MIXED_KINDS, check_kind_error, operations=ERROR_OPS, searched=frozenset({"mixed"}),
        feeds=_OPTIMIZE),
    Law("ERROR-EMPTY-1", NOTHING, check_empty, _needs_empty_merge, operations=frozenset({"merge"}),
        searched=frozenset({"empty"})),
    Law("UNIFORM-MERGE-1", UNIFORM_CASES, check_uniform_merge, operations=UNIFORM_OPS, searched=_UNIFORM),
    Law("UNIFORM-NORAISE-1", INCOMPATIBLE, check_uniform_noraise, operations=UNIFORM_OPS, searched=_UNIFORM,
        feeds=_OPTIMIZE),
    Law("UNIFORM-EMPTY-1", NOTHING, check_uniform_empty, operations=frozenset({"is_uniform"}),
        searched=frozenset({"empty"})),
    _group_law("GROUP-PARTITION-1", TABLE, check_partition, _needs_grouping),
    _group_law("GROUP-COMPAT-1", TABLE, check_group_compat, _needs_grouping),
    _group_law("GROUP-MERGED-1", TABLE, check_group_merged, _needs_grouping),
    _group_law("GROUP-UNION-1", TABLE, check_group_union, _needs_grouping_and_capability),
    _group_law("GROUP-PAGE-1", TABLE, check_group_page, _needs_grouping),
    _group_law("GROUP-SHARE-1", UNIFORM_TABLE, check_group_share, _needs_grouping),
)
"""The laws of chapters ROLE (the drift guard), MERGE, ERROR, UNIFORM and GROUP, in SPEC.md order."""
