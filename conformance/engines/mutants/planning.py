"""Mutants of planning (``plan_layers``): one per PLAN clause."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _register
from kvcontract.conformance.engines.protocol import EnginePlan, EngineTensor
from kvcontract.conformance.engines.reference import plan_of
from kvcontract.reference import KVCacheSpec, planning, sizing


def _per_member(table: Mapping[str, KVCacheSpec]) -> planning.PlanGroup:
    return planning.PlanGroup(tuple(table), None, tuple(table.items()))


@_register
class TypeByBase(Mutant):
    """PLAN-TYPE-1: the per-member type test asks only whether every layer is some full attention."""

    key = "type-by-base"
    description = ("the per-member type test accepts every kind derived from full attention (R-SWA, "
                   "static-sink beside plain full attention), so one member's block manager serves all")
    imitates = "vLLM 0.34.0's registry-base type test (UniformTypeKVCacheSpecs.is_uniform_type)"
    expected_clauses = ("PLAN-TYPE-1",)

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        table = dict(objs_by_layer)
        specs = list(table.values())
        if (len(specs) > 1 and not reference.is_uniform(table)
                and all(isinstance(s, reference.FullAttentionSpec) for s in specs)
                and len({s.block_size for s in specs}) == 1 and len({s.dcp_sharded for s in specs}) == 1):
            return plan_of(sizing.size_plan([_per_member(table)], memory_bytes))
        return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)


@_register
class HiddenStateAbsorbed(Mutant):
    """PLAN-HIDDEN-1: hidden-state layers join a full-attention group's members instead of a group of their own."""

    key = "hidden-state-absorbed"
    description = ("hidden-state layers are added as per-member specs to the first group of their type (full "
                   "attention), so with several groups none is a hidden-state group")
    imitates = ""
    expected_clauses = ("PLAN-HIDDEN-1",)

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        table = dict(objs_by_layer)
        hidden = {n: s for n, s in table.items() if isinstance(s, reference.HiddenStateCacheSpec)}
        rest = {n: s for n, s in table.items() if n not in hidden}
        if not hidden or not rest:
            return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)
        groups = planning.plan_groups(rest, hybrid=hybrid)
        # the first group the hidden-state layers are of one type with (a full-attention group)
        host = next((i for i, g in enumerate(groups)
                     if all(planning.type_mismatch(s, h) is None for _, s in g.layer_specs for h in hidden.values())),
                    None)
        if len(groups) < 2 or host is None:
            return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)
        first = groups[host]
        widened = planning.PlanGroup((*first.layer_names, *hidden), None, (*first.layer_specs, *hidden.items()))
        return plan_of(sizing.size_plan([*groups[:host], widened, *groups[host + 1:]], memory_bytes))


@_register
class HybridFlagIgnored(Mutant):
    """PLAN-HYBRID-1: the planner ignores that the hybrid manager is off."""

    key = "hybrid-flag-ignored"
    description = "planning with the hybrid manager off plans as with it on: local layers keep their own groups"
    imitates = ""
    expected_clauses = ("PLAN-HYBRID-1",)

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        return super().plan_layers(objs_by_layer, memory_bytes, hybrid=True, block_outermost=block_outermost)


