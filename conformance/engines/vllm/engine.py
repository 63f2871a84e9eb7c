"""The installed vLLM behind the engine protocol (version-aware).

Reference kinds map to vLLM's classes of the same name in
``vllm.v1.kv_cache_interface``; fields map by name. A kind or field that the
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
Where a release keeps what the adapter drives are class attributes of
:class:`VllmEngine`, read through ``self``: a fork's adapter subclasses it and
overrides them.
"""

from __future__ import annotations

import enum
import functools
import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from kvcontract.conformance.engines.protocol import EngineUnavailable, Router
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

    # -- where the release keeps things (a fork's adapter overrides these) ----------------
    INTERFACE_MODULE: ClassVar[str] = "vllm.v1.kv_cache_interface"
    """The spec classes: a reference kind maps to this module's class of the same name."""
    PLANNING_MODULES: ClassVar[tuple[str, ...]] = ("vllm.v1.core.kv_cache_planning",
                                                   "vllm.v1.core.kv_cache_utils")
    """Where grouping lives: the first that imports and has ``is_kv_cache_spec_uniform``."""
    LAYOUT_MODULE: ClassVar[str] = "vllm.v1.kv_cache_layout"
    """Where a release keeps ``KVCacheLayout`` (grouping's ``"LAYOUT"`` config value)."""
    DTYPE_TABLE_MODULES: ClassVar[tuple[str, ...]] = ("vllm.utils.torch_utils", "vllm.utils")
    """Where a release keeps ``STR_DTYPE_TO_TORCH_DTYPE``, its cache-dtype-name table."""
    ENUM_HOMES: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("KVQuantMode", "vllm.v1.kv_cache_interface", "KVQuantMode"),
        ("SparseCacheRole", "vllm.v1.kv_cache_interface", "SparseCacheRole"),
        ("MambaType", "vllm.v1.attention.backends.registry", "MambaAttentionBackendEnum"),
    )
    """Reference value type -> where vLLM 0.34.0 defines its enum: only a fallback. The
    enums a release uses are read from its spec classes' field annotations
    (:meth:`VllmEngine.field_types`); a release whose field holds a plain ``str``
    (``MambaSpec.mamba_type`` before 0.28) gets the reference value's string."""
    SPEC_BASE_NAMES: ClassVar[tuple[str, ...]] = ("KVCacheSpec", "KVCacheSpecBase")
    """The base spec class (0.7.x: ``KVCacheSpecBase``; ``KVCacheSpec`` was a dict alias there)."""
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

    def __init__(self, source_path: str | os.PathLike[str] | None = None) -> None:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        self.source_path = use_source_tree(source_path) if source_path is not None else None
        try:
            import torch
            import vllm
            self.interface = importlib.import_module(self.INTERFACE_MODULE)
        except Exception as exc:  # noqa: BLE001 - any import failure means "not here"
            raise EngineUnavailable(f"vllm is not importable here: {type(exc).__name__}: {exc}") from None
        if self.source_path is not None:
            loaded = Path(getattr(vllm, "__file__", "") or "").resolve()
            if not loaded.is_relative_to(self.source_path):
                raise EngineUnavailable(f"import vllm found {loaded.parent}, not the source tree "
                                        f"{self.source_path} (vllm was imported before the tree was put first)")
        self.torch = torch
        self._package: ModuleType = vllm
        self.version = str(getattr(vllm, "__version__", "unknown"))
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

    # -- declared capabilities (engines.protocol) -----------------------------------------
    def source_info(self) -> dict[str, str] | None:
        """Where the checked vLLM comes from, for a source tree (the report's ``engine_source``)."""
        return git_state(self.source_path) if self.source_path is not None else None

    def source_roots(self) -> list[str]:
        """vLLM's package directory: its frames are the engine's (a finding's location)."""
        return [str(Path(getattr(self._package, "__file__", "") or "").resolve().parent)]

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

    def deciders(self, outcome: str) -> tuple[str, ...]:
        """vLLM's merge decides agreement and the merged value; the grouping's per-member
        rule (``is_uniform_with_collection``) decides which disagreeing layers share a group;
        planning's outcomes are decided where :attr:`PLAN_DECIDERS` says."""
        if outcome == "mixed-allocation":
            return ("is_uniform_with_collection", "merge")
        for prefix, names in self.PLAN_DECIDERS.items():
            if outcome.startswith(prefix):
                return names
        if outcome.startswith(self.SIZING_OUTCOMES):
            return ("get_kv_cache_config_from_groups",)
        return ("merge",)

    @functools.cached_property
    def distribution(self) -> str | None:
        """The distribution this vLLM comes from (which bundled expectations apply): the
        installed one that ships the imported ``vllm`` (``vllm`` for vLLM's own), ``vllm``
        for a source tree, None when no installed distribution ships it."""
        return "vllm" if self.source_path is not None else distribution_of(self._package)

    # -- operations -----------------------------------------------------------------------
    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        return (objs[0] if objs else self.interface.KVCacheSpec).merge(objs)

    def page_size(self, obj: Any) -> int:
        return int(obj.page_size_bytes)

    # -- routing (RoutingEngine): vLLM's MLA metadata builder, driven on the CPU --------
    def router(self) -> Router | None:
        if self._router is None and self._router_problem is None:
            from kvcontract.conformance.engines.vllm.routing import VllmRouter

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
                "from kvcontract.conformance.engines.vllm.routing import VllmRouter",
                "ROUTE = VllmRouter().route"]
