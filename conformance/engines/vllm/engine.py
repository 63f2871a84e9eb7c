"""The installed vLLM, or an engine built on its spec layer (a fork, a plugin), behind the
engine protocol (version-aware).

What the adapter drives is the engine's declaration (:mod:`.homes`: its package and where it
keeps each part; vLLM's by default): nothing imports ``vllm`` by name. Loading
(:mod:`.loading`) imports the declared package, and for a plugin its stand-ins for device
modules, its patch modules and registrations. Reference kinds map to the classes of the same
name in the declared spec module (``vllm.v1.kv_cache_interface``), or to a plugin's
subclass of one (by inheritance); fields map by name. A kind or field that the
installed release lacks is reported by :meth:`unsupported_kinds` /
:meth:`unsupported_fields`, so clauses skip or keep it at its default, never
crash. Grouping comes from ``vllm.v1.core.kv_cache_planning`` (0.34.0) or
``vllm.v1.core.kv_cache_utils`` (older releases).

The adapter is introspectable (``kvcontract.conformance.contract.surface``):
:meth:`VllmEngine.spec_classes` finds every spec class of the release by walking
the subclasses of its ``KVCacheSpec``, and :meth:`VllmEngine.value_domains` reads
the dtypes and enum members the release accepts from vLLM itself.

:class:`VllmEngine` is built in layers, one role each: reading the release
(:mod:`.discovery`), converting specs (:mod:`.conversion`), uniformity and grouping
(:mod:`.grouping`), repro snippets (:mod:`.snippets`), the fields its code sets
(:mod:`.producible`, the default domain of ``check``); this module adds loading
(:mod:`.source` for a source tree), merge, page size and routing (:mod:`.routing`).
A fork's or plugin's adapter is one declaration (``conformance/engines/aphrodite.py``,
``conformance/engines/vllm_ascend.py``) passed to :class:`VllmEngine`.
"""

from __future__ import annotations

import enum
import functools
import importlib.metadata
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from kvcontract.conformance.engines.protocol import EngineUnavailable, Router
from kvcontract.conformance.engines.vllm.homes import VLLM, EngineDeclaration, FieldRole
from kvcontract.conformance.engines.vllm.loading import load, plugin_classes
from kvcontract.conformance.engines.vllm.planner import VllmPlanning
from kvcontract.conformance.engines.vllm.producible import VllmProducible
from kvcontract.conformance.engines.vllm.source import distribution_of, git_state, use_source_tree
from kvcontract.reference import KVCacheSpec, KVQuantMode, MambaType, SparseCacheRole


