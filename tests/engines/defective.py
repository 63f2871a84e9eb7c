"""The reference engine with one named defect, for the structured-repro tests
(``tests/test_repro.py``): each defect makes one law raise one kind of expectation.

Its snippets rebuild the same engine (``Defective(<defect>)``) and call its operations,
so a rendered repro reproduces the defect when run with the repository on ``sys.path``.
``cover`` (the factory :func:`cover`) defines a spec class the contract does not
classify, whose merge drops its own field (ROLE-COVER-1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.protocol import EngineGroup, EnginePlan, Router
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.reference import (
    FullAttentionSpec,
    InvalidSpec,
    KVCacheSpec,
    KVDtype,
    Routing,
    RoutingRequest,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LookaheadAttentionSpec(FullAttentionSpec):
    """A spec class of the engine's own that the contract does not classify."""

    lookahead_tokens: int = 0


def _replace(spec: Any, **changes: Any) -> Any:
    return dataclasses.replace(spec, **changes)


class Defective(ReferenceEngine):
    """``kvcontract.reference`` behind the engine protocol, with the defect ``defect``."""

    def __init__(self, defect: str) -> None:
        self.defect = defect
        self.name = f"defective:{defect}"

    # -- merge and page size ---------------------------------------------------------
    def merge(self, objs: Sequence[Any]) -> Any:
        d = self.defect
        if d in ("accepts", "declared"):
            return objs[0]
        if d == "raises":
            raise ValueError("this merge never merges")
        if d == "mute":
            try:
                return reference.merge(list(objs))
            except AssertionError:
                raise AssertionError("incompatible") from None
        if d == "cover" and any(isinstance(o, LookaheadAttentionSpec) for o in objs):
            return FullAttentionSpec(**{f.name: getattr(objs[0], f.name) for f in dataclasses.fields(FullAttentionSpec)})
        if d == "mutates":
            for obj in objs:
                object.__setattr__(obj, "non_causal", True)
        merged = reference.merge(list(objs))
        return _replace(merged, num_kv_heads=merged.num_kv_heads * 2) if d == "heads" else merged

    def from_engine(self, obj: Any) -> KVCacheSpec:
        if self.defect == "invalid":
            raise InvalidSpec("num_kv_heads must be positive", type(obj).__name__, ("num_kv_heads",))
        return super().from_engine(obj)

    def page_size(self, obj: Any) -> int:
        return int(obj.page_size_bytes) + (1 if self.defect == "page" else 0)

    # -- uniformity --------------------------------------------------------------------
    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        if self.defect == "uniform-false":
            return False
        if self.defect == "uniform-raises":
            raise ValueError("cannot tell")
        return super().is_uniform(objs_by_layer)

    # -- planning ----------------------------------------------------------------------
    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *, hybrid: bool = True,
                    block_outermost: bool = False) -> EnginePlan:
        """``plan-raises``: the planner refuses; ``plan:<mutant>``: that planning mutant's plan."""
        if self.defect == "plan-raises":
            raise ValueError("this planner never plans")
        if self.defect.startswith("plan:"):
            from kvcontract.conformance.engines.mutants import load_mutant

            return load_mutant(self.defect.removeprefix("plan:")).plan_layers(objs_by_layer, memory_bytes,
                                                                               hybrid=hybrid)
        return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)

    # -- grouping ----------------------------------------------------------------------
    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        """The adapter's grouping: the engine's groups, read back (``group-invalid``: a
        group's spec is no valid spec)."""
        groups = self.engine_groups(objs_by_layer)
        if self.defect == "group-invalid":
            raise InvalidSpec("block_size must be positive", "FullAttentionSpec", ("block_size",))
        return groups

    def engine_groups(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        """The engine's own grouping (what a snippet calls)."""
        d, table = self.defect, dict(objs_by_layer)
        names = tuple(table)
        if d == "group-raises":
            raise ValueError("cannot group")
        if d == "one-group":
            return [EngineGroup(names, table[names[0]])]
        if d == "one-group-members":
            return [EngineGroup(names, None, table)]
        if d == "split":
            return [EngineGroup((n,), s) for n, s in table.items()]
        groups = super().group_layers(table)
        if d == "group-drops":
            return groups[:-1]
        if d == "member-heads":
            return [EngineGroup(g.layer_names, None, {n: _replace(table[n], num_kv_heads=table[n].num_kv_heads * 2)
                                                      for n in g.layer_names}) for g in groups]
        if d == "group-no-capability":
            return [EngineGroup(g.layer_names, _replace(g.spec, non_causal=False)) for g in groups]
        if d == "group-heads":
            return [EngineGroup(g.layer_names, _replace(g.spec, num_kv_heads=g.spec.num_kv_heads * 2))
                    for g in groups]
        if d in ("group-block", "group-block-first"):  # every group's block size doubled, or the first's
            return [EngineGroup(g.layer_names, _replace(g.spec, block_size=g.spec.block_size * 2)
                                if d == "group-block" or i == 0 else g.spec) for i, g in enumerate(groups)]
        return groups

    # -- routing -----------------------------------------------------------------------
    def route(self, request: RoutingRequest) -> Routing:
        d, lens = self.defect, request.query_lens
        if d == "route-prefill" or (d == "route-capability" and request.capability):
            return Routing(0, len(lens), 0, sum(lens))
        if d == "route-all-decode":
            return Routing(len(lens), 0, sum(lens), 0)
        if d == "route-raises":
            raise ValueError("no route")
        if d == "route-mute":
            try:
                return reference.route(request)
            except reference.DispatchError:
                raise ValueError("bad block") from None
        got = reference.route(request)
        if d == "route-miscount":
            return Routing(got.num_decodes, got.num_prefills, got.num_decode_tokens + 1, got.num_prefill_tokens)
        return got

    def router(self) -> Router | None:
        return self.route

    def router_source(self) -> list[str]:
        return ["from tests.engines.defective import Defective", f"ROUTE = Defective({self.defect!r}).route"]

    # -- the engine's classes (ROLE-COVER-1) and its snippets ------------------------------
    def spec_classes(self) -> list[type]:
        extra = [LookaheadAttentionSpec] if self.defect == "cover" else []
        return [*super().spec_classes(), *extra]

    def declared_roles(self) -> tuple[Any, ...]:
        """``declared``: the adapter declares a field's role (here one the contract knows too, so the
        snippet also runs on the reference); its merge accepts members that differ in it."""
        from kvcontract.conformance.engines.vllm.homes import FieldRole

        return (FieldRole("FullAttentionSpec", "num_kv_heads", "layout", (1, 2), "defective.py"),) \
            if self.defect == "declared" else ()

    def value_domains(self) -> Mapping[str, Sequence[Any]]:
        return {}

    def engine_value_domains(self) -> Mapping[type, Sequence[Any]]:
        return {KVDtype: list(KVDtype)}  # what the unclassified class's dtype is drawn from

    def unmapped_values(self) -> Sequence[tuple[str, str]]:
        return ()

    def snippet_imports(self, kinds: Sequence[type[KVCacheSpec]]) -> list[str]:
        return [*super().snippet_imports(kinds), "from tests.engines.defective import Defective",
                f"_engine = Defective({self.defect!r})"]

    def render_merge(self, specs_expr: str) -> str:
        return f"_engine.merge({specs_expr})"

    def render_plan(self, table_expr: str, memory_expr: str, hybrid_expr: str,
                    block_outermost_expr: str = "False") -> str:
        return (f"_engine.plan_layers({table_expr}, {memory_expr}, hybrid={hybrid_expr}, "
                f"block_outermost={block_outermost_expr})")

    def render_plan_view(self, plan_expr: str) -> str:
        return (f"({plan_expr}.num_blocks, [(t.layer_names, t.size_bytes, t.offset, t.layer_stride, t.block_stride) "
                f"for t in {plan_expr}.tensors], [(g.layer_names, g.spec if g.spec is not None else "
                f"__import__('types').SimpleNamespace(kv_cache_specs=dict(g.member_specs or {{}}))) "
                f"for g in {plan_expr}.groups])")

    def render_is_uniform(self, table_expr: str) -> str:
        return f"_engine.is_uniform({table_expr})"

    def render_group_layers(self, table_expr: str) -> str:
        return f"_engine.engine_groups({table_expr})"

    def render_group_pairs(self, groups_expr: str) -> str:
        # a group of per-member specs shows as a container holding them, as vLLM's does
        return (f"[(tuple(g.layer_names), g.spec if g.spec is not None else "
                f"__import__('types').SimpleNamespace(kv_cache_specs=dict(g.member_specs))) for g in {groups_expr}]")

    def render_page_size(self, obj_expr: str) -> str:
        return f"_engine.page_size({obj_expr})"


def cover() -> Defective:
    return Defective("cover")
