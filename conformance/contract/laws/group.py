"""The laws of chapter GROUP: the engine's grouping of a model's layers against the
reference's (:func:`kvcontract.reference.group_layers`): a partition of compatible
layers, each group's spec the merge of its members with their capabilities, one page
size across groups, and mergeable layers together."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence

from kvcontract import reference
from kvcontract.conformance.contract import shapes
from kvcontract.conformance.contract.expectations import (
    FieldsDiffer,
    GroupUnion,
    Invalid,
    LayerPartition,
    MemberSpecs,
    MixedAllocation,
    MixedBlockSizes,
    OneGroup,
    Page,
    Raised,
    SharedGroup,
    UnequalPages,
)
from kvcontract.conformance.contract.laws.common import (
    EngineAnswers,
    describe,
    fields_differ,
    invalid_signature,
    needs_capability,
    raised_signature,
    to_engine,
)
from kvcontract.conformance.contract.model import (
    Example,
    KitFailure,
    Law,
    Shape,
    Violation,
    per_field,
    signature,
)
from kvcontract.conformance.contract.repro import GroupsOf, GroupSpec
from kvcontract.conformance.engines.protocol import Engine, EngineGroup, GroupingAvailability
from kvcontract.reference import InvalidSpec, KVCacheSpec, Role, role_of

_GROUPINGS: EngineAnswers[list[EngineGroup] | BaseException] = EngineAnswers(8192)


def _groups(engine: Engine, ex: Example) -> list[EngineGroup] | BaseException:
    """The engine's grouping of the example's table, or what it raised. The engine is asked
    once per table in this interpreter; every grouping clause judges that one answer (five
    clauses share the systematic tables, and grouping is most of their time)."""
    # repr, not ==: 4 and Fraction(4) are equal but may not be to an engine
    return _GROUPINGS.ask(engine, repr(ex.table), lambda: _ask_groups(engine, ex))


def _ask_groups(engine: Engine, ex: Example) -> list[EngineGroup] | BaseException:
    objs = {n: to_engine(engine, s) for n, s in ex.table}
    try:
        return engine.group_layers(objs)
    except InvalidSpec as exc:
        raise Violation(f"grouping returned an invalid spec: {exc}", Invalid(GroupsOf(), str(exc)),
                        invalid_signature(exc, ex)) from exc
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


def check_partition(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        # a refusal the reference shares is right, on a real model's table too: the GROUP chapter's
        # grouping unifies pages by merging (GROUP-PAGE-1); a table only the block-outermost packing
        # serves (DeepSeek-V3.2, -V4) is the PLAN chapter's, judged by its laws
        if _grouping_ok(ex):
            on = f" on {ex.model}'s layer table" if ex.model else ""
            raise Violation(f"grouping raised {describe(groups)}{on}", Raised(GroupsOf()),
                            raised_signature(groups, None))
        return
    names = [n for g in groups for n in g.layer_names]
    if sorted(names) != sorted(n for n, _ in ex.table):
        raise Violation(f"groups hold layers {sorted(names)}, the model has {sorted(n for n, _ in ex.table)}",
                        LayerPartition(), signature("not-a-partition", ex.kinds()))


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
                raise Violation(f"group {list(g.layer_names)} advertises {f.name}={getattr(g.spec, f.name)}, "
                                f"members need {need}", GroupUnion(f.name),
                                signature("capability-not-unioned", [type(m).__name__ for m in members], [f.name]))


def incompatible_signatures(kinds: Sequence[str], fields: Sequence[str], spec_kind: str | None = None) -> list[str]:
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
    found = [x for x in fields_differ(got, layer) if x not in _NOT_COMPARED]
    if found:
        promoted = reference.full_allocation_form(layer)
        if promoted is not layer and not [x for x in fields_differ(got, promoted) if x not in _NOT_COMPARED]:
            return []
    return found


GroupView = tuple[EngineGroup, list[KVCacheSpec], list[str], dict[str, KVCacheSpec]]


def _unified_groups(engine: Engine, ex: Example) -> Iterator[GroupView]:
    """Each group the engine built for a judgeable table, with its members' specs after
    page unification, their kind names and the unified table (nothing when grouping
    cannot be judged; the table is unified only then)."""
    groups = _judged_groups(engine, ex)
    if groups is None:
        return
    table = _unified(dict(ex.table))
    for g in groups:
        members = _group_members(g, table)
        yield g, members, [type(m).__name__ for m in members], table


def check_group_merged(engine: Engine, ex: Example) -> None:
    for g, members, kinds, table in _unified_groups(engine, ex):
        if g.spec is None:
            diffs = {n: [x for x in _member_changes(s, table[n]) if x not in engine.unsupported_fields(type(s))]
                     for n, s in (g.member_specs or {}).items()}
            bad = {n: d for n, d in diffs.items() if d}
            if bad:
                raise Violation(f"per-member specs of group {list(g.layer_names)} differ from the "
                                f"layers' own: {bad}", MemberSpecs(tuple((n, tuple(d)) for n, d in bad.items())),
                                signature("member-spec-changed", kinds))
            continue
        names = tuple(g.layer_names)
        try:
            want = reference.merge(members)
        except reference.IncompatibleSpecs as exc:
            message = f"layers {list(names)} share a group but their specs are incompatible: {exc}"
            raise Violation(f"group {list(names)} holds incompatible layers: {exc}", SharedGroup(names, message),
                            incompatible_signatures(kinds, [d.field for d in exc.disagreements],
                                                    type(g.spec).__name__)) from None
        lacks = engine.unsupported_fields(type(g.spec))  # a field the release lacks is never a finding
        wrong = [n for n in fields_differ(g.spec, want) if n not in _NOT_COMPARED and n not in lacks]
        if wrong:
            detail = ", ".join(f"{n}={getattr(g.spec, n, None)!r} (contract: {getattr(want, n, None)!r})"
                               for n in wrong)
            raise Violation(f"group {list(names)} spec differs from its members' merge: {detail}",
                            FieldsDiffer(GroupSpec(names), want, tuple(wrong)),
                            per_field("wrong-group-spec", kinds, wrong))


def check_group_compat(engine: Engine, ex: Example) -> None:
    for g, members, kinds, _table in _unified_groups(engine, ex):
        specs = [(g.member_specs or {}).get(n, g.spec) for n in g.layer_names]
        block_sizes = {s.block_size for s in specs if s is not None}
        if len(block_sizes) > 1:
            raise Violation(f"group {list(g.layer_names)} mixes block sizes {sorted(block_sizes)}",
                            MixedBlockSizes(), signature("mixed-block-sizes", kinds))
        shared = set.intersection(*[{f.name for f in dataclasses.fields(m) if role_of(f) is Role.ALLOCATION
                                     and f.name not in engine.unsupported_fields(type(m))}
                                    for m in members]) if members else set()
        for name in sorted(shared):
            values = {repr(getattr(m, name)) for m in members}
            if len(values) > 1:
                raise Violation(f"group {list(g.layer_names)} mixes {name} values {sorted(values)}",
                                MixedAllocation(name), signature("mixed-allocation", kinds, [name]))


def check_group_page(engine: Engine, ex: Example) -> None:
    """GROUP-PAGE-1: every group ends with one page size, reached the way the
    contract states: the group's block size and page are the reference's."""
    groups = _judged_groups(engine, ex)
    if groups is None:
        return
    page_of = {g.layer_names: engine.page_size(to_engine(engine, g.spec)) for g in groups if g.spec is not None}
    pages = set(page_of.values())
    if len(pages) > 1:
        table = dict(ex.table)
        largest = max(engine.page_size(to_engine(engine, spec)) for spec in table.values())
        off_target = [type(table[n]).__name__ for names, page in page_of.items() if page != largest
                      for n in names if n in table]  # the layers that missed P, not those beside them
        raise Violation(f"groups have page sizes {sorted(pages)}; the largest layer page is {largest}, "
                        f"missed by {', '.join(sorted(set(off_target)))}", UnequalPages(),
                        signature("unequal-pages", off_target))
    try:
        expected = {frozenset(g.layer_names): g.spec for g in reference.group_layers(dict(ex.table))}
    except reference.GroupingError:
        return
    for g in groups:
        want = expected.get(frozenset(g.layer_names))
        if g.spec is None or want is None:
            continue
        got_page = engine.page_size(to_engine(engine, g.spec))
        if g.spec.block_size != want.block_size or got_page != want.page_size_bytes:
            raise Violation(
                f"group {list(g.layer_names)} reached page {got_page} with block_size "
                f"{g.spec.block_size}; the contract's spec for that group has block_size {want.block_size} "
                f"(page {want.page_size_bytes})",
                Page(GroupSpec(tuple(g.layer_names)), want.page_size_bytes, want.block_size),
                signature("page-not-by-block-size", [type(s).__name__ for n, s in ex.table
                                                     if n in g.layer_names]))


def check_group_share(engine: Engine, ex: Example) -> None:
    groups = _groups(engine, ex)
    if isinstance(groups, BaseException):
        raise Violation(f"grouping raised {describe(groups)} for a uniform model", Raised(GroupsOf()),
                        signature(f"raised-{type(groups).__name__}", ex.kinds()))
    if len(groups) != 1:
        raise Violation(f"layers whose specs all merge were split into {len(groups)} groups", OneGroup(),
                        signature("split", ex.kinds()))


# -- requirements ----------------------------------------------------------------------


def _needs_grouping(engine: Engine) -> str | None:
    """GROUP-*: the engine's grouping can be driven here (else skip with the adapter's reason)."""
    return engine.grouping_unavailable() if isinstance(engine, GroupingAvailability) else None


def _needs_grouping_and_capability(engine: Engine) -> str | None:
    return _needs_grouping(engine) or needs_capability(engine)


GROUP_OPS = frozenset({"to_engine", "from_engine", "group_layers", "page_size"})


def _group_law(clause: str, shape: Shape, check: Callable[[Engine, Example], None],
               requires: Callable[[Engine], str | None] = _needs_grouping) -> Law:
    return Law(clause, shape, check, requires, operations=GROUP_OPS, searched=frozenset({"group"}))


GROUP_LAWS: tuple[Law, ...] = (
    _group_law("GROUP-PARTITION-1", shapes.TABLE, check_partition),
    _group_law("GROUP-COMPAT-1", shapes.TABLE, check_group_compat),
    _group_law("GROUP-MERGED-1", shapes.TABLE, check_group_merged),
    _group_law("GROUP-UNION-1", shapes.TABLE, check_group_union, _needs_grouping_and_capability),
    _group_law("GROUP-PAGE-1", shapes.TABLE, check_group_page),
    _group_law("GROUP-SHARE-1", shapes.UNIFORM_TABLE, check_group_share),
)
"""The laws of chapter GROUP, in SPEC.md order."""
