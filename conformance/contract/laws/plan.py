"""The laws of chapter PLAN: the engine's planner (groups, blocks and tensors of a layer
table within a memory budget) against the reference's plan
(:func:`kvcontract.reference.plan`) and the chapter's invariants.

The planner is asked once per (table, hybrid manager on or off, layout) in this interpreter;
every clause judges that one answer (PLAN-MATCH-1 asks both layouts, the others the
layer-outermost one). The memory budget is the kit's, a function of the table: seven of the
reference's blocks and 13 bytes more (a budget that is not a multiple of a block), at
least 1 MiB; where the reference cannot plan the table, 1 GiB and 13 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.contract.expectations import Invalid
from kvcontract.conformance.contract.laws.common import (
    EngineAnswers,
    describe,
    invalid_signature,
    raised_signature,
    to_engine,
)
from kvcontract.conformance.contract.laws.plan_tables import (
    match_settings,
    own_hybrid,
    plan_table,
    sys_plan_table,
)
from kvcontract.conformance.contract.model import (
    Example,
    KitFailure,
    Law,
    Shape,
    Violation,
    signature,
)
from kvcontract.conformance.contract.plan_compare import Difference, compare, expected_of
from kvcontract.conformance.contract.plan_expectations import (
    HiddenStateGroup,
    HybridPlan,
    PlanBacked,
    PlanMatches,
    PlanRaised,
    PlanTensors,
    PlanUsed,
    TypeOfMembers,
)
from kvcontract.conformance.contract.repro import PlanOf
from kvcontract.conformance.engines.protocol import Engine, EnginePlan, Planning
from kvcontract.reference import GroupingError, InvalidSpec, KVCacheSpec
from kvcontract.reference.planning import type_mismatch

# -- the shape: layer tables as grouping draws them (:mod:`.plan_tables`) ----------------------

_BUDGETS: dict[str, int] = {}
_REFERENCE_PLANS: dict[tuple[str, bool], bool] = {}
_PLANS_KEPT = 16384


_KEYS: dict[int, tuple[Any, str]] = {}


def table_key(table: Mapping[str, KVCacheSpec] | Sequence[tuple[str, KVCacheSpec]]) -> str:
    """``repr`` of ``dict(table)``, what the plans are remembered by; computed once per table
    object (an example's table is judged by six clauses, and its repr cost more than its plan)."""
    held = _KEYS.get(id(table))
    if held is None or held[0] is not table:
        if len(_KEYS) > _PLANS_KEPT:
            _KEYS.clear()
        held = _KEYS[id(table)] = (table, repr(dict(table)))
    return held[1]


def budget_of(table: Mapping[str, KVCacheSpec] | Sequence[tuple[str, KVCacheSpec]]) -> int:
    """The kit's memory budget for ``table`` (see the module's docstring); remembered per table."""
    key = table_key(table)
    if key not in _BUDGETS:
        groups = _reference_groups(table)
        if isinstance(groups, GroupingError):
            _BUDGETS[key] = (1 << 30) + 13
        else:
            _BUDGETS[key] = max(reference.sizing.bytes_per_block(groups) * 7, 1 << 20) + 13
        if len(_BUDGETS) > _PLANS_KEPT:
            _BUDGETS.clear()
    return _BUDGETS[key]


_Groups = tuple[reference.planning.PlanGroup, ...] | GroupingError
_GROUPS: dict[tuple[str, bool], _Groups] = {}
"""The reference's groups per (table, hybrid), layer-outermost."""
_PACKED: dict[tuple[str, bool], _Groups] = {}
"""The same, block-outermost."""


def _reference_groups(table: Mapping[str, KVCacheSpec] | Sequence[tuple[str, KVCacheSpec]],
                      hybrid: bool = True, block_outermost: bool = False) -> _Groups:
    """The reference's groups of ``table`` (:func:`~kvcontract.reference.plan_groups`), or its
    refusal; remembered per table, mode and layout (the budget and the reference's plan both
    start here)."""
    held = _PACKED if block_outermost else _GROUPS
    key = (table_key(table), hybrid)
    if key not in held:
        if len(held) > _PLANS_KEPT:
            held.clear()
        try:
            held[key] = tuple(reference.plan_groups(dict(table), hybrid=hybrid, block_outermost=block_outermost))
        except GroupingError as exc:
            held[key] = exc
    return held[key]


_SIZED: dict[tuple[str, bool, bool], reference.KVCachePlan | GroupingError] = {}


def _reference_plan(ex: Example, hybrid: bool, block_outermost: bool) -> reference.KVCachePlan | GroupingError:
    """The reference's whole plan of the example's table within the kit's budget, or its refusal."""
    key = (table_key(ex.table), hybrid, block_outermost)
    if key not in _SIZED:
        if len(_SIZED) > _PLANS_KEPT:
            _SIZED.clear()
        groups = _reference_groups(ex.table, hybrid, block_outermost)
        try:
            if isinstance(groups, GroupingError):
                raise groups
            _SIZED[key] = reference.sizing.size_plan(groups, budget_of(ex.table), block_outermost)
        except GroupingError as exc:
            _SIZED[key] = exc
    return _SIZED[key]


# -- the engine's plan, asked once per table and mode ---------------------------------------

_PLANS: EngineAnswers[EnginePlan | BaseException] = EngineAnswers(_PLANS_KEPT)


def _plan(engine: Engine, ex: Example, hybrid: bool = True, block_outermost: bool = False
          ) -> EnginePlan | BaseException:
    return _PLANS.ask(engine, (table_key(ex.table), hybrid, block_outermost),
                      lambda: _ask_plan(engine, ex, hybrid, block_outermost))


def _ask_plan(engine: Engine, ex: Example, hybrid: bool, block_outermost: bool) -> EnginePlan | BaseException:
    objs = {n: to_engine(engine, s) for n, s in ex.table}
    memory = budget_of(ex.table)
    try:
        answer: EnginePlan | BaseException = engine.plan_layers(  # type: ignore[attr-defined]
            objs, memory, hybrid=hybrid, block_outermost=block_outermost)
    except InvalidSpec as exc:  # the adapter read back a spec no valid spec can be: the engine's finding
        raise Violation(f"planning returned an invalid spec: {exc}",
                        Invalid(PlanOf(memory, hybrid, block_outermost), str(exc)), invalid_signature(exc, ex)) from exc
    except KitFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's refusal, judged by the laws
        answer = exc
    return answer


def _reference_plans(ex: Example, hybrid: bool = True) -> bool:
    """Whether the reference plans the table (remembered per table and mode)."""
    key = (table_key(ex.table), hybrid)
    if key not in _REFERENCE_PLANS:
        groups = _reference_groups(ex.table, hybrid)
        try:
            if isinstance(groups, GroupingError):
                raise groups
            reference.sizing.size_plan(groups, budget_of(ex.table))
            _REFERENCE_PLANS[key] = True
        except GroupingError:
            _REFERENCE_PLANS[key] = False
        if len(_REFERENCE_PLANS) > _PLANS_KEPT:
            _REFERENCE_PLANS.clear()
    return _REFERENCE_PLANS[key]


_Answers = dict[str, tuple[Any, ...]]


def _reference_answers(examples: Sequence[Example]) -> tuple[Callable[[_Answers], None], _Answers]:
    """The reference's answers for ``examples`` (their groups in both modes, budget, whether it
    plans them), by table: what the PLAN laws would each work out first (0.4 s of a quick pass,
    the same in both of a check's workers). :attr:`Shape.answers` of :data:`PLAN_TABLE`."""
    answers: _Answers = {}
    for ex in examples:
        key = table_key(ex.table)
        if key not in answers:
            answers[key] = (_reference_groups(ex.table, True), _reference_groups(ex.table, False), budget_of(ex.table),
                            _reference_plans(ex, True), _reference_plans(ex, False),
                            _reference_groups(ex.table, True, True), _reference_groups(ex.table, False, True))
    return _adopt_answers, answers


def _adopt_answers(answers: _Answers) -> None:
    """Remember answers :func:`_reference_answers` worked out (here or in another worker)."""
    if len(_GROUPS) + 2 * len(answers) > _PLANS_KEPT:
        for held in (_GROUPS, _PACKED, _BUDGETS, _REFERENCE_PLANS):
            held.clear()
    for key, (grouped, grouped_off, budget, plans, plans_off, packed, packed_off) in answers.items():
        _GROUPS[(key, True)], _GROUPS[(key, False)], _BUDGETS[key] = grouped, grouped_off, budget
        _REFERENCE_PLANS[(key, True)], _REFERENCE_PLANS[(key, False)] = plans, plans_off
        _PACKED[(key, True)], _PACKED[(key, False)] = packed, packed_off


PLAN_TABLE = Shape("plan-table", plan_table, sys_plan_table, answers=_reference_answers)


def _judged(engine: Engine, ex: Example) -> EnginePlan | None:
    """The engine's plan with the hybrid-manager setting it picks for the table (on for the contract's
    own); None when it refused (PLAN-SIZE-1 judges that)."""
    answer = _plan(engine, ex, own_hybrid(ex))
    return None if isinstance(answer, BaseException) else answer


def _layer_specs(plan: EnginePlan) -> dict[str, KVCacheSpec]:
    """The spec each layer is allocated with: its group's, or its own in a per-member group."""
    out: dict[str, KVCacheSpec] = {}
    for g in plan.groups:
        for n in g.layer_names:
            spec = (g.member_specs or {}).get(n, g.spec)
            if spec is not None:
                out[n] = spec
    return out


def _kinds(table: Mapping[str, KVCacheSpec], names: Any) -> list[str]:
    return [type(table[n]).__name__ for n in names if n in table]


# -- PLAN-TYPE-1 ------------------------------------------------------------------------------


_TYPE_OUTCOMES = {"manager": "per-member-mixed-manager", "page_size_bytes": "per-member-mixed-type",
                  "state_alignment": "per-member-mixed-type", "block_size": "mixed-block-sizes"}
"""A per-member group's mismatch as a signature's outcome: an ALLOCATION field or the block size
is the outcome GROUP-COMPAT-1 gives the same members (one defect however it is reached); the
block manager and the layout values of state layers are this chapter's own."""


def check_type(engine: Engine, ex: Example) -> None:
    plan = _judged(engine, ex)
    if plan is None:
        return
    table = dict(ex.table)
    for g in plan.groups:
        if g.spec is not None or not g.member_specs:
            continue
        names = list(g.member_specs)
        first = g.member_specs[names[0]]
        for n in names[1:]:
            what = type_mismatch(first, g.member_specs[n])
            if what is not None:
                pair = (names[0], n)
                raise Violation(f"per-member group {list(g.layer_names)} holds {pair[0]} and {n}, which differ "
                                f"in {what}", TypeOfMembers(budget_of(ex.table), pair),
                                signature(_TYPE_OUTCOMES.get(what, "mixed-allocation"), _kinds(table, pair),
                                          [] if what == "block_size" else [what]))


# -- PLAN-HIDDEN-1 ----------------------------------------------------------------------------


def _hidden(spec: KVCacheSpec | None) -> bool:
    return isinstance(spec, reference.HiddenStateCacheSpec)


def check_hidden(engine: Engine, ex: Example) -> None:
    plan = _judged(engine, ex)
    if plan is None or len(plan.groups) < 2:
        return
    table = dict(ex.table)
    for name, spec in table.items():
        if not _hidden(spec):
            continue
        group = next((g for g in plan.groups if name in g.layer_names), None)
        if group is None:
            continue  # a missing layer is PLAN-TENSOR-1's finding
        others = [n for n in group.layer_names if not _hidden(table.get(n))]
        if group.spec is None or not _hidden(group.spec) or others:
            form = "per-member" if group.spec is None else type(group.spec).__name__
            raise Violation(f"hidden-state layer {name} is in a group ({form}) with {others or 'no other layer'} "
                            f"among {len(plan.groups)} groups", HiddenStateGroup(budget_of(ex.table), name),
                            signature("hidden-state-not-alone", _kinds(table, group.layer_names)))


# -- PLAN-HYBRID-1 ----------------------------------------------------------------------------

_LOCAL = (reference.SlidingWindowSpec, reference.ChunkedLocalAttentionSpec)


def _parts(table: Mapping[str, KVCacheSpec]) -> int:
    """The DCP shardings of the layers other than hidden-state ones: at most one group each."""
    return len({isinstance(s, reference.AttentionSpec) and not s.dcp_sharded for s in table.values() if not _hidden(s)})


def _counted(answer: EnginePlan, table: Mapping[str, KVCacheSpec]) -> int:
    """The groups PLAN-HYBRID-1 counts: those holding a layer other than a hidden-state one (a
    hidden-state layer keeps a group of its own where there are several, PLAN-HIDDEN-1)."""
    return sum(1 for g in answer.groups if not all(_hidden(table.get(n)) for n in g.layer_names))


def check_hybrid(engine: Engine, ex: Example) -> None:
    table = dict(ex.table)
    if not table:
        return
    answer = _plan(engine, ex, hybrid=False)
    memory = budget_of(ex.table)
    if not _reference_plans(ex, hybrid=False):
        if not isinstance(answer, BaseException) and _counted(answer, table) > _parts(table):
            raise Violation(f"with the hybrid manager off, planning answered {_counted(answer, table)} groups for layers "
                            "that cannot form one", HybridPlan(memory, _parts(table), refuse=True),
                            signature("hybrid-off-not-one-group"))
        return
    if isinstance(answer, BaseException):
        raise Violation(f"with the hybrid manager off, planning raised {describe(answer)}",
                        PlanRaised(memory, hybrid=False), raised_signature(answer, None, "hybrid-off-raised")) from answer
    if _counted(answer, table) > _parts(table):
        raise Violation(f"with the hybrid manager off, planning made {_counted(answer, table)} groups "
                        f"(at most {_parts(table)})", HybridPlan(memory, _parts(table)),
                        signature("hybrid-off-not-one-group"))
    with_full = {n for part in reference.planning.sharding_parts(table)
                 if any(isinstance(s, reference.FullAttentionSpec) for s in part.values()) for n in part}
    kept = sorted(n for n, s in _layer_specs(answer).items() if isinstance(s, _LOCAL) and n in with_full)
    if kept:
        raise Violation(f"with the hybrid manager off, {kept} keep local-attention allocation beside full "
                        "attention", HybridPlan(memory, _parts(table)),
                        signature("hybrid-off-local-kept", _kinds(table, kept)))


# -- PLAN-SIZE-1, PLAN-SIZE-2 ---------------------------------------------------------------


def check_size(engine: Engine, ex: Example) -> None:
    table = dict(ex.table)
    hybrid = own_hybrid(ex)
    answer = _plan(engine, ex, hybrid)
    memory = budget_of(ex.table)
    if isinstance(answer, BaseException):
        if _reference_plans(ex, hybrid) and ex.table:
            raise Violation(f"planning raised {describe(answer)}", PlanRaised(memory, hybrid),
                            raised_signature(answer, None, "plan-raised")) from answer
        return
    sizes = sorted({t.size_bytes for t in answer.tensors})
    if len(sizes) > 1:
        raise Violation(f"the tensors have sizes {sizes}: not one backing allocation", PlanBacked(memory),
                        signature("tensor-sizes-differ"))
    if sizes and sizes[0] > memory:
        raise Violation(f"the backing allocation of {sizes[0]} bytes exceeds the budget of {memory}",
                        PlanBacked(memory), signature("over-budget"))
    specs = _layer_specs(answer)
    for t in answer.tensors:
        if None in (t.offset, t.layer_stride, t.block_stride) or answer.num_blocks == 0 or not t.layer_names:
            continue
        page = max(engine.page_size(to_engine(engine, specs[n])) for n in t.layer_names if n in specs)
        end = (t.offset or 0) + (len(t.layer_names) - 1) * (t.layer_stride or 0) \
            + (answer.num_blocks - 1) * (t.block_stride or 0) + page
        if end > t.size_bytes:
            raise Violation(f"layers {list(t.layer_names)} need bytes up to {end} for {answer.num_blocks} blocks; "
                            f"the tensor has {t.size_bytes}", PlanBacked(memory),
                            signature("layer-not-backed", _kinds(table, t.layer_names)))


def extent(engine: Engine, plan: EnginePlan) -> int:
    """The bytes the plan's tensors address: one past the furthest block slot (PLAN-SIZE-2); a
    slot is its page, or its block stride where that pads the page (a layer's own stride:
    between the page and the layer stride); a tensor without a stated placement addresses its
    whole size."""
    specs = _layer_specs(plan)
    ends = [0]
    for t in plan.tensors:
        if None in (t.offset, t.layer_stride, t.block_stride) or not t.layer_names or plan.num_blocks == 0:
            ends.append(t.size_bytes if plan.num_blocks else 0)
            continue
        page = max(engine.page_size(to_engine(engine, specs[n])) for n in t.layer_names if n in specs)
        stride, layer_stride = t.block_stride or 0, t.layer_stride or 0
        slot = stride if page <= stride <= layer_stride else page
        ends.append((t.offset or 0) + (len(t.layer_names) - 1) * layer_stride
                    + (plan.num_blocks - 1) * stride + slot)
    return max(ends)


def check_used(engine: Engine, ex: Example) -> None:
    plan = _judged(engine, ex)
    if plan is None or not plan.tensors:
        return
    memory = budget_of(ex.table)
    if plan.num_blocks == 0:
        groups = _reference_groups(ex.table)
        per_block = reference.sizing.bytes_per_block(groups) \
            if _reference_plans(ex) and not isinstance(groups, GroupingError) else 0
        if 0 < per_block <= memory:
            raise Violation(f"no block planned; the budget of {memory} bytes buys {memory // per_block}",
                            PlanUsed(memory), signature("budget-unused"))
        return
    used = extent(engine, plan)
    per_block = used // plan.num_blocks
    if memory - used >= per_block:
        raise Violation(f"{plan.num_blocks} blocks of {per_block} bytes address {used} bytes and leave "
                        f"{memory - used} of {memory} unused", PlanUsed(memory), signature("budget-unused"))


# -- PLAN-TENSOR-1 ----------------------------------------------------------------------------


def check_tensors(engine: Engine, ex: Example) -> None:
    plan = _judged(engine, ex)
    if plan is None:
        return
    table = dict(ex.table)
    memory = budget_of(ex.table)
    held: dict[str, int] = {n: 0 for n in table}
    for t in plan.tensors:
        for n in t.layer_names:
            held[n] = held.get(n, 0) + 1
    wrong = sorted(n for n, count in held.items() if count != 1)
    if wrong:
        raise Violation(f"layers {wrong} are held by {[held[n] for n in wrong]} tensors", PlanTensors(memory),
                        signature("layer-not-in-one-tensor", _kinds(table, wrong)))
    group_of = {n: i for i, g in enumerate(plan.groups) for n in g.layer_names}
    specs = _layer_specs(plan)
    for t in plan.tensors:
        groups = {group_of.get(n) for n in t.layer_names}
        pages = {engine.page_size(to_engine(engine, specs[n])) for n in t.layer_names if n in specs}
        if len(groups) > 1 or len(pages) > 1:
            what = "groups" if len(groups) > 1 else "pages"
            raise Violation(f"tensor of {list(t.layer_names)} spans {len(groups)} groups and pages {sorted(pages)}",
                            PlanTensors(memory), signature(f"tensor-mixes-{what}", _kinds(table, t.layer_names)))


# -- PLAN-MATCH-1 -----------------------------------------------------------------------------


def _layouts(engine: Engine) -> tuple[bool, ...]:
    """The layouts (block-outermost or not) the engine's planner is judged in: both, unless the
    adapter says its engine cannot plan block-outermost here (``block_outermost_unavailable``)."""
    unavailable = getattr(engine, "block_outermost_unavailable", None)
    return (False,) if callable(unavailable) and unavailable() else (False, True)


def _setting(hybrid: bool, block_outermost: bool) -> str:
    return (f"hybrid manager {'on' if hybrid else 'off'}, "
            f"{'block-outermost' if block_outermost else 'layer-outermost'}")


def _match_violation(ex: Example, hybrid: bool, block_outermost: bool, expected: Any,
                     differences: Sequence[Difference]) -> Violation:
    first, memory = differences[0], budget_of(ex.table)
    more = f" (and {len(differences) - 1} more difference{'s' * (len(differences) > 2)})" if len(differences) > 1 else ""
    if first.what == "raised":
        expect: Any = PlanRaised(memory, hybrid, block_outermost)
    else:
        layer, value, fields = expected_of(expected, first)
        expect = PlanMatches(memory, hybrid, block_outermost, first.what, layer, value, fields)
    return Violation(f"{_setting(hybrid, block_outermost)}: the plan differs from the reference's: {first}{more}",
                     expect, first.signature_in(hybrid))


def check_match(engine: Engine, ex: Example) -> None:
    table = dict(ex.table)
    for hybrid, block_outermost in match_settings(ex, _layouts(engine) != (False,)):
        expected = _reference_plan(ex, hybrid, block_outermost)
        differences = compare(expected, _plan(engine, ex, hybrid, block_outermost), engine, table=table)
        if differences:
            raise _match_violation(ex, hybrid, block_outermost, expected, differences)


# -- requirements and the laws ---------------------------------------------------------------


def _needs_planning(engine: Engine) -> str | None:
    """PLAN-*: the adapter drives the engine's planner (else skip with its reason)."""
    if not isinstance(engine, Planning):
        return f"the {engine.name} adapter does not drive its engine's planner (no plan_layers)"
    return engine.planning_unavailable()


PLAN_OPS = frozenset({"to_engine", "from_engine", "plan_layers", "page_size"})


def _plan_law(clause: str, check: Callable[[Engine, Example], None]) -> Law:
    """A PLAN law; the symbolic search's tables (operation group ``group``) are planned too."""
    return Law(clause, PLAN_TABLE, check, _needs_planning, operations=PLAN_OPS, searched=frozenset({"group"}))


PLAN_LAWS: tuple[Law, ...] = (
    _plan_law("PLAN-TYPE-1", check_type),
    _plan_law("PLAN-HIDDEN-1", check_hidden),
    _plan_law("PLAN-HYBRID-1", check_hybrid),
    _plan_law("PLAN-SIZE-1", check_size),
    _plan_law("PLAN-SIZE-2", check_used),
    _plan_law("PLAN-TENSOR-1", check_tensors),
    _plan_law("PLAN-MATCH-1", check_match),
)
"""The laws of chapter PLAN, in SPEC.md order."""

