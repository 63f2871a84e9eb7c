"""The installed vLLM behind the engine protocol (version-aware).

Reference kinds map to vLLM's classes of the same name in
``vllm.v1.kv_cache_interface``; fields map by name. A kind or field that the
installed release lacks is reported by :meth:`unsupported_kinds` /
:meth:`unsupported_fields`, so clauses skip or keep it at its default, never
crash. Grouping comes from ``vllm.v1.core.kv_cache_planning`` (0.34.0) or
``vllm.v1.core.kv_cache_utils`` (older releases).

The adapter is introspectable (``kvcontract.conformance.surface``):
:meth:`VllmEngine.spec_classes` finds every spec class of the release by walking
the subclasses of its ``KVCacheSpec``, and :meth:`VllmEngine.value_domains` reads
the dtypes and enum members the release accepts from vLLM itself.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kvcontract.conformance.codec import render_call
from kvcontract.conformance.engine import EngineGroup, EngineUnavailable, Router
from kvcontract.conformance.surface import spec_subclasses
from kvcontract.reference import (
    KINDS_BY_NAME,
    SPEC_KINDS,
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    MambaType,
    SparseCacheRole,
)

PLANNING_MODULES = ("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils")
DTYPE_TABLE_MODULES = ("vllm.utils.torch_utils", "vllm.utils")
"""Where a release keeps ``STR_DTYPE_TO_TORCH_DTYPE``, its cache-dtype-name table."""
ENUM_HOMES = (
    ("KVQuantMode", "vllm.v1.kv_cache_interface", "KVQuantMode"),
    ("SparseCacheRole", "vllm.v1.kv_cache_interface", "SparseCacheRole"),
    ("MambaType", "vllm.v1.attention.backends.registry", "MambaAttentionBackendEnum"),
)
"""Reference value type -> the vLLM module and enum that define its members."""


ENGINE_ENUMS: dict[str, type[enum.Enum]] = {
    "KVQuantMode": KVQuantMode,
    "SparseCacheRole": SparseCacheRole,
    "MambaAttentionBackendEnum": MambaType,
}
"""vLLM enum class name -> reference enum with the same member names."""


def use_source_tree(path: str | os.PathLike[str]) -> Path:
    """Put a vLLM source checkout first on ``sys.path`` so that ``import vllm``
    resolves to it (``check --engine-path DIR``). Any directory whose ``vllm/``
    package imports with this environment's dependencies will do; compiled
    extensions are not needed for the KV-cache code on the CPU."""
    root = Path(path).expanduser().resolve()
    if not (root / "vllm" / "__init__.py").is_file():
        raise EngineUnavailable(f"{root} is not a vLLM source tree (no vllm/__init__.py)")
    loaded = sys.modules.get("vllm")
    if loaded is not None and not Path(getattr(loaded, "__file__", "") or "").resolve().is_relative_to(root):
        raise EngineUnavailable(f"another vllm ({getattr(loaded, '__file__', '?')}) is already imported in "
                                f"this process; {root} cannot replace it")
    if str(root) not in sys.path[:1]:
        sys.path.insert(0, str(root))
    return root


def git_state(root: Path) -> dict[str, str]:
    """``path``, ``describe`` (``git describe --tags --always --dirty`` without the
    suffix, or ``not a git tree``) and ``dirty`` (``yes`` / ``no`` / ``unknown``) of a tree."""
    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None

    info = {"path": str(root), "describe": "not a git tree", "dirty": "unknown"}
    inside = git("rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != "true":
        return info
    described = git("describe", "--tags", "--always")
    if described is not None and described.returncode == 0:
        info["describe"] = described.stdout.strip()
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    if status is not None and status.returncode == 0:
        info["dirty"] = "yes" if status.stdout.strip() else "no"
    return info


class UnmappableResult(TypeError):
    """vLLM returned an object with no reference counterpart."""


class VllmEngine:
    """vLLM's ``kv_cache_interface`` specs, merge, uniformity check and grouping."""

    name = "vllm"
    error_type: type[BaseException] = AssertionError
    supports_empty_merge = False  # merge is a classmethod reached through specs[0]

    def __init__(self, source_path: str | os.PathLike[str] | None = None) -> None:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        self.source_path = use_source_tree(source_path) if source_path is not None else None
        try:
            import torch
            import vllm
            self.interface = importlib.import_module("vllm.v1.kv_cache_interface")
        except Exception as exc:  # noqa: BLE001 - any import failure means "not here"
            raise EngineUnavailable(f"vllm is not importable here: {type(exc).__name__}: {exc}") from None
        if self.source_path is not None:
            loaded = Path(getattr(vllm, "__file__", "") or "").resolve()
            if not loaded.is_relative_to(self.source_path):
                raise EngineUnavailable(f"import vllm found {loaded.parent}, not the source tree "
                                        f"{self.source_path} (vllm was imported before the tree was put first)")
        self.torch = torch
        self.version = str(getattr(vllm, "__version__", "unknown"))
        self.planning = None
        for module in PLANNING_MODULES:
            try:
                candidate = importlib.import_module(module)
            except ImportError:
                continue
            if hasattr(candidate, "is_kv_cache_spec_uniform"):
                self.planning = candidate
                break
        self.planning_module = getattr(self.planning, "__name__", None)
        self._router: Router | None = None
        self._router_problem: str | None = None

    def source_info(self) -> dict[str, str] | None:
        """Where the checked vLLM comes from, for a source tree (the report's ``engine_source``)."""
        return git_state(self.source_path) if self.source_path is not None else None

    # -- capabilities -------------------------------------------------------
    def engine_class(self, kind: type[KVCacheSpec]) -> type | None:
        cls = getattr(self.interface, kind.__name__, None)
        return cls if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None

    def spec_classes(self) -> list[type]:
        """``KVCacheSpec`` and every dataclass subclass of it, transitively, that
        the loaded modules define (ROLE-COVER-1): introspection, not a list."""
        return spec_subclasses(self.interface.KVCacheSpec)

    def _engine_enum(self, module: str, name: str) -> type[enum.Enum] | None:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            return None
        return found if isinstance(found, type) and issubclass(found, enum.Enum) else None

    def _engine_dtypes(self) -> list[Any]:
        """Every torch dtype the release's cache-dtype names map to (the dtypes its
        page-size formula, ``get_dtype_size``, is asked about)."""
        for module in DTYPE_TABLE_MODULES:
            try:
                table = getattr(importlib.import_module(module), "STR_DTYPE_TO_TORCH_DTYPE", None)
            except ImportError:
                continue
            if isinstance(table, dict):
                found: list[Any] = []
                for dtype in table.values():
                    if dtype not in found:
                        found.append(dtype)
                return found
        return [getattr(self.torch, d.type_name) for d in KVDtype]

    def engine_value_domains(self) -> dict[type, tuple[Any, ...]]:
        """The release's own values per engine type: every cache dtype, every
        member of its quantization, sparse-role and Mamba-backend enums (a member
        whose value is None is a placeholder to register, not a backend)."""
        out: dict[type, tuple[Any, ...]] = {self.torch.dtype: tuple(self._engine_dtypes())}
        for _key, module, name in ENUM_HOMES:
            engine_enum = self._engine_enum(module, name)
            if engine_enum is not None:
                out[engine_enum] = tuple(m for m in engine_enum if m.value is not None)
        return out

    def _mapped(self) -> tuple[dict[str, tuple[Any, ...]], list[tuple[str, str]]]:
        values: dict[str, tuple[Any, ...]] = {}
        unmapped: list[tuple[str, str]] = []
        dtypes = []
        for dtype in self._engine_dtypes():
            try:
                dtypes.append(KVDtype.from_name(str(dtype).removeprefix("torch.")))
            except ValueError:
                unmapped.append(("torch.dtype", str(dtype).removeprefix("torch.")))
        values["KVDtype"] = tuple(dict.fromkeys(dtypes))
        for key, module, name in ENUM_HOMES:
            engine_enum = self._engine_enum(module, name)
            if engine_enum is None:
                continue
            ref_enum = ENGINE_ENUMS[name]
            members = []
            for member in engine_enum:
                if member.value is None:
                    continue
                if member.name in ref_enum.__members__:
                    members.append(ref_enum[member.name])
                else:
                    unmapped.append((name, member.name))
            values[key] = tuple(members)
        return values, unmapped

    def value_domains(self) -> dict[str, tuple[Any, ...]]:
        """Per reference value type (``KVDtype``, ``KVQuantMode``,
        ``SparseCacheRole``, ``MambaType``), the reference values this release
        accepts: what generated specs draw from (``strategies.domain_for``)."""
        return self._mapped()[0]

    def unmapped_values(self) -> list[tuple[str, str]]:
        """``(engine type, value)`` the release accepts and the reference lacks."""
        return self._mapped()[1]

    def unsupported_kinds(self) -> Mapping[type[KVCacheSpec], str]:
        return {k: f"vllm {self.version} has no {k.__name__}" for k in SPEC_KINDS
                if self.engine_class(k) is None}

    def unsupported_fields(self, kind: type[KVCacheSpec]) -> Mapping[str, str]:
        cls = self.engine_class(kind)
        if cls is None:
            return {}
        have = {f.name for f in dataclasses.fields(cls)}
        missing = {f.name: f"vllm {self.version}'s {kind.__name__} has no field {f.name}"
                   for f in dataclasses.fields(kind) if f.name not in have}
        if "kv_quant_mode" in have and not hasattr(self.interface, "KVQuantMode"):
            missing["kv_quant_mode"] = f"vllm {self.version} has no KVQuantMode"
        return missing

    # -- conversion ---------------------------------------------------------
    def _to_value(self, value: Any) -> Any:
        if isinstance(value, KVDtype):
            return getattr(self.torch, value.type_name)
        if isinstance(value, KVQuantMode):
            return self.interface.KVQuantMode[value.name]
        if isinstance(value, SparseCacheRole):
            return self.interface.SparseCacheRole(value.value)
        if isinstance(value, MambaType):
            registry = importlib.import_module("vllm.v1.attention.backends.registry")
            return registry.MambaAttentionBackendEnum[value.name]
        if isinstance(value, tuple):
            return tuple(self._to_value(v) for v in value)
        return value

    def _from_value(self, reference_default: Any, value: Any) -> Any:
        if isinstance(value, self.torch.dtype):
            return KVDtype.from_name(str(value).removeprefix("torch."))
        if isinstance(value, enum.Enum):
            ref_enum = ENGINE_ENUMS.get(type(value).__name__)
            return value if ref_enum is None else ref_enum[value.name]
        if isinstance(value, tuple | list):
            return tuple(self._from_value(None, v) for v in value)
        return value

    def to_engine(self, spec: KVCacheSpec) -> Any:
        cls = self.engine_class(type(spec))
        if cls is None:
            raise UnmappableResult(f"vllm {self.version} has no {type(spec).__name__}")
        have = {f.name for f in dataclasses.fields(cls) if f.init}
        kwargs = {f.name: self._to_value(getattr(spec, f.name))
                  for f in dataclasses.fields(spec) if f.name in have}
        return cls(**kwargs)

    def from_engine(self, obj: Any) -> KVCacheSpec:
        kind = KINDS_BY_NAME.get(type(obj).__name__)
        if kind is None:
            raise UnmappableResult(f"vllm returned a {type(obj).__name__}, not a reference kind")
        values = {}
        for f in dataclasses.fields(kind):
            if hasattr(obj, f.name):
                values[f.name] = self._from_value(f.default, getattr(obj, f.name))
        spec = kind(**values)
        # MLA pages: vLLM stores the alignment padding it derived; so does the model.
        if getattr(obj, "page_size_padded", None) != getattr(spec, "page_size_padded", None):
            object.__setattr__(spec, "page_size_padded", getattr(obj, "page_size_padded", None))
        return spec

    # -- operations ---------------------------------------------------------
    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        return objs[0].merge(objs)

    def _require_planning(self) -> Any:
        if self.planning is None:
            raise EngineUnavailable(f"vllm {self.version}: no module of {PLANNING_MODULES} "
                                    "has is_kv_cache_spec_uniform")
        return self.planning

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        return bool(self._require_planning().is_kv_cache_spec_uniform(dict(objs_by_layer)))

    def grouping_config(self) -> Any:
        """The part of a VllmConfig that default grouping reads: hybrid manager on,
        no HiSparse, no speculative decoding (releases before 0.34 read
        ``speculative_config`` inside grouping), a layer-outermost cache layout."""
        layout_module = importlib.import_module("vllm.v1.kv_cache_layout")
        layout = next(m for m in layout_module.KVCacheLayout if not m.is_block_outermost)
        return SimpleNamespace(
            scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=False),
            attention_config=None,
            speculative_config=None,
            cache_config=SimpleNamespace(get_resolved_kv_cache_layout=lambda: layout),
        )

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        planning = self._require_planning()
        groups = planning.get_kv_cache_groups(self.grouping_config(), dict(objs_by_layer))
        out = []
        for g in groups:
            spec = g.kv_cache_spec
            if type(spec).__name__ == "UniformTypeKVCacheSpecs":
                members = {n: self.from_engine(s) for n, s in spec.kv_cache_specs.items()}
                out.append(EngineGroup(tuple(g.layer_names), None, members))
            else:
                out.append(EngineGroup(tuple(g.layer_names), self.from_engine(spec)))
        return out

    def page_size(self, obj: Any) -> int:
        return int(obj.page_size_bytes)

    # -- snippets -----------------------------------------------------------
    def snippet_imports(self, kinds: Sequence[type[KVCacheSpec]]) -> list[str]:
        names = sorted({k.__name__ for k in kinds})
        lines = ["import os", 'os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")']
        if self.source_path is not None:
            lines += ["import sys", f"sys.path.insert(0, {str(self.source_path)!r})  # the checked source tree"]
        lines += ["import torch",
                 f"from vllm.v1.kv_cache_interface import {', '.join(names)}"]

        def has_field(name: str) -> bool:
            return any(name in {f.name for f in dataclasses.fields(k)} for k in kinds)

        # Enums only where this release has them (0.29.0 has no SparseCacheRole).
        if has_field("cache_role") and hasattr(self.interface, "SparseCacheRole"):
            lines.append("from vllm.v1.kv_cache_interface import SparseCacheRole")
        if hasattr(self.interface, "KVQuantMode"):
            lines.append("from vllm.v1.kv_cache_interface import KVQuantMode")
        if has_field("mamba_type"):
            lines.append("from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum")
        if self.planning_module:
            lines.append(f"from {self.planning_module} import is_kv_cache_spec_uniform, get_kv_cache_groups")
        return lines

    def _render_value(self, _name: str, value: Any) -> str:
        if isinstance(value, KVDtype):
            return f"torch.{value.type_name}"
        if isinstance(value, KVQuantMode):
            return f"KVQuantMode.{value.name}"
        if isinstance(value, SparseCacheRole):
            return f"SparseCacheRole.{value.name}"
        if isinstance(value, MambaType):
            return f"MambaAttentionBackendEnum.{value.name}"
        if isinstance(value, tuple):
            inner = ", ".join(self._render_value(_name, v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return repr(value)

    def render_spec(self, spec: KVCacheSpec) -> str:
        cls = self.engine_class(type(spec))
        have = frozenset(f.name for f in dataclasses.fields(cls)) if cls else frozenset()
        skip = frozenset(f.name for f in dataclasses.fields(spec) if f.name not in have)
        skip |= {"page_size_padded"} if getattr(spec, "alignment", None) else frozenset()
        return render_call(type(spec).__name__, spec, self._render_value, skip)

    def render_merge(self, specs_expr: str) -> str:
        return f"{specs_expr}[0].merge({specs_expr})"

    def render_is_uniform(self, table_expr: str) -> str:
        return f"is_kv_cache_spec_uniform(dict({table_expr}))"

    def render_group_layers(self, table_expr: str) -> str:
        return (
            "get_kv_cache_groups(__import__('types').SimpleNamespace("
            "scheduler_config=__import__('types').SimpleNamespace(disable_hybrid_kv_cache_manager=False), "
            "attention_config=None, speculative_config=None, cache_config=__import__('types').SimpleNamespace("
            "get_resolved_kv_cache_layout=lambda: __import__('vllm.v1.kv_cache_layout', "
            f"fromlist=['x']).KVCacheLayout.LBHNC)), dict({table_expr}))"
        )

    def render_group_pairs(self, groups_expr: str) -> str:
        return f"[(tuple(g.layer_names), g.kv_cache_spec) for g in {groups_expr}]"

    def render_page_size(self, obj_expr: str) -> str:
        return f"{obj_expr}.page_size_bytes"

    # -- routing (RoutingEngine): vLLM's MLA metadata builder, driven on the CPU --------
    def router(self) -> Router | None:
        if self._router is None and self._router_problem is None:
            from kvcontract.conformance.vllm_dispatch import VllmRouter

            try:
                self._router = VllmRouter().route
            except Exception as exc:  # noqa: BLE001 - a release whose builder cannot be driven skips
                self._router_problem = f"{type(exc).__name__}: {exc}"
        return self._router

    def router_unavailable(self) -> str:
        return (f"vllm {self.version}: the routing adapter cannot drive this release's MLA "
                f"metadata builder ({self._router_problem})")

    def router_source(self) -> list[str]:
        return ["# vLLM's MLACommonMetadataBuilder.build (split_decodes_and_prefills), built on the CPU",
                "from kvcontract.conformance.vllm_dispatch import VllmRouter",
                "ROUTE = VllmRouter().route"]
