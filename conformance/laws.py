"""The conformance laws: one per engine-checkable clause of spec/SPEC.md.

Each :class:`Law` draws examples from a role-driven strategy restricted to
what the engine can represent, checks the engine's answer against the
reference, and raises :class:`Violation` when they differ. A violation renders
as a repro snippet that uses the engine's own classes. All judgement is here;
adapters only convert and call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from kvcontract import reference
from kvcontract.conformance import strategies as strat
from kvcontract.conformance.codec import spec_from_json, spec_to_json
from kvcontract.conformance.engine import Engine
from kvcontract.reference import AnnotationRule, KVCacheSpec, Role, role_of, rule_of
from kvcontract.spec import clause as catalogue_clause


@dataclasses.dataclass(frozen=True)
class Example:
    """One drawn input: a spec list (with an optional permutation, cut point or
    odd field), or a layer table. JSON-serialisable as a pinned witness."""

    specs: tuple[KVCacheSpec, ...] = ()
    table: tuple[tuple[str, KVCacheSpec], ...] = ()
    field: str | None = None
    order: tuple[int, ...] = ()
    cut: int = 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.specs:
            data["specs"] = [spec_to_json(s) for s in self.specs]
        if self.table:
            data["table"] = {n: spec_to_json(s) for n, s in self.table}
        if self.field is not None:
            data["field"] = self.field
        if self.order:
            data["order"] = list(self.order)
        if self.cut:
            data["cut"] = self.cut
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Example:
        return cls(
            specs=tuple(spec_from_json(s) for s in data.get("specs", [])),
            table=tuple((n, spec_from_json(s)) for n, s in data.get("table", {}).items()),
            field=data.get("field"),
            order=tuple(data.get("order", ())),
            cut=int(data.get("cut", 0)),
        )


class Violation(Exception):  # noqa: N818 - a finding, not a program error
    """The engine broke a clause on an example. ``check`` is Python source that,
    appended to the snippet's setup, reproduces the finding (it raises
    ``SystemExit("VIOLATION ...")`` when the engine still misbehaves)."""

    def __init__(self, message: str, check: str) -> None:
        super().__init__(message)
        self.message = message
        self.check = check


@dataclasses.dataclass(frozen=True)
class Law:
    """A clause as a property over generated examples."""

    clause: str
    strategy: Callable[[strat.Domain], Any]
    check: Callable[[Engine, Example], None]
    requires: Callable[[Engine], str | None] = lambda _engine: None

    @property
    def title(self) -> str:
        return catalogue_clause(self.clause).title

    @property
    def level(self) -> str:
        return catalogue_clause(self.clause).level


def domain_of(engine: Engine) -> strat.Domain:
    """The strategies' domain for an engine: its kinds; its missing fields pinned."""
    missing = engine.unsupported_kinds()
    kinds = tuple(k for k in reference.SPEC_KINDS if k not in missing)
    pinned = tuple((k, frozenset(engine.unsupported_fields(k))) for k in kinds)
    return strat.Domain(kinds=kinds, pinned=pinned)


# -- engine calls, with every exception turned into a finding ---------------

