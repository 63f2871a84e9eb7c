"""A vLLM release's planner (chapter PLAN): ``get_kv_cache_groups`` then
``get_kv_cache_config_from_groups``, driven with the config grouping was seen to read
plus the sizing's neutral values (no block-count override, no HiSparse, no prefix-cache
retention), the hybrid manager on or off as asked."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any, ClassVar

from kvcontract.conformance.contract.model import KitFailure
from kvcontract.conformance.engines.protocol import EnginePlan, EngineTensor
from kvcontract.conformance.engines.vllm.config import ConfigGap, StrictConfig
from kvcontract.conformance.engines.vllm.loading import try_import
from kvcontract.conformance.engines.vllm.snippets import VllmSnippets

HYBRID_PATH = "scheduler_config.disable_hybrid_kv_cache_manager"
LAYOUT_PATH = "cache_config.get_resolved_kv_cache_layout"


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
    _plan_problem: str
    """Why planning cannot be driven (empty: it can), found once by :meth:`planning_unavailable`."""

    def _plan_values(self, hybrid: Any, block_outermost: bool = False) -> dict[str, Any]:
        values = {p: v for p, v in self._config_values.items() if p != "attention_config"}
        values.update(self.PLAN_NEUTRAL)
        values.update(self.__dict__.get("_plan_learned", {}))  # what sizing was seen to read besides
        values[HYBRID_PATH] = not hybrid if isinstance(hybrid, bool) else hybrid
        if block_outermost:
            values[LAYOUT_PATH] = self._block_outermost_layout()
        elif self._has_layout():
            values[LAYOUT_PATH] = self._neutral(LAYOUT_PATH)
        # else: a release without a cache layout (before 0.29) plans without one; a read of it
        # would be a ConfigGap, and the plan unavailable with that reason
        return values

    def _has_layout(self) -> bool:
        """Whether the release defines ``KVCacheLayout`` where its homes say."""
        module, _why = try_import(self.homes.layout)
        return module is not None and hasattr(module, "KVCacheLayout")

    def _block_outermost_layout(self) -> Any:
        """A function returning the release's block-outermost, block-compact ``KVCacheLayout``."""
        try:
            layouts = importlib.import_module(self.homes.layout).KVCacheLayout
            layout = next(m for m in layouts if m.is_block_outermost and m.is_block_compact)
        except (ImportError, StopIteration, AttributeError):
            raise PlanningUnavailable(f"{self.name} {self.version} has no block-outermost KV-cache layout") from None
        return lambda: layout

    def _plan_config(self, hybrid: bool, block_outermost: bool = False) -> StrictConfig:
        return self.strict_config(self._plan_values(hybrid, block_outermost))

    def planning_unavailable(self) -> str | None:
        """Why this release's planner cannot be driven here, or None. Found by trying, once: a
        one-layer table planned within 1 GiB; a config attribute sizing reads that has no neutral
        value, or another failure of the adapter's, makes planning unavailable (the PLAN clauses
        skip with it); what the engine itself raises is for the laws to judge."""
        problem = self.grouping_unavailable()
        if problem:
            return problem
        if not hasattr(self.planning, "get_kv_cache_config_from_groups"):
            return f"{self.name} {self.version} has no get_kv_cache_config_from_groups in {self.planning_module}"
        if "_plan_problem" not in self.__dict__:
            self._plan_problem = ""
            from kvcontract.reference import FullAttentionSpec, KVDtype

            try:
                probe = self.to_engine(FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64,
                                                         dtype=KVDtype.FLOAT16))
                self._plan({"probe.0": probe}, 1 << 30, hybrid=True, block_outermost=False)
            except KitFailure as exc:
                self._plan_problem = str(exc)
            except Exception:  # noqa: BLE001, S110 - the engine's own refusal: driven, judged by the laws
                pass
        return self._plan_problem or None

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan:
        """The release's groups and KV-cache config of the layers within ``memory_bytes``."""
        problem = self.planning_unavailable()
        if problem:
            raise PlanningUnavailable(problem)
        return self._plan(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)

    def _plan(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
              hybrid: bool, block_outermost: bool) -> EnginePlan:
        """Planning with the config sizing was seen to read: a path it reads that has a neutral
        value (``NEUTRAL_CONFIG``) is learned and the plan tried again; any other is a
        :class:`PlanningUnavailable`."""
        planning: Any = self.planning
        learned: dict[str, Any] = self.__dict__.setdefault("_plan_learned", {})
        for _ in range(len(self.NEUTRAL_CONFIG) + 1):
            config = self._plan_config(hybrid, block_outermost)
            try:
                groups = planning.get_kv_cache_groups(config, dict(objs_by_layer))
                kv_config = planning.get_kv_cache_config_from_groups(config, groups, memory_bytes)
                break
            except ConfigGap as gap:
                if not self._learn(gap, learned, exclude=self._plan_values(hybrid, block_outermost)):
                    raise PlanningUnavailable(f"{self.name} {self.version}: {gap}") from None
        else:  # pragma: no cover - every retry learns one more path
            raise PlanningUnavailable(f"{self.name} {self.version}: planning's config needs did not settle")
        tensors = tuple(e for t in kv_config.kv_cache_tensors for e in _engine_tensors(t))
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
            module = f"__import__({self.homes.layout!r}, fromlist=['x']).KVCacheLayout"
            outer, inner = self._block_outermost_layout()(), self._neutral("cache_config.get_resolved_kv_cache_layout")()
            values["cache_config.get_resolved_kv_cache_layout"] = _Source(
                f"(lambda: {module}.{outer.name} if ({block_outermost_expr}) else {module}.{inner.name})")
        config = self.render_values(values)
        return (f"(lambda config, table: get_kv_cache_config_from_groups(config, get_kv_cache_groups(config, "
                f"dict(table)), {memory_expr}))({config}, {table_expr})")

    def render_plan_view(self, plan_expr: str) -> str:
        tensor = getattr(self.interface, "KVCacheTensor", None)
        if tensor is not None and "layers" not in {f.name for f in dataclasses.fields(tensor)}:
            tensors = (f"[((n,), t.size, t.offset, None, t.block_stride or None) for t in {plan_expr}.kv_cache_tensors "
                       "for n in t.shared_by]")  # an older release: shared_by layers alias the tensor (_engine_tensors)
        else:
            tensors = (f"[(tuple(t.layers), t.size, t.offset, t.layer_stride, t.block_stride) "
                       f"for t in {plan_expr}.kv_cache_tensors]")
        return (f"({plan_expr}.num_blocks, {tensors}, [(tuple(g.layer_names), g.kv_cache_spec) "
                f"for g in {plan_expr}.kv_cache_groups])")


def _engine_tensors(tensor: Any) -> tuple[EngineTensor, ...]:
    """A ``KVCacheTensor`` in the contract's terms. A release with ``layers`` places them in one
    tensor at strides. An older release's ``shared_by`` names layers that each alias the whole
    allocation (one layer per group, the groups overlaying each other): one tensor per layer, at
    the same bytes, with no layer stride stated; its ``block_stride`` of 0 means "not packed"
    (not a stride)."""
    if hasattr(tensor, "layers"):
        return (EngineTensor(tuple(str(n) for n in tensor.layers), int(tensor.size),
                             getattr(tensor, "offset", None), getattr(tensor, "layer_stride", None),
                             getattr(tensor, "block_stride", None)),)
    block_stride = getattr(tensor, "block_stride", None) or None
    return tuple(EngineTensor((str(n),), int(tensor.size), getattr(tensor, "offset", None), None, block_stride)
                 for n in getattr(tensor, "shared_by", None) or ())
