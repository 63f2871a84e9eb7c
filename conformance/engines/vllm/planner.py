"""A vLLM release's planner (chapter PLAN): ``get_kv_cache_groups`` then
``get_kv_cache_config_from_groups``, driven with the config grouping was seen to read
plus the sizing's neutral values (no block-count override, no HiSparse, no prefix-cache
retention), the hybrid manager on or off as asked."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, ClassVar

from kvcontract.conformance.contract.model import KitFailure
from kvcontract.conformance.engines.protocol import EnginePlan, EngineTensor
from kvcontract.conformance.engines.vllm.config import ConfigGap, StrictConfig
from kvcontract.conformance.engines.vllm.snippets import VllmSnippets

HYBRID_PATH = "scheduler_config.disable_hybrid_kv_cache_manager"


class PlanningUnavailable(KitFailure):
    """This release's planner cannot be driven by the adapter (the reason says why)."""


class _Source:
    """A config value rendered as the given source text in a snippet."""

    def __init__(self, text: str) -> None:
        self.text = text


class VllmPlanning(VllmSnippets):
    """Planning (the fourth layer of :class:`~kvcontract.conformance.engines.vllm.engine.VllmEngine`)."""

    PLAN_NEUTRAL: ClassVar[dict[str, Any]] = {
        "cache_config.num_gpu_blocks_override": None,
        "cache_config.prefix_cache_retention_interval": None,
        "attention_config.hisparse_config": None,
    }
    """What sizing reads beyond grouping, with the values that switch its options off."""

    def _plan_values(self, hybrid: Any, block_outermost: bool = False) -> dict[str, Any]:
        values = {p: v for p, v in self._config_values.items() if p != "attention_config"}
        values.update(self.PLAN_NEUTRAL)
        values[HYBRID_PATH] = not hybrid if isinstance(hybrid, bool) else hybrid
        values["cache_config.get_resolved_kv_cache_layout"] = (
            self._block_outermost_layout() if block_outermost
            else self._neutral("cache_config.get_resolved_kv_cache_layout"))
        return values

    def _block_outermost_layout(self) -> Any:
        """A function returning the release's block-outermost, block-compact ``KVCacheLayout``."""
        try:
            layouts = importlib.import_module(self.LAYOUT_MODULE).KVCacheLayout
            layout = next(m for m in layouts if m.is_block_outermost and m.is_block_compact)
        except (ImportError, StopIteration, AttributeError):
            raise PlanningUnavailable(f"vllm {self.version} has no block-outermost KV-cache layout") from None
        return lambda: layout

    def _plan_config(self, hybrid: bool, block_outermost: bool = False) -> StrictConfig:
        return self.strict_config(self._plan_values(hybrid, block_outermost))

    def planning_unavailable(self) -> str | None:
        """Why this release's planner cannot be driven here, or None."""
        problem = self.grouping_unavailable()
        if problem:
            return problem
        if not hasattr(self.planning, "get_kv_cache_config_from_groups"):
            return f"vllm {self.version} has no get_kv_cache_config_from_groups in {self.planning_module}"
        return None

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        """The release's groups and KV-cache config of the layers within ``memory_bytes``."""
        problem = self.planning_unavailable()
        if problem:
            raise PlanningUnavailable(problem)
        planning: Any = self.planning
        config = self._plan_config(hybrid, block_outermost)
        try:
            groups = planning.get_kv_cache_groups(config, dict(objs_by_layer))
            kv_config = planning.get_kv_cache_config_from_groups(config, groups, memory_bytes)
        except ConfigGap as gap:
            raise PlanningUnavailable(f"vllm {self.version}: {gap}") from None
        tensors = tuple(EngineTensor(_tensor_layers(t), int(t.size),
                                     getattr(t, "offset", None), getattr(t, "layer_stride", None),
                                     getattr(t, "block_stride", None))
                        for t in kv_config.kv_cache_tensors)
        return EnginePlan(tuple(self._engine_groups(kv_config.kv_cache_groups)), int(kv_config.num_blocks), tensors)

    def block_outermost_unavailable(self) -> str | None:
        """Why this release cannot plan a block-outermost layout here (no such ``KVCacheLayout``), or None."""
        try:
            self._block_outermost_layout()
        except PlanningUnavailable as exc:
            return str(exc)
        return None

    def render_plan(self, table_expr: str, memory_expr: str, hybrid_expr: str,
                    block_outermost_expr: str = "False") -> str:
        values = self._plan_values(_Source(f"not ({hybrid_expr})"))
        if block_outermost_expr != "False" and self.block_outermost_unavailable() is None:
            module = f"__import__({self.LAYOUT_MODULE!r}, fromlist=['x']).KVCacheLayout"
            outer, inner = self._block_outermost_layout()(), self._neutral("cache_config.get_resolved_kv_cache_layout")()
            values["cache_config.get_resolved_kv_cache_layout"] = _Source(
                f"(lambda: {module}.{outer.name} if ({block_outermost_expr}) else {module}.{inner.name})")
        config = self.render_values(values)
        return (f"(lambda config, table: get_kv_cache_config_from_groups(config, get_kv_cache_groups(config, "
                f"dict(table)), {memory_expr}))({config}, {table_expr})")

    def render_plan_view(self, plan_expr: str) -> str:
        return (f"({plan_expr}.num_blocks, [(tuple(t.layers), t.size, t.offset, t.layer_stride, t.block_stride) "
                f"for t in {plan_expr}.kv_cache_tensors], [(tuple(g.layer_names), g.kv_cache_spec) "
                f"for g in {plan_expr}.kv_cache_groups])")


def _tensor_layers(tensor: Any) -> tuple[str, ...]:
    """A ``KVCacheTensor``'s layer names (``layers``; ``shared_by`` in older releases)."""
    names: Any = getattr(tensor, "layers", None) or getattr(tensor, "shared_by", None) or ()
    return tuple(str(n) for n in names)