class VllmEngine(VllmPlanning, VllmProducible):
    """vLLM's ``kv_cache_interface`` specs, merge, uniformity check and grouping."""

    name = "vllm"
    error_type: type[BaseException] = AssertionError
    supports_empty_merge = True
    """merge is a classmethod: with no member, the base class's ``KVCacheSpec.merge([])``."""

    # -- what the engine declares (a fork's or plugin's adapter passes its own) -------------
    DECLARATION: ClassVar[EngineDeclaration] = VLLM
    """The engine's package, where it keeps each part, its plugin and its added fields' roles
    (:mod:`.homes`); vLLM's by default."""
    ENGINE_ONLY_VALUES: ClassVar[dict[str, Any]] = {"use_mla": False}
    """Required fields of older releases with no contract counterpart, and the value
    every kind that maps by name has: before 0.11.0 MLA was ``FullAttentionSpec(use_mla=True)``,
    not a class, so the contract's ``MLAAttentionSpec`` is "no such kind" there and every
    kind that does map is a non-MLA one."""
    REF_ENUM_OF_ENGINE: ClassVar[dict[str, str]] = {
        "KVQuantMode": "KVQuantMode", "SparseCacheRole": "SparseCacheRole",
        "MambaAttentionBackendEnum": "MambaType"}
    """vLLM enum class name -> reference value type name."""
    ENGINE_ENUMS: ClassVar[dict[str, type[enum.Enum]]] = {
        "KVQuantMode": KVQuantMode,
        "SparseCacheRole": SparseCacheRole,
        "MambaAttentionBackendEnum": MambaType,
    }
    """vLLM enum class name -> reference enum with the same member names."""
    NEUTRAL_CONFIG: ClassVar[dict[str, Any]] = {
        "scheduler_config.disable_hybrid_kv_cache_manager": False,
        "speculative_config": None,
        "attention_config": None,
        "kv_transfer_config": None,
        "kv_events_config": None,
        "parallel_config.decode_context_parallel_size": 1,
        "parallel_config.prefill_context_parallel_size": 1,
        "parallel_config.pipeline_parallel_size": 1,
        "parallel_config.tensor_parallel_size": 1,
        "cache_config.get_resolved_kv_cache_layout": "LAYOUT",
        "cache_config.enable_prefix_caching": False,
        "cache_config.mamba_cache_mode": "none",
    }
    """Config attribute path -> the value that switches the feature it controls off
    (default grouping: hybrid manager on, no speculative decoding, no HiSparse, no KV
    transfer, no context parallelism). ``"LAYOUT"`` stands for a function returning the
    release's layer-outermost ``KVCacheLayout`` (only where :attr:`LAYOUT_MODULE`
    exists). Grouping is given only the paths it reads (:meth:`VllmEngine.group_layers`
    learns them); a path not listed here means grouping cannot be driven."""

    def __init__(self, source_path: str | os.PathLike[str] | None = None,
                 declaration: EngineDeclaration | None = None) -> None:
        self.declaration = declaration or self.DECLARATION
        self.homes = self.declaration.homes
        self.name = self.declaration.name
        os.environ.setdefault(self.homes.logging_env, "ERROR")
        package = self.homes.package
        self.source_path = use_source_tree(source_path, package) if source_path is not None else None
        loaded = load(self.declaration)
        if self.source_path is not None:
            found = Path(getattr(loaded.package, "__file__", "") or "").resolve()
            if not found.is_relative_to(self.source_path):
                raise EngineUnavailable(f"import {package} found {found.parent}, not the source tree "
                                        f"{self.source_path} ({package} was imported before the tree was put first)")
        self.torch = loaded.torch
        self.interface = loaded.interface
        self._package: ModuleType = loaded.package
        self._plugin_package = loaded.plugin_package
        self.stubs_used = loaded.stubs
        self.patches_loaded = loaded.patches
        self.base_version = str(getattr(loaded.package, "__version__", "unknown"))
        version_module = loaded.plugin_package if self.declaration.version_package != package else loaded.package
        self.version = str(getattr(version_module, "__version__", None) or self._installed_version())
        self._plugin_classes = (plugin_classes(self.declaration.plugin, self.interface)
                                if self.declaration.plugin is not None else {})
        self._planning_problems: list[str] = []
        self.planning = self._find_planning()
        self.planning_module = getattr(self.planning, "__name__", None)
        self._config_values = {}
        self._grouping_problem = None
        self._field_types = {}
        self._engine_enums = None
        self._plain = None
        self._unsupported = {}
        self._not_read_back = {}
        self._router: Router | None = None
        self._router_problem: str | None = None

    def _installed_version(self) -> str:
        """The declared distribution's installed version (a package without ``__version__``)."""
        try:
            return importlib.metadata.version(self.declaration.distribution or self.homes.package)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    # -- declared capabilities (engines.protocol) -----------------------------------------
    def source_info(self) -> dict[str, str] | None:
        """Where the checked engine comes from, for a source tree (the report's ``engine_source``)."""
        return git_state(self.source_path) if self.source_path is not None else None

    def source_roots(self) -> list[str]:
        """The engine's package directory, and a plugin's: their frames are the engine's (a
        finding's location)."""
        packages = [self._package, *([self._plugin_package] if self._plugin_package is not None else [])]
        return [str(Path(getattr(p, "__file__", "") or "").resolve().parent) for p in packages]

    def declared_roles(self) -> tuple[FieldRole, ...]:
        """The roles the declaration gives fields the engine adds (``DeclaredRoles``)."""
        return self.declaration.field_roles

    def model_tables(self) -> list[tuple[str, tuple[tuple[str, KVCacheSpec], ...]]]:
        """The real model tables built with this release's own spec-building code
        (:mod:`kvcontract.conformance.engines.vllm.tables`); none for another release."""
        from kvcontract.conformance.engines.vllm.tables import TablesNotFound, load_tables

        try:
            return [(t.name, tuple(t.layers)) for t in load_tables(self.version)]
        except TablesNotFound:
            return []

    PLAN_DECIDERS: ClassVar[dict[str, tuple[str, ...]]] = {
        "per-member": ("is_uniform_with_collection", "is_uniform_type"),
        "hybrid-off": ("_promote_local_kv_cache_specs", "unify_hybrid_kv_cache_specs", "get_kv_cache_groups"),
        "hidden-state": ("get_kv_cache_groups",),
    }
    """Chapter PLAN's wrong answers, by the outcome's first words: the planning function that
    decides them; every other plan outcome (blocks, tensors) is decided by the sizing."""
    SIZING_OUTCOMES: ClassVar[tuple[str, ...]] = ("over-budget", "tensor-", "layer-not-", "budget-unused")
    MATCH_DECIDERS: ClassVar[tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = (
        (("group-spec", "layer-spec"), ("merge",)),
        (("group-block-size", "group-page"), ("unify_kv_cache_spec_page_size", "merge")),
        (("group-split",), ("_get_kv_cache_groups_uniform_page_size", "get_kv_cache_groups")),
        (("groups", "group-form", "manager"), ("is_uniform_with_collection", "_get_kv_cache_groups_uniform_page_size",
                                               "get_kv_cache_groups")),
        (("num-blocks", "tensor-"), ("get_kv_cache_config_from_groups",)),
        (("refused", "raised"), ("get_kv_cache_groups",)),
    )
    """PLAN-MATCH-1's differences (``plan-differs-<class>``), by class: the function that decides that
    part of the plan (with the hybrid manager off, the groups are decided where ``hybrid-off`` says)."""

    def deciders(self, outcome: str) -> tuple[str, ...]:
        """vLLM's merge decides agreement and the merged value; the grouping's per-member
        rule (``is_uniform_with_collection``) decides which disagreeing layers share a group;
        planning's outcomes are decided where :attr:`PLAN_DECIDERS` says."""
        if outcome == "mixed-allocation":
            return ("is_uniform_with_collection", "merge")
        if outcome.startswith("plan-differs-"):
            what = outcome.removeprefix("plan-differs-").removesuffix("-hybrid-off")
            if outcome.endswith("-hybrid-off") and what in ("groups", "group-form", "manager"):
                return self.PLAN_DECIDERS["hybrid-off"]
            return next((names for classes, names in self.MATCH_DECIDERS if what.startswith(classes)), ("merge",))
        for prefix, names in self.PLAN_DECIDERS.items():
            if outcome.startswith(prefix):
                return names
        if outcome.startswith(self.SIZING_OUTCOMES):
            return ("get_kv_cache_config_from_groups",)
        return ("merge",)

    @functools.cached_property
    def distribution(self) -> str | None:
        """The distribution this engine comes from (which bundled expectations apply): the
        installed one that ships the imported package (``vllm`` for vLLM's own; a plugin's
        for a plugin), the declared one for a source tree, None when no installed
        distribution ships it."""
        if self.source_path is not None:
            return self.declaration.distribution
        shipped = self._plugin_package if self._plugin_package is not None else self._package
        return distribution_of(shipped)

    # -- operations -----------------------------------------------------------------------
    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        return (objs[0] if objs else self.interface.KVCacheSpec).merge(objs)

    def merge_unavailable(self) -> str | None:
        """MergeAvailability: why this release's specs cannot be merged (vLLM 0.7.0 to 0.8.5 have no
        ``merge``: a table had one kind and its specs were compared by equality), or None."""
        base = getattr(self.interface, "KVCacheSpec", None)
        if base is None or callable(getattr(base, "merge", None)):
            return None
        return (f"{self.name} {self.version}'s spec classes have no merge ({base.__name__} defines none): "
                "the merge clauses have nothing to judge")

    def page_size(self, obj: Any) -> int:
        return int(obj.page_size_bytes)

    # -- routing (RoutingEngine): vLLM's MLA metadata builder, driven on the CPU --------
    def router(self) -> Router | None:
        if self._router is None and self._router_problem is None:
            from kvcontract.conformance.engines.vllm.routing import VllmRouter

            try:
                self._router = VllmRouter(self.homes, self.name).route
            except Exception as exc:  # noqa: BLE001 - a release whose builder cannot be driven skips
                self._router_problem = f"{type(exc).__name__}: {exc}"
        return self._router

    def router_unavailable(self) -> str:
        return (f"{self.name} {self.version}: the routing adapter cannot drive this release's MLA "
                f"metadata builder ({self._router_problem})")

    def router_source(self) -> list[str]:
        lines = ["# the engine's MLACommonMetadataBuilder.build (split_decodes_and_prefills), built on the CPU",
                 "from kvcontract.conformance.engines.vllm.routing import VllmRouter"]
        if self.homes == VLLM.homes:
            return [*lines, "ROUTE = VllmRouter().route"]
        return [*lines, "from kvcontract.conformance.engines.declared import declaration_of",
                f"ROUTE = VllmRouter(declaration_of({self.name!r}).homes, {self.name!r}).route"]