def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def _merge(engine: Engine, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
    try:
        objs = [engine.to_engine(s) for s in specs]
        return engine.from_engine(engine.merge(objs))
    except Exception as exc:  # noqa: BLE001 - any failure of compatible specs is the finding
        raise Violation(f"merge of compatible specs raised {_describe(exc)}", RAISES_CHECK) from exc


RAISES_CHECK = (
    "try:\n    merged = MERGE(specs)\nexcept Exception as exc:\n"
    "    raise SystemExit(f'VIOLATION: merge raised {type(exc).__name__}: {exc} "
    "(the contract says these specs merge)')\nprint('no violation: merged', merged)"
)


def _fields_differ(got: KVCacheSpec, want: KVCacheSpec, roles: set[Role] | None = None) -> list[str]:
    if type(got) is not type(want):
        return ["kind"]
    return [f.name for f in dataclasses.fields(want)
            if (roles is None or role_of(f) in roles) and getattr(got, f.name) != getattr(want, f.name)]


def _diff_check(clause: str, expected_var: str, names: Sequence[str]) -> str:
    return (
        f"bad = [n for n in {list(names)!r} if getattr(merged, n) != getattr({expected_var}, n)]\n"
        "if type(merged).__name__ != type(expected).__name__ or bad:\n"
        f"    raise SystemExit(f'VIOLATION of {clause}: got {{type(merged).__name__}} with '\n"
        f"                     + ', '.join(f'{{n}}={{getattr(merged, n)!r}} (contract: {{getattr({expected_var}, n)!r}})' for n in bad))\n"
        "print('no violation: merged spec as the contract requires')"
    )


def _compare_with_reference(clause: str, engine: Engine, specs: Sequence[KVCacheSpec],
                            roles: set[Role] | None) -> None:
    got = _merge(engine, specs)
    want = reference.merge(list(specs))
    bad = _fields_differ(got, want, roles)
    if bad:
        detail = ", ".join(f"{n}: {getattr(got, n, None)!r} (contract: {getattr(want, n)!r})"
                           for n in bad if n != "kind")
        if "kind" in bad:
            detail = f"kind {type(got).__name__} (contract: {type(want).__name__})"
        raise Violation(f"merged spec differs from the contract's merge: {detail}",
                        "merged = MERGE(specs)\n" + _expected_block(want) + _diff_check(clause, "expected", bad))


def _expected_block(want: KVCacheSpec) -> str:
    return f"expected = EXPECTED[{0}]\n"


# -- strategies per example shape --------------------------------------------

def _one_spec(domain: strat.Domain) -> Any:
    return strat.specs(domain=domain).map(lambda s: Example(specs=(s,)))


def _compatible(domain: strat.Domain, min_size: int = 2) -> Any:
    return strat.compatible_specs(min_size=min_size, domain=domain).map(lambda ss: Example(specs=tuple(ss)))


def _permuted(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=2, domain=domain).flatmap(
        lambda ss: st.permutations(range(len(ss))).map(
            lambda p: Example(specs=tuple(ss), order=tuple(p))))


def _split(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=2, max_size=5, domain=domain).flatmap(
        lambda ss: st.integers(1, len(ss) - 1).map(lambda c: Example(specs=tuple(ss), cut=c)))


def _near_miss(domain: strat.Domain) -> Any:
    return strat.near_misses(domain=domain).map(lambda case: Example(specs=tuple(case[0]), field=case[1]))


def _mixed_kinds(domain: strat.Domain) -> Any:
    independent = st.tuples(strat.specs(domain=domain), strat.specs(domain=domain)).filter(
        lambda ab: type(ab[0]) is not type(ab[1]))
    return st.one_of(strat.mixed_kind_pairs(domain), independent).map(lambda ab: Example(specs=tuple(ab)))


def _table(domain: strat.Domain) -> Any:
    return strat.layer_tables(domain=domain).map(lambda t: Example(table=tuple(t.items())))


def _uniform_table(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=1, max_size=5, domain=domain).map(
        lambda ss: Example(table=tuple((f"layers.{i}", s) for i, s in enumerate(ss))))


# -- checks --------------------------------------------------------------------

def check_identity(engine: Engine, ex: Example) -> None:
    (spec,) = ex.specs
    got = _merge(engine, [spec])
    bad = _fields_differ(got, spec)
    if bad:
        detail = ", ".join(f"{n}: {getattr(spec, n)!r} -> {getattr(got, n, None)!r}" for n in bad)
        raise Violation(f"merge([s]) changed {detail}",
                        "merged = MERGE(specs)\nexpected = specs[0]\n" + _diff_check("MERGE-IDENTITY-1", "expected", bad))


def check_order(engine: Engine, ex: Example) -> None:
    permuted = [ex.specs[i] for i in ex.order]
    a, b = _merge(engine, ex.specs), _merge(engine, permuted)
    bad = _fields_differ(b, a)
    if bad:
        detail = ", ".join(f"{n}: {getattr(a, n)!r} vs {getattr(b, n, None)!r}" for n in bad)
        raise Violation(
            f"merge result depends on input order: {detail}",
            f"merged = MERGE([specs[i] for i in {list(ex.order)!r}])\nexpected = MERGE(specs)\n"
            + _diff_check("MERGE-ORDER-1", "expected", bad))


def check_assoc(engine: Engine, ex: Example) -> None:
    left, right = ex.specs[: ex.cut], ex.specs[ex.cut :]
    at_once = _merge(engine, ex.specs)
    try:
        stepwise = engine.from_engine(engine.merge(
            [engine.merge([engine.to_engine(s) for s in left]),
             engine.merge([engine.to_engine(s) for s in right])]))
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"merging two merged halves raised {_describe(exc)}",
                        f"merged = MERGE([MERGE(specs[:{ex.cut}]), MERGE(specs[{ex.cut}:])])") from exc
    bad = _fields_differ(stepwise, at_once)
    if bad:
        detail = ", ".join(f"{n}: {getattr(stepwise, n, None)!r} vs {getattr(at_once, n)!r}" for n in bad)
        raise Violation(
            f"merging in steps differs from merging at once: {detail}",
            f"merged = MERGE([MERGE(specs[:{ex.cut}]), MERGE(specs[{ex.cut}:])])\nexpected = MERGE(specs)\n"
            + _diff_check("MERGE-ASSOC-1", "expected", bad))


