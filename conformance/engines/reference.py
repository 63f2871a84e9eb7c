"""The reference model as an engine: it must pass every clause (the suite's self-check)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import kvcontract
from kvcontract import reference
from kvcontract.conformance.contract.codec import render_call
from kvcontract.conformance.engines.protocol import EngineGroup, EnginePlan, EngineTensor, Router
from kvcontract.reference import KVCacheSpec


class ReferenceEngine:
    """``kvcontract.reference`` behind the engine protocol."""

    name = "reference"
    version = kvcontract.__version__
    error_type: type[BaseException] = AssertionError
    supports_empty_merge = True

    def spec_classes(self) -> list[type]:
        """The reference's bases and kinds (ROLE-COVER-1: all classified)."""
        return [*reference.BASE_KINDS, *reference.SPEC_KINDS]

    def unsupported_kinds(self) -> Mapping[type[KVCacheSpec], str]:
        return {}

    def unsupported_fields(self, kind: type[KVCacheSpec]) -> Mapping[str, str]:
        return {}

    def to_engine(self, spec: KVCacheSpec) -> Any:
        return spec

    def from_engine(self, obj: Any) -> KVCacheSpec:
        return obj  # type: ignore[no-any-return]

    def merge(self, objs: Sequence[Any]) -> Any:
        return reference.merge(list(objs))

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        return reference.is_uniform(objs_by_layer)

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        return [EngineGroup(g.layer_names, g.spec) for g in reference.group_layers(objs_by_layer)]

    def page_size(self, obj: Any) -> int:
        return obj.page_size_bytes  # type: ignore[no-any-return]

    def snippet_imports(self, kinds: Sequence[type[KVCacheSpec]]) -> list[str]:
        names = sorted({k.__name__ for k in kinds} | {"KVDtype", "merge", "is_uniform", "group_layers"})
        return [f"from kvcontract.reference import {', '.join(names)}",
                "from kvcontract.reference import plan",
                "from kvcontract.reference.dtypes import KVQuantMode, MambaType, SparseCacheRole"]

    def render_spec(self, spec: KVCacheSpec) -> str:
        return render_call(type(spec).__name__, spec, lambda _name, value: repr(value))

    def render_merge(self, specs_expr: str) -> str:
        return f"merge({specs_expr})"

    def render_is_uniform(self, table_expr: str) -> str:
        return f"is_uniform({table_expr})"

    def render_group_layers(self, table_expr: str) -> str:
        return f"group_layers({table_expr})"

    def render_group_pairs(self, groups_expr: str) -> str:
        return f"[(tuple(g.layer_names), g.spec) for g in {groups_expr}]"

    def render_page_size(self, obj_expr: str) -> str:
        return f"{obj_expr}.page_size_bytes"

    # -- planning (Planning) -----------------------------------------------------------
    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        return plan_of(reference.plan(dict(objs_by_layer), memory_bytes, hybrid=hybrid,
                                      block_outermost=block_outermost))

    def planning_unavailable(self) -> str | None:
        return None

    def render_plan(self, table_expr: str, memory_expr: str, hybrid_expr: str,
                    block_outermost_expr: str = "False") -> str:
        return f"plan({table_expr}, {memory_expr}, hybrid={hybrid_expr}, block_outermost={block_outermost_expr})"

    def render_plan_view(self, plan_expr: str) -> str:
        return (f"({plan_expr}.num_blocks, [(t.layer_names, t.size_bytes, t.offset, t.layer_stride, t.block_stride) "
                f"for t in {plan_expr}.tensors], [(g.layer_names, g.spec if g.spec is not None else "
                f"__import__('types').SimpleNamespace(kv_cache_specs=dict(g.layer_specs))) for g in {plan_expr}.groups])")

    # -- routing (RoutingEngine) -----------------------------------------------------
    def router(self) -> Router | None:
        return reference.route

    def router_unavailable(self) -> str:
        return ""

    def router_source(self) -> list[str]:
        return ["from kvcontract.reference import route as ROUTE"]


def plan_of(planned: reference.KVCachePlan) -> EnginePlan:
    """The reference's plan in the engine protocol's terms (per-member groups: ``spec`` None)."""
    groups = tuple(EngineGroup(g.layer_names, g.spec, None if g.spec is not None else dict(g.layer_specs))
                   for g in planned.groups)
    tensors = tuple(EngineTensor(t.layer_names, t.size_bytes, t.offset, t.layer_stride, t.block_stride)
                    for t in planned.tensors)
    return EnginePlan(groups, planned.num_blocks, tensors)
