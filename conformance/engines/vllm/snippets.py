"""Repro snippets for a vLLM release: Python source that builds the release's own spec
objects and calls its own merge, uniformity check and grouping (with the config that
grouping was seen to read), importing each enum from where that release defines it."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.contract.codec import render_call
from kvcontract.conformance.engines import environments
from kvcontract.conformance.engines.vllm.discovery import REF_ENUMS
from kvcontract.conformance.engines.vllm.grouping import VllmGrouping
from kvcontract.conformance.engines.vllm.homes import EngineDeclaration
from kvcontract.reference import KVCacheSpec, KVDtype


class VllmSnippets(VllmGrouping):
    """Rendering repros (the last layer of :class:`~kvcontract.conformance.engines.vllm.engine.VllmEngine`)."""

    source_path: Path | None
    declaration: EngineDeclaration

    def plugin_preamble(self) -> list[str]:
        """Source loading a plugin as the adapter did: its stand-ins for device modules, its
        patch modules and registrations (none for an engine without a plugin)."""
        plugin = self.declaration.plugin
        if plugin is None:
            return []
        lines = ["# the plugin, loaded as its platform does at start-up (stand-ins for its device modules)",
                 "from kvcontract.conformance.engines.declared import declaration_of",
                 "from kvcontract.conformance.engines.vllm.loading import install_stubs",
                 f"install_stubs(declaration_of({self.name!r}).plugin.stubs)"]
        lines += [f"import {m}  # noqa: F401" for m in plugin.patches]
        lines += [call.source() for call in plugin.setup]
        return lines

    def snippet_imports(self, kinds: Sequence[type[KVCacheSpec]]) -> list[str]:
        names = sorted({k.__name__ for k in kinds})
        lines = ["import os", f'os.environ.setdefault({self.homes.logging_env!r}, "WARNING")']
        if self.source_path is not None:
            lines += ["import sys", f"sys.path.insert(0, {str(self.source_path)!r})  # the checked source tree"]
        elif self.declaration.environment is not None:
            found = environments.state(self.declaration.environment)
            if found is not None:  # the engine environment the check ran in, first on the path
                lines += ["import sys", f"sys.path[:0] = {list(found['paths'])!r}  # the engine's environment "
                                        f"({self.declaration.install})"]
        lines += ["import torch", *self.plugin_preamble()]
        plugin_kinds = {n: c for n, c in self._plugin_classes.items() if n in names}
        lines.append(f"from {self.homes.interface} import "
                     f"{', '.join(sorted({*(set(names) - set(plugin_kinds)), 'KVCacheSpec'}))}")
        for name, cls in sorted(plugin_kinds.items()):  # the plugin's class, under the kind's name
            lines.append(f"from {cls.__module__} import {cls.__name__} as {name}")

        # The enums this release's fields hold, from where the release defines them.
        for engine_enum in sorted(self.engine_enums().values(), key=lambda e: e.__name__):
            lines.append(f"from {engine_enum.__module__} import {engine_enum.__name__}")
        if self.planning_module:
            lines.append(f"from {self.planning_module} import is_kv_cache_spec_uniform, get_kv_cache_groups")
            if hasattr(self.planning, "get_kv_cache_config_from_groups"):
                lines.append(f"from {self.planning_module} import get_kv_cache_config_from_groups")
        return lines

    def _render_value(self, _name: str, value: Any, hint: Any = None) -> str:
        if isinstance(value, KVDtype):
            return f"torch.{value.type_name}"
        if isinstance(value, enum.Enum) and type(value).__name__ in REF_ENUMS:
            engine_enum = self.engine_enums().get(type(value).__name__)
            if hint is str or engine_enum is None:
                return repr(value.value)
            member = self._to_value(value, hint)
            return f"{engine_enum.__name__}.{member.name}"
        if isinstance(value, tuple):
            inner = ", ".join(self._render_value(_name, v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return repr(value)

    def render_spec(self, spec: KVCacheSpec) -> str:
        cls = self.engine_class(type(spec))
        have = frozenset(f.name for f in dataclasses.fields(cls)) if cls else frozenset()
        hints = self.field_types(cls) if cls else {}
        skip = frozenset(f.name for f in dataclasses.fields(spec) if f.name not in have)
        skip |= {"page_size_padded"} if getattr(spec, "alignment", None) else frozenset()
        return render_call(type(spec).__name__, spec,
                           lambda name, value: self._render_value(name, value, hints.get(name)), skip)

    def render_merge(self, specs_expr: str) -> str:
        return f"({specs_expr}[0] if {specs_expr} else KVCacheSpec).merge({specs_expr})"

    def render_is_uniform(self, table_expr: str) -> str:
        return f"is_kv_cache_spec_uniform(dict({table_expr}))"

    def render_config(self) -> str:
        """Source building :meth:`grouping_config` (the paths grouping reads) with SimpleNamespace;
        grouping is probed first, so a repro's config does not depend on which clause ran first."""
        self.grouping_unavailable()
        return self.render_values(self._config_values)

    def render_values(self, values: Mapping[str, Any]) -> str:
        """Source building a config of ``values`` (dotted paths) with SimpleNamespace; a function
        value is the layout function (:meth:`_layout`), an object with ``text`` its own source."""
        def value(v: Any) -> str:
            text = getattr(v, "text", None)
            if isinstance(text, str):
                return text
            if callable(v):
                return f"lambda: __import__({self.homes.layout!r}, fromlist=['x']).KVCacheLayout.{v().name}"
            return repr(v)

        def build(node: Mapping[str, Any]) -> str:
            inner = ", ".join(f"{k}={build(v) if isinstance(v, dict) else value(v)}" for k, v in node.items())
            return f"__import__('types').SimpleNamespace({inner})"

        return build(self.config_tree(values))

    def render_group_layers(self, table_expr: str) -> str:
        return f"get_kv_cache_groups({self.render_config()}, dict({table_expr}))"

    def render_group_pairs(self, groups_expr: str) -> str:
        return f"[(tuple(g.layer_names), g.kv_cache_spec) for g in {groups_expr}]"

    def render_page_size(self, obj_expr: str) -> str:
        return f"{obj_expr}.page_size_bytes"