def _role_check(clause: str, roles: set[Role] | None) -> Callable[[Engine, Example], None]:
    def check(engine: Engine, ex: Example) -> None:
        _compare_with_reference(clause, engine, ex.specs, roles)
    return check


def check_kind(engine: Engine, ex: Example) -> None:
    got = _merge(engine, ex.specs)
    if type(got) is not type(ex.specs[0]):
        raise Violation(f"merged spec is a {type(got).__name__}, members are {type(ex.specs[0]).__name__}",
                        "merged = MERGE(specs)\nexpected = specs[0]\n" + _diff_check("MERGE-KIND-1", "expected", []))


def check_annotations(engine: Engine, ex: Example) -> None:
    _compare_with_reference("MERGE-ANNOTATION-1", engine, ex.specs, {Role.ANNOTATION})


def check_page(engine: Engine, ex: Example) -> None:
    objs = [engine.to_engine(s) for s in ex.specs]
    try:
        merged = engine.merge(objs)
        page = engine.page_size(merged)
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"merge of compatible specs raised {_describe(exc)}", RAISES_CHECK) from exc
    want = ex.specs[0].page_size_bytes
    if page != want:
        raise Violation(
            f"merged page size {page} != members' {want}",
            "merged = MERGE(specs)\n"
            f"if merged.page_size_bytes != {want}:\n"
            f"    raise SystemExit(f'VIOLATION of MERGE-PAGE-1: page {{merged.page_size_bytes}} != {want}')")


def check_pure(engine: Engine, ex: Example) -> None:
    objs = [engine.to_engine(s) for s in ex.specs]
    before = [engine.from_engine(o) for o in objs]
    listing = list(objs)
    try:
        merged = engine.merge(listing)
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"merge of compatible specs raised {_describe(exc)}", RAISES_CHECK) from exc
    after = [engine.from_engine(o) for o in objs]
    if listing != objs or after != before:
        raise Violation("merge modified its inputs",
                        "before = [repr(s) for s in specs]\nmerged = MERGE(specs)\n"
                        "if [repr(s) for s in specs] != before:\n"
                        "    raise SystemExit('VIOLATION of MERGE-PURE-1: inputs changed')")
    if any(merged is o for o in objs):
        raise Violation("merge returned one of its input objects",
                        "merged = MERGE(specs)\nif any(merged is s for s in specs):\n"
                        "    raise SystemExit('VIOLATION of MERGE-PURE-1: merge returned an input object')")


def _expect_rejection(engine: Engine, ex: Example) -> BaseException | KVCacheSpec:
    objs = [engine.to_engine(s) for s in ex.specs]
    try:
        merged = engine.merge(objs)
    except Exception as exc:  # noqa: BLE001 - the exception is what is judged
        return exc
    try:
        return engine.from_engine(merged)
    except Exception as exc:  # noqa: BLE001
        return exc


def _what(ex: Example) -> str:
    return f"differ in {ex.field}" if ex.field else "are of different kinds"