@_register
class BlocksRoundedUp(Mutant):
    """PLAN-SIZE-1: the block count is the budget divided by a block's bytes, rounded up."""

    key = "blocks-rounded-up"
    description = "num_blocks = ceil(budget / bytes per block): the last block lies past the budget"
    imitates = ""
    expected_clauses = ("PLAN-SIZE-1",)

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        planned = reference.plan(dict(objs_by_layer), memory_bytes, hybrid=hybrid)
        per_block = planned.bytes_per_block
        if per_block == 0 or memory_bytes % per_block == 0:
            return plan_of(planned)
        return plan_of(sizing.size_plan(planned.groups, (memory_bytes // per_block + 1) * per_block))


@_register
class BytesPerBlockSummed(Mutant):
    """PLAN-SIZE-2: a block's bytes are summed over the groups, as if groups did not share block IDs."""

    key = "bytes-per-block-summed"
    description = ("bytes per block are the sum over all groups instead of the largest group, so a "
                   "hybrid model gets a fraction of the blocks its budget buys")
    imitates = ""
    expected_clauses = ("PLAN-SIZE-2",)

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        groups = planning.plan_groups(dict(objs_by_layer), hybrid=hybrid)
        summed = sum(sizing.bytes_per_block([g]) for g in groups)
        largest = sizing.bytes_per_block(groups)
        if len(groups) < 2 or summed == largest:
            return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)
        planned = sizing.size_plan(groups, memory_bytes * largest // summed)
        tensors = tuple(dataclasses.replace(t, size_bytes=summed * planned.num_blocks) for t in planned.tensors)
        return plan_of(dataclasses.replace(planned, tensors=tensors))


@_register
class TensorPerGroup(Mutant):
    """PLAN-TENSOR-1: one tensor per group, whatever its members' page sizes."""

    key = "tensor-per-group"
    description = ("every group gets one tensor for all its layers, so a per-member group's layers of "
                   "different page sizes are viewed with its first layer's page")
    imitates = ""
    expected_clauses = ("PLAN-TENSOR-1", "PLAN-SIZE-1")

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        planned = super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)
        tensors = []
        for g in planned.groups:
            own = [t for t in planned.tensors if set(t.layer_names) <= set(g.layer_names)]
            if own:
                first = own[0]
                tensors.append(EngineTensor(tuple(g.layer_names), first.size_bytes, first.offset,
                                            first.layer_stride, first.block_stride))
        return dataclasses.replace(planned, tensors=tuple(tensors))


@_register
class ContiguousSplit(Mutant):
    """PLAN-MATCH-1: a bucket of mergeable layers is split into groups of consecutive layers."""

    key = "contiguous-split"
    description = ("a bucket of mergeable layers is split into groups of consecutive layers "
                   "(layers[i*k:(i+1)*k]) instead of every n-th layer; every invariant still holds")
    imitates = ("the split vLLM 0.34.0's _get_kv_cache_groups_uniform_page_size rejects in its own comment: "
                "with pipeline parallelism each stage's groups are then padded")
    expected_clauses = ("PLAN-MATCH-1",)

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        planned = reference.plan(dict(objs_by_layer), memory_bytes, hybrid=hybrid, block_outermost=block_outermost)
        position = {n: i for i, n in enumerate(objs_by_layer)}
        groups: list[planning.PlanGroup] = []
        run: list[planning.PlanGroup] = []  # consecutive merged groups of one spec: one split bucket
        for g in [*planned.groups, None]:
            if g is not None and run and g.spec is not None and g.spec == run[0].spec:
                run.append(g)
                continue
            groups.extend(_consecutive(run, position))
            run = [] if g is None else [g]
        return plan_of(sizing.size_plan(groups, memory_bytes, block_outermost))


def _consecutive(run: list[planning.PlanGroup], position: Mapping[str, int]) -> list[planning.PlanGroup]:
    """The groups of one split bucket re-cut, in the same sizes, from its layers in table order."""
    if len(run) < 2 or run[0].spec is None:
        return run
    spec = run[0].spec
    ordered = sorted((n for g in run for n in g.layer_names), key=position.__getitem__)
    out, start = [], 0
    for g in run:
        part = tuple(ordered[start:start + len(g.layer_names)])
        start += len(part)
        out.append(planning.PlanGroup(part, spec, tuple((n, spec) for n in part)))
    return out


@_register
class MeanGroupSize(Mutant):
    """PLAN-MATCH-1: where two kinds' layer counts are close but unequal, groups take their mean size."""

    key = "mean-group-size"
    description = ("where the largest bucket is less than half as large again as the smallest, the group "
                   "size is the two counts' mean (rounded down) instead of the largest count, so the larger "
                   "kind is split into two groups where one padded group serves; equal counts, and counts "
                   "1.5 times apart or more, plan as before")
    imitates = ("a rework of the padding heuristic of vLLM 0.34.0's _get_kv_cache_groups_uniform_page_size "
                "(kv_cache_planning.py l.567-578: 12 sliding + 13 full layers of gpt-oss-20b with its EAGLE "
                "draft pad to 13 + 13)")
    expected_clauses = ("PLAN-MATCH-1",)

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        original = planning._equal_groups
        planning._equal_groups = _mean_sized_groups  # this worker plans one table at a time
        try:
            return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)
        finally:
            planning._equal_groups = original


def _mean_sized_groups(buckets: list[tuple[list[str], list[KVCacheSpec]]]) -> list[planning.PlanGroup]:
    sizes = [len(names) for names, _ in buckets]
    close = max(sizes) < min(sizes) * 1.5
    group_size = (max(sizes) + min(sizes)) // 2 if close else min(sizes)
    groups = []
    for names, members in buckets:
        count = -(-len(names) // group_size)
        by_name = dict(zip(names, members, strict=True))
        for i in range(count):
            part = names[i::count]
            groups.append(planning._merged(part, [by_name[n] for n in part]))
    return groups


@_register
class SampledUniformity(Mutant):
    """PLAN-MATCH-1: uniformity judged on the first 16 layers of a long table."""

    key = "sampled-uniformity"
    description = ("a table of more than 16 layers of one kind whose first 16 merge is planned as one merged "
                   "group of every layer, with those 16 layers' merged spec: a layer further down that differs "
                   "in a field is allocated with another layer's spec")
    imitates = "a fast path for long tables (a few hundred layers) that samples the head of the table"
    expected_clauses = ("PLAN-MATCH-1",)
    SAMPLE = 16

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        table = dict(objs_by_layer)
        head = dict(list(table.items())[:self.SAMPLE])
        one_kind = len({type(s) for s in table.values()}) == 1
        if len(table) > self.SAMPLE and one_kind and reference.is_uniform(head) and not reference.is_uniform(table):
            spec = reference.merge(list(head.values()))
            group = planning.PlanGroup(tuple(table), spec, tuple((n, spec) for n in table))
            return plan_of(sizing.size_plan([group], memory_bytes, block_outermost))
        return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)
