"""A vLLM release's uniformity check and grouping, driven with the least config.

Grouping (``get_kv_cache_groups``) is handed only the part of a ``VllmConfig`` it was
seen to read: :meth:`VllmGrouping.group_layers` learns the paths by trying, each with
its neutral value (``NEUTRAL_CONFIG``, a class attribute of
:class:`~kvcontract.conformance.engines.vllm.engine.VllmEngine`). A path without one
means grouping cannot be driven here (:class:`GroupingUnavailable`): no finding. Where
grouping lives is the engine's declaration (``homes.planning``); a module there that fails
to import is reported as that import failure (naming the missing package), never as a
missing function.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any, ClassVar

from kvcontract.conformance.contract.model import KitFailure
from kvcontract.conformance.engines.protocol import EngineGroup, EngineUnavailable
from kvcontract.conformance.engines.vllm.config import ConfigGap, StrictConfig
from kvcontract.conformance.engines.vllm.conversion import VllmConversion
from kvcontract.conformance.engines.vllm.loading import try_import
from kvcontract.reference import KVDtype


class GroupingUnavailable(KitFailure):
    """This release's grouping cannot be driven by the adapter (the reason says why)."""


class VllmGrouping(VllmConversion):
    """Uniformity and grouping (the third layer of :class:`~kvcontract.conformance.engines.vllm.engine.VllmEngine`)."""

    NEUTRAL_CONFIG: ClassVar[dict[str, Any]]

    planning: ModuleType | None
    planning_module: str | None
    _config_values: dict[str, Any]
    """Config paths grouping was seen to read, with their neutral values."""
    _grouping_problem: str | None
    _planning_problems: list[str]
    """Why a module of ``homes.planning`` that exists did not import (a missing package)."""

    def _find_planning(self) -> ModuleType | None:
        """The first module of ``homes.planning`` that imports and has ``is_kv_cache_spec_uniform``;
        a module that exists and fails to import is remembered with why (:meth:`_no_planning`)."""
        for module in self.homes.planning:
            candidate, why = try_import(module)
            if candidate is None:
                if "does not exist here" not in why:
                    self._planning_problems.append(why)
                continue
            if hasattr(candidate, "is_kv_cache_spec_uniform"):
                return candidate
        return None

    def _no_planning(self, wanted: str) -> str:
        """Why ``wanted`` cannot be found: the import failure that hid it, else its absence."""
        if self._planning_problems:
            return f"{self.name} {self.version}: {'; '.join(self._planning_problems)}"
        return f"{self.name} {self.version} has no {wanted} in {', '.join(self.homes.planning)}"

    def _require_planning(self) -> Any:
        if self.planning is None:
            raise EngineUnavailable(self._no_planning("is_kv_cache_spec_uniform"))
        return self.planning

    def uniform_unavailable(self) -> str | None:
        """Why this release's ``is_kv_cache_spec_uniform`` cannot be called here, or None."""
        return self._no_planning("is_kv_cache_spec_uniform") if self.planning is None else None

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        return bool(self._require_planning().is_kv_cache_spec_uniform(dict(objs_by_layer)))

    def _layout(self) -> Any:
        """A function returning the release's layer-outermost ``KVCacheLayout``."""
        try:
            layout_module = importlib.import_module(self.homes.layout)
        except ImportError:
            raise ConfigGap("cache_config.get_resolved_kv_cache_layout") from None
        layout = next(m for m in layout_module.KVCacheLayout if not m.is_block_outermost)
        return lambda: layout

    def _neutral(self, path: str) -> Any:
        value = self.NEUTRAL_CONFIG[path]
        return self._layout() if value == "LAYOUT" else value

    def grouping_config(self) -> Any:
        """The part of a VllmConfig this release's grouping reads, with the values
        that switch its optional features off. Only the paths grouping was seen to
        read are set (:meth:`group_layers` learns them by trying); reading any other
        raises :class:`ConfigGap`."""
        return self.strict_config(self._config_values)

    @staticmethod
    def config_tree(values: Mapping[str, Any]) -> dict[str, Any]:
        """Dotted config paths -> nested dicts of their values."""
        tree: dict[str, Any] = {}
        for path, value in values.items():
            node = tree
            *parents, leaf = path.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return tree

    @classmethod
    def strict_config(cls, values: Mapping[str, Any]) -> StrictConfig:
        """A config giving exactly ``values`` (dotted paths); any other read raises :class:`ConfigGap`."""
        def build(prefix: str, node: Mapping[str, Any]) -> StrictConfig:
            return StrictConfig(prefix, {k: build(f"{prefix}{k}.", v) if isinstance(v, dict) else v
                                         for k, v in node.items()})

        return build("", cls.config_tree(values))

    def _learn(self, gap: ConfigGap, into: dict[str, Any] | None = None,
               exclude: Mapping[str, Any] | None = None) -> bool:
        """Add the neutral value of the path the engine read to ``into`` (grouping's config by
        default); False when there is none, or it is given already (in ``into`` or ``exclude``)."""
        values = self._config_values if into is None else into
        given = {**(exclude or {}), **values}
        path = gap.path
        known = next((p for p in self.NEUTRAL_CONFIG if p == path or p.startswith(path + ".")
                      or path.startswith(p + ".")), None)
        if known is None or known in given:
            return False
        if path.startswith(known + "."):
            return False  # the engine reads below a value we set (None): not neutral after all
        try:
            values[known] = self._neutral(known)
        except ConfigGap:
            return False
        return True

    def grouping_unavailable(self) -> str | None:
        """Why this release's grouping cannot be driven here, or None. Found by
        trying: the release's ``get_kv_cache_groups`` is called once on a one-layer
        model; a config attribute it reads that has no neutral value, or an adapter
        failure, makes grouping unavailable (what the engine itself raises does not:
        that is for the laws to judge)."""
        if self.planning is None or not hasattr(self.planning, "get_kv_cache_groups"):
            return self._no_planning("get_kv_cache_groups")
        if self._grouping_problem is None:
            self._grouping_problem = ""
            from kvcontract.reference import FullAttentionSpec

            try:
                probe = self.to_engine(FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64,
                                                         dtype=KVDtype.FLOAT16))
                self.group_layers({"probe.0": probe})
            except KitFailure as exc:
                self._grouping_problem = str(exc)
            except Exception:  # noqa: BLE001, S110 - the engine's own refusal: driven, judged by the laws
                pass
        return self._grouping_problem or None

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        """The release's ``get_kv_cache_groups``. A config attribute it reads that the
        adapter cannot give is a :class:`ConfigGap` (a :class:`KitFailure`): the kit
        could not drive grouping, which is no finding of the engine."""
        planning = self.planning
        if planning is None or not hasattr(planning, "get_kv_cache_groups"):
            raise GroupingUnavailable(self._no_planning("get_kv_cache_groups"))
        for _ in range(len(self.NEUTRAL_CONFIG) + 1):
            try:
                groups = planning.get_kv_cache_groups(self.grouping_config(), dict(objs_by_layer))
                break
            except ConfigGap as gap:
                if not self._learn(gap):
                    raise GroupingUnavailable(f"{self.name} {self.version}: {gap}") from None
        else:  # pragma: no cover - every retry learns one more path
            raise GroupingUnavailable(f"{self.name} {self.version}: grouping's config needs did not settle")
        return self._engine_groups(groups)

    def _engine_groups(self, groups: Any) -> list[EngineGroup]:
        """The release's ``KVCacheGroupSpec`` list in reference terms."""
        out = []
        for g in groups:
            spec = g.kv_cache_spec
            if type(spec).__name__ == "UniformTypeKVCacheSpecs":
                members = {n: self.from_engine(s) for n, s in spec.kv_cache_specs.items()}
                out.append(EngineGroup(tuple(g.layer_names), None, members))
            else:
                out.append(EngineGroup(tuple(g.layer_names), self.from_engine(spec)))
        return out