def check_detect(engine: Engine, ex: Example) -> None:
    outcome = _expect_rejection(engine, ex)
    if isinstance(outcome, KVCacheSpec):
        raise Violation(
            f"merge accepted specs that {_what(ex)}",
            "try:\n    merged = MERGE(specs)\nexcept Exception as exc:\n"
            "    print('no violation: rejected with', type(exc).__name__, exc)\nelse:\n"
            f"    raise SystemExit(f'VIOLATION of ERROR-DETECT-1: merge accepted specs that {_what(ex)}: {{merged}}')")


def _type_check(clause: str, ex: Example, error: str) -> str:
    return (f"try:\n    merged = MERGE(specs)\nexcept {error} as exc:\n"
            "    print('no violation:', type(exc).__name__, exc)\nexcept Exception as exc:\n"
            f"    raise SystemExit(f'VIOLATION of {clause}: merge raised {{type(exc).__name__}}: {{exc}} "
            f"(contract: {error})')\nelse:\n"
            f"    raise SystemExit(f'VIOLATION of {clause}: merge accepted specs that {_what(ex)}: {{merged}}')")


def check_type(engine: Engine, ex: Example) -> None:
    outcome = _expect_rejection(engine, ex)
    if isinstance(outcome, KVCacheSpec):
        raise Violation(f"merge accepted specs that {_what(ex)} (no error at all)",
                        _type_check("ERROR-TYPE-1", ex, "AssertionError"))
    if not isinstance(outcome, AssertionError):
        raise Violation(f"incompatible specs raised {_describe(outcome)}, not an AssertionError",
                        _type_check("ERROR-TYPE-1", ex, "AssertionError"))


def check_kind_error(engine: Engine, ex: Example) -> None:
    outcome = _expect_rejection(engine, ex)
    if not isinstance(outcome, AssertionError):
        got = "accepted them" if isinstance(outcome, KVCacheSpec) else f"raised {_describe(outcome)}"
        raise Violation(f"merge of {type(ex.specs[0]).__name__} and {type(ex.specs[1]).__name__} {got}",
                        _type_check("ERROR-KIND-1", ex, "AssertionError"))


def check_message(engine: Engine, ex: Example) -> None:
    outcome = _expect_rejection(engine, ex)
    if isinstance(outcome, BaseException) and ex.field and ex.field not in str(outcome):
        raise Violation(
            f"the error does not name the disagreeing field {ex.field!r}: {_describe(outcome)}",
            f"try:\n    MERGE(specs)\nexcept Exception as exc:\n    if {ex.field!r} not in str(exc):\n"
            f"        raise SystemExit(f'VIOLATION of ERROR-MESSAGE-1: message does not name {ex.field}: {{exc}}')")


def check_empty(engine: Engine, ex: Example) -> None:
    try:
        engine.merge([])
    except AssertionError:
        return
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"merge([]) raised {_describe(exc)}, not an AssertionError",
                        "MERGE([])") from exc
    raise Violation("merge([]) returned a spec", "print(MERGE([]))")


def _uniform(engine: Engine, table: Sequence[tuple[str, KVCacheSpec]]) -> bool | BaseException:
    try:
        return engine.is_uniform({n: engine.to_engine(s) for n, s in table})
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
            f"    raise SystemExit(f'VIOLATION of UNIFORM-MERGE-1: uniform is {{got}}, contract: {want}')")


def check_uniform_noraise(engine: Engine, ex: Example) -> None:
    table = tuple((f"layers.{i}", s) for i, s in enumerate(ex.specs))
    got = _uniform(engine, table)
    if isinstance(got, BaseException):
        raise Violation(
            f"is_uniform raised {_describe(got)} instead of answering False",
            "try:\n    got = UNIFORM(table)\nexcept Exception as exc:\n"
            "    raise SystemExit(f'VIOLATION of UNIFORM-NORAISE-1: {type(exc).__name__}: {exc}')\n"
            "print('no violation: uniform =', got)")


def check_uniform_empty(engine: Engine, ex: Example) -> None:
    got = _uniform(engine, ())
    if got is not True:
        raise Violation(f"is_uniform({{}}) gave {got!r}",
                        "if UNIFORM({}) is not True:\n    raise SystemExit('VIOLATION of UNIFORM-EMPTY-1')")


# -- grouping ------------------------------------------------------------------

def _groups(engine: Engine, ex: Example) -> Any:
    try:
        return engine.group_layers({n: engine.to_engine(s) for n, s in ex.table})
    except Exception as exc:  # noqa: BLE001
        return exc


def _grouping_ok(ex: Example) -> bool:
    try:
        reference.group_layers(dict(ex.table))
    except reference.GroupingError:
        return False
    return True


GROUP_SETUP = "groups = GROUPS(table)\npairs = GROUP_PAIRS(groups)\n"


def check_partition(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        if _grouping_ok(ex):
            raise Violation(f"grouping raised {_describe(groups)}", GROUP_SETUP)
        return
    names = [n for g in groups for n in g.layer_names]
    if sorted(names) != sorted(n for n, _ in ex.table):
        raise Violation(
            f"groups hold layers {sorted(names)}, the model has {sorted(n for n, _ in ex.table)}",
            GROUP_SETUP + "names = sorted(n for names, _ in pairs for n in names)\n"
            "if names != sorted(table):\n"
            "    raise SystemExit(f'VIOLATION of GROUP-PARTITION-1: {names} vs {sorted(table)}')")


def _group_members(g: Any, table: Mapping[str, KVCacheSpec]) -> list[KVCacheSpec]:
    return [table[n] for n in g.layer_names if n in table]


def check_group_union(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        return
    table = dict(ex.table)
    for g in groups:
        members = _group_members(g, table)
        specs = [g.spec] if g.spec is not None else list((g.member_specs or {}).values())
        for spec in specs:
            for f in dataclasses.fields(spec):
                if role_of(f) is not Role.CAPABILITY:
                    continue
                need = any(getattr(m, f.name, False) for m in members)
                if g.spec is None:
                    continue  # per-member specs carry each member's own flag
                if getattr(spec, f.name) != need:
                    raise Violation(
                        f"group {list(g.layer_names)} advertises {f.name}={getattr(spec, f.name)}, "
                        f"members need {need}",
                        GROUP_SETUP + "for names, spec in pairs:\n"
                        f"    need = any(getattr(table[n], {f.name!r}, False) for n in names)\n"
                        f"    have = getattr(spec, {f.name!r})\n"
                        "    if have != need:\n"
                        f"        raise SystemExit(f'VIOLATION of GROUP-UNION-1: group {{names}} has "
                        f"{f.name}={{have}}, members need {{need}}')")


_NOT_COMPARED = frozenset({"block_size", "page_size_padded"})


def check_group_merged(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        return
    table = dict(ex.table)
    for g in groups:
        members = _group_members(g, table)
        if g.spec is None:
            bad = [n for n, s in (g.member_specs or {}).items()
                   if _fields_differ(s, table[n], None) not in ([], *[[x] for x in _NOT_COMPARED])]
            if bad:
                raise Violation(f"per-member specs of group {list(g.layer_names)} differ from the "
                                f"layers' own: {bad}", GROUP_SETUP)
            continue
        names = tuple(g.layer_names)
        try:
            want = reference.merge(members)
        except reference.IncompatibleSpecs as exc:
            raise Violation(
                f"group {list(names)} holds incompatible layers: {exc}",
                GROUP_SETUP + f"if any(set(n) == set({names!r}) for n, _ in pairs):\n"
                f"    raise SystemExit('VIOLATION of GROUP-MERGED-1: layers {list(names)} share a group "
                f"but their specs are incompatible: {exc}')") from None
        bad = [n for n in _fields_differ(g.spec, want) if n not in _NOT_COMPARED]
        if bad:
            detail = ", ".join(f"{n}={getattr(g.spec, n, None)!r} (contract: {getattr(want, n)!r})"
                               for n in bad)
            raise Violation(
                f"group {list(names)} spec differs from its members' merge: {detail}",
                GROUP_SETUP + f"expected = {engine.render_spec(want)}\n"
                "for names, spec in pairs:\n"
                f"    if set(names) == set({names!r}):\n"
                f"        wrong = [n for n in {bad!r} if getattr(spec, n) != getattr(expected, n)]\n"
                "        if wrong:\n"
                "            raise SystemExit(f'VIOLATION of GROUP-MERGED-1: group {names} has '\n"
                "                             + ', '.join(f'{n}={getattr(spec, n)!r} (contract: {getattr(expected, n)!r})' for n in wrong))\n"
                "print('no violation')")


def check_group_compat(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        return
    table = dict(ex.table)
    for g in groups:
        members = _group_members(g, table)
        block_sizes = {(g.member_specs or {}).get(n, g.spec).block_size for n in g.layer_names}  # type: ignore[union-attr]
        if len(block_sizes) > 1:
            raise Violation(f"group {list(g.layer_names)} mixes block sizes {sorted(block_sizes)}", GROUP_SETUP)
        shared = set.intersection(*[{f.name for f in dataclasses.fields(m) if role_of(f) is Role.ALLOCATION}
                                    for m in members]) if members else set()
        for name in sorted(shared):
            values = {getattr(m, name) for m in members}
            if len(values) > 1:
                raise Violation(
                    f"group {list(g.layer_names)} mixes {name} values {sorted(map(repr, values))}",
                    GROUP_SETUP + f"for names, spec in pairs:\n    vals = {{getattr(table[n], {name!r}) for n in names}}\n"
                    f"    if len(vals) > 1:\n        raise SystemExit(f'VIOLATION of GROUP-COMPAT-1: "
                    f"group {{names}} mixes {name} {{vals}}')")


def check_group_page(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        return
    pages = {g.spec.page_size_bytes for g in groups if g.spec is not None}
    if len(pages) > 1:
        raise Violation(f"groups have page sizes {sorted(pages)}",
                        GROUP_SETUP + "pages = {spec.page_size_bytes for _, spec in pairs}\n"
                        "if len(pages) > 1:\n    raise SystemExit(f'VIOLATION of GROUP-PAGE-1: {pages}')")


def check_group_share(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        raise Violation(f"grouping raised {_describe(groups)} for a uniform model", GROUP_SETUP)
    if len(groups) != 1:
        raise Violation(f"layers whose specs all merge were split into {len(groups)} groups",
                        GROUP_SETUP + "if len(pairs) != 1:\n"
                        "    raise SystemExit(f'VIOLATION of GROUP-SHARE-1: {len(pairs)} groups')")


def _needs_capability(engine: Engine) -> str | None:
    domain = domain_of(engine)
    for kind in domain.kinds:
        pinned = domain.pinned_fields(kind)
        if any(role_of(f) is Role.CAPABILITY and f.name not in pinned for f in dataclasses.fields(kind)):
            return None
    return "the engine has no capability field"


def _needs_empty_merge(engine: Engine) -> str | None:
    return None if engine.supports_empty_merge else (
        f"{engine.name}'s merge is reached through its first spec; it cannot be called with none")


def _needs_annotation(engine: Engine) -> str | None:
    domain = domain_of(engine)
    for kind in domain.kinds:
        pinned = domain.pinned_fields(kind)
        if any(role_of(f) is Role.ANNOTATION and f.name not in pinned for f in dataclasses.fields(kind)):
            return None
    return "the engine has no annotation field"


MERGE_LAWS: tuple[Law, ...] = (
    Law("MERGE-IDENTITY-1", _one_spec, check_identity),
    Law("MERGE-ORDER-1", _permuted, check_order),
    Law("MERGE-ASSOC-1", _split, check_assoc),
    Law("MERGE-KIND-1", _compatible, check_kind),
    Law("MERGE-AGREE-1", _compatible, _role_check("MERGE-AGREE-1", {Role.LAYOUT, Role.ALLOCATION})),
    Law("MERGE-UNION-1", _compatible, _role_check("MERGE-UNION-1", {Role.CAPABILITY}), _needs_capability),
    Law("MERGE-ANNOTATION-1", _compatible, check_annotations, _needs_annotation),
    Law("MERGE-PAGE-1", _compatible, check_page),
    Law("MERGE-PURE-1", _compatible, check_pure),
    Law("ERROR-DETECT-1", _near_miss, check_detect),
    Law("ERROR-TYPE-1", _near_miss, check_type),
    Law("ERROR-MESSAGE-1", _near_miss, check_message),
    Law("ERROR-KIND-1", _mixed_kinds, check_kind_error),
    Law("ERROR-EMPTY-1", lambda d: st.just(Example()), check_empty, _needs_empty_merge),
    Law("UNIFORM-MERGE-1", lambda d: st.one_of(_near_miss(d), _compatible(d, 1)), check_uniform_merge),
    Law("UNIFORM-NORAISE-1", _near_miss, check_uniform_noraise),
    Law("UNIFORM-EMPTY-1", lambda d: st.just(Example()), check_uniform_empty),
    Law("GROUP-PARTITION-1", _table, check_partition),
    Law("GROUP-COMPAT-1", _table, check_group_compat),
    Law("GROUP-MERGED-1", _table, check_group_merged),
    Law("GROUP-UNION-1", _table, check_group_union, _needs_capability),
    Law("GROUP-PAGE-1", _table, check_group_page),
    Law("GROUP-SHARE-1", _uniform_table, check_group_share),
)
"""The laws of chapters MERGE, ERROR, UNIFORM and GROUP, in SPEC.md order."""


def all_laws() -> tuple[Law, ...]:
    """Every engine-checkable clause, in SPEC.md order (DISPATCH laws included)."""
    from kvcontract.conformance.dispatch_laws import DISPATCH_LAWS

    return (*MERGE_LAWS, *DISPATCH_LAWS)


def __getattr__(name: str) -> Any:
    # ``LAWS`` is computed on first use: dispatch_laws imports this module, so
    # importing it here at module level would be circular.
    if name == "LAWS":
        return all_laws()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

DERIVED = {"ERROR-OPTIMIZE-1": ("ERROR-DETECT-1", "ERROR-TYPE-1", "ERROR-KIND-1", "UNIFORM-NORAISE-1")}
"""Clauses judged from others: ERROR-OPTIMIZE-1 fails when one of these holds
in the normal interpreter but not under python -O."""


def law(clause_id: str) -> Law:
    for candidate in all_laws():
        if candidate.clause == clause_id:
            return candidate
    raise KeyError(f"no law for clause {clause_id!r}")


# -- snippets --------------------------------------------------------------------

def render_snippet(engine: Engine, law_: Law, ex: Example, violation: Violation, optimized: bool) -> str:
    """A self-contained Python program that reproduces ``violation``."""
    kinds = sorted({type(s) for s in ex.specs} | {type(s) for _, s in ex.table}, key=lambda k: k.__name__)
    interpreter = "python -O" if optimized else "python"
    lines = [
        f"# kvcontract repro: {law_.clause} ({law_.title}) on {engine.name} {engine.version}",
        f"# run with: {interpreter} repro.py",
        f"# finding: {violation.message}",
        *engine.snippet_imports(kinds),
    ]
    if ex.specs:
        lines.append("specs = [")
        lines += [f"    {engine.render_spec(s)}," for s in ex.specs]
        lines.append("]")
    if ex.table or "UNIFORM(" in violation.check or "GROUPS(" in violation.check:
        lines.append("table = {")
        lines += [f"    {n!r}: {engine.render_spec(s)}," for n, s in ex.table]
        if not ex.table and ex.specs:
            lines += [f"    'layers.{i}': specs[{i}]," for i in range(len(ex.specs))]
        lines.append("}")
    check = violation.check
    if "EXPECTED[" in check:
        want = reference.merge(list(ex.specs))
        check = check.replace("expected = EXPECTED[0]", f"expected = {engine.render_spec(want)}")
    check = check.replace("MERGE(", "_merge(").replace("UNIFORM(", "_uniform(")
    check = check.replace("GROUP_PAIRS(", "_group_pairs(").replace("GROUPS(", "_groups(")
    lines += [
        f"def _merge(specs): return {engine.render_merge('specs')}",
        f"def _uniform(table): return {engine.render_is_uniform('table')}",
        f"def _groups(table): return {engine.render_group_layers('table')}",
        f"def _group_pairs(groups): return {engine.render_group_pairs('groups')}",
        check,
    ]
    return "\n".join(lines) + "\n"


def annotation_rule_of(spec: KVCacheSpec, name: str) -> AnnotationRule | None:
    for f in dataclasses.fields(spec):
        if f.name == name and role_of(f) is Role.ANNOTATION:
            return rule_of(f)
    return None
