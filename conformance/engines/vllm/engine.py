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
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import os
import subprocess
import sys
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.contract.codec import render_call
from kvcontract.conformance.contract.model import KitFailure
from kvcontract.conformance.contract.surface import spec_subclasses
from kvcontract.conformance.engines.protocol import EngineGroup, EngineUnavailable, Router
from kvcontract.conformance.engines.vllm.config import ConfigGap, StrictConfig
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
"""Reference value type -> where vLLM 0.34.0 defines its enum: only a fallback. The
enums a release uses are read from its spec classes' field annotations
(:meth:`VllmEngine.field_types`); a release whose field holds a plain ``str``
(``MambaSpec.mamba_type`` before 0.28) gets the reference value's string."""
SPEC_BASE_NAMES = ("KVCacheSpec", "KVCacheSpecBase")
"""The base spec class (0.7.x: ``KVCacheSpecBase``; ``KVCacheSpec`` was a dict alias there)."""
ENGINE_ONLY_VALUES: dict[str, Any] = {"use_mla": False}
"""Required fields of older releases with no contract counterpart, and the value
every kind that maps by name has: before 0.11.0 MLA was ``FullAttentionSpec(use_mla=True)``,
not a class, so the contract's ``MLAAttentionSpec`` is "no such kind" there and every
kind that does map is a non-MLA one."""
REF_ENUM_OF_ENGINE = {"KVQuantMode": "KVQuantMode", "SparseCacheRole": "SparseCacheRole",
                      "MambaAttentionBackendEnum": "MambaType"}
"""vLLM enum class name -> reference value type name."""


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


REF_ENUMS: dict[str, type[enum.Enum]] = {"KVQuantMode": KVQuantMode, "SparseCacheRole": SparseCacheRole,
                                         "MambaType": MambaType}


@functools.cache
def _ref_value_type(kind: type[KVCacheSpec], name: str) -> type[enum.Enum] | None:
    """The reference enum a field of ``kind`` holds (from its default), if any."""
    for f in dataclasses.fields(kind):
        if f.name == name:
            default = f.default
            return type(default) if isinstance(default, enum.Enum) and type(default).__name__ in REF_ENUMS \
                else _annotated_enum(kind, name)
    return None


def _annotated_enum(kind: type, name: str) -> type[enum.Enum] | None:
    try:
        hint = typing.get_type_hints(kind).get(name)
    except Exception:  # noqa: BLE001
        return None
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and candidate.__name__ in REF_ENUMS:
            return candidate
    return None


class UnmappableResult(TypeError):
    """vLLM returned an object with no reference counterpart."""


class GroupingUnavailable(KitFailure):
    """This release's grouping cannot be driven by the adapter (the reason says why)."""


NEUTRAL_CONFIG: dict[str, Any] = {
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
release's layer-outermost ``KVCacheLayout`` (only where ``vllm.v1.kv_cache_layout``
exists). Grouping is given only the paths it reads (:meth:`VllmEngine.group_layers`
learns them); a path not listed here means grouping cannot be driven."""


class VllmEngine:
    """vLLM's ``kv_cache_interface`` specs, merge, uniformity check and grouping."""

    name = "vllm"
    error_type: type[BaseException] = AssertionError
    supports_empty_merge = True
    """merge is a classmethod: with no member, the base class's ``KVCacheSpec.merge([])``."""

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
        self._config_values: dict[str, Any] = {}
        """Config paths grouping was seen to read, with their neutral values."""
        self._grouping_problem: str | None = None
        self._field_types: dict[type, dict[str, Any]] = {}
        self._engine_enums: dict[str, type[enum.Enum]] | None = None
        self._plain: set[str] | None = None
        self._unsupported: dict[type, dict[str, str]] = {}
        self._not_read_back: dict[type, frozenset[str]] = {}
        """Per kind, the fields the release derives without effect (see _derived_without_effect)."""
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
        base = next((c for c in (getattr(self.interface, n, None) for n in SPEC_BASE_NAMES)
                     if isinstance(c, type)), None)
        if base is None:
            raise EngineUnavailable(f"vllm {self.version}'s kv_cache_interface defines none of "
                                    f"{', '.join(SPEC_BASE_NAMES)} as a class")
        return spec_subclasses(base)

    def field_types(self, cls: type) -> dict[str, Any]:
        """The release's annotation of each field of ``cls``, resolved (``typing.get_type_hints``);
        an annotation that cannot be resolved is left out."""
        if cls not in self._field_types:
            try:
                hints = typing.get_type_hints(cls)
            except Exception:  # noqa: BLE001 - an unresolvable annotation: per field below
                hints = {}
                module = sys.modules.get(cls.__module__)
                for f in dataclasses.fields(cls):
                    try:
                        hints[f.name] = (eval(f.type, vars(module)) if isinstance(f.type, str)
                                         else f.type)
                    except Exception:  # noqa: BLE001, S112 - unknown type: no conversion for it
                        continue
            self._field_types[cls] = hints
        return self._field_types[cls]

    def engine_enums(self) -> dict[str, type[enum.Enum]]:
        """Reference value type name -> the release's enum for it, read from the
        annotations of its spec classes' fields (``ENUM_HOMES`` as a fallback)."""
        if self._engine_enums is None:
            self._engine_enums = self._find_engine_enums()
        return self._engine_enums

    def _find_engine_enums(self) -> dict[str, type[enum.Enum]]:
        found: dict[str, type[enum.Enum]] = {}
        for cls in self.spec_classes():
            for hint in self.field_types(cls).values():
                for candidate in (hint, *typing.get_args(hint)):
                    if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
                        key = REF_ENUM_OF_ENGINE.get(candidate.__name__)
                        if key is not None:
                            found.setdefault(key, candidate)
        plain = self._string_valued()
        for key, module, name in ENUM_HOMES:
            if key not in found and key not in plain and key in self._enum_fields_present():
                engine_enum = self._engine_enum(module, name)
                if engine_enum is not None:
                    found[key] = engine_enum
        return found

    def _enum_fields_present(self) -> set[str]:
        """Reference value types some engine field of a matching name holds (by reference annotation)."""
        wanted: set[str] = set()
        for kind in SPEC_KINDS:
            cls = self.engine_class(kind)
            if cls is None:
                continue
            have = {f.name for f in dataclasses.fields(cls)}
            for f in dataclasses.fields(kind):
                ref_type = _ref_value_type(kind, f.name)  # type: ignore[arg-type]  # classes hash
                if ref_type is not None and f.name in have:
                    wanted.add(ref_type.__name__)
        return wanted

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
        for engine_enum in self.engine_enums().values():
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
        enums = self.engine_enums()
        for key in self._string_valued():
            values[key] = tuple(REF_ENUMS[key])  # a plain str field takes any reference value
        for key, engine_enum in enums.items():
            name = engine_enum.__name__
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

    def _required_extras(self, kind: type[KVCacheSpec]) -> list[str]:
        """Required fields of the release's class that the contract has no value for
        (neither a reference field nor in :data:`ENGINE_ONLY_VALUES`)."""
        cls = self.engine_class(kind)
        if cls is None:
            return []
        ours = {f.name for f in dataclasses.fields(kind)}
        return [f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                and f.name not in ours and f.name not in ENGINE_ONLY_VALUES]

    def unsupported_kinds(self) -> Mapping[type[KVCacheSpec], str]:
        out: dict[type[KVCacheSpec], str] = {}
        for k in SPEC_KINDS:
            if self.engine_class(k) is None:
                out[k] = f"vllm {self.version} has no {k.__name__}"
            elif extras := self._required_extras(k):
                out[k] = (f"vllm {self.version}'s {k.__name__} requires {', '.join(extras)}, which the "
                          "contract has no value for")
        return out

    def _string_valued(self) -> set[str]:
        """Reference value types that some engine field holds as a plain ``str``."""
        if self._plain is not None:
            return self._plain
        out: set[str] = set()
        for kind in SPEC_KINDS:
            cls = self.engine_class(kind)
            if cls is None:
                continue
            hints = self.field_types(cls)
            for f in dataclasses.fields(kind):
                ref_type = _ref_value_type(kind, f.name)  # type: ignore[arg-type]  # classes hash
                if ref_type is not None and hints.get(f.name) is str:
                    out.add(ref_type.__name__)
        self._plain = out
        return out

    def unsupported_fields(self, kind: type[KVCacheSpec]) -> Mapping[str, str]:
        """Fields of ``kind`` the release lacks, or holds with a type the reference
        value cannot be given as (read from the release's annotations)."""
        if kind not in self._unsupported:
            self._unsupported[kind] = self._find_unsupported_fields(kind)
        return self._unsupported[kind]

    def _find_unsupported_fields(self, kind: type[KVCacheSpec]) -> dict[str, str]:
        cls = self.engine_class(kind)
        if cls is None:
            return {}
        have = {f.name for f in dataclasses.fields(cls)}
        missing = {f.name: f"vllm {self.version}'s {kind.__name__} has no field {f.name}"
                   for f in dataclasses.fields(kind) if f.name not in have}
        hints = self.field_types(cls)
        enums = self.engine_enums()
        for f in dataclasses.fields(kind):
            ref_type = _ref_value_type(kind, f.name)  # type: ignore[arg-type]  # classes hash
            if f.name in missing or ref_type is None:
                continue
            hint = hints.get(f.name)
            if hint is str or ref_type.__name__ in enums and enums[ref_type.__name__] in (hint, *typing.get_args(hint)):
                continue
            missing[f.name] = (f"vllm {self.version}'s {kind.__name__}.{f.name} is "
                               f"{getattr(hint, '__name__', hint)!s}, not a {ref_type.__name__} the adapter can "
                               "give (no such enum in this release)")
        derived = self._derived_without_effect(kind, cls, set(missing))
        self._not_read_back[kind] = frozenset(derived)
        missing.update(derived)
        return missing

    def _derived_without_effect(self, kind: type[KVCacheSpec], cls: type, skip: set[str]) -> dict[str, str]:
        """Fields the release derives to another default than the contract's and leaves out of
        its page (vLLM 0.25's MLA kinds derive ``head_size_v`` from ``head_size`` and size the
        page from ``head_size`` alone): the release gives them no meaning the contract judges,
        so they are neither compared nor read back."""
        from kvcontract.conformance.contract import (
            systematic,  # deferred: systematic imports the strategies
        )
        from kvcontract.conformance.contract.strategies import FULL_DOMAIN

        out: dict[str, str] = {}
        try:  # the contract's whole domain: the engine's own domain is built from this very answer
            base = systematic.base_spec(kind, FULL_DOMAIN)
            given = self.to_engine(base) if base is not None else None
        except Exception:  # noqa: BLE001 - a kind the adapter cannot build has nothing to compare
            return out
        if base is None or given is None:
            return out
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        for f in dataclasses.fields(kind):
            if f.name in skip or f.name not in init:
                continue
            found = self._derived_if_without_effect(cls, given, base, f, init)
            if found:
                out[f.name] = (f"vllm {self.version}'s {kind.__name__} derives {f.name}="
                               f"{found[0]!r} when not given and leaves it out of its page")
        return out

    def _derived_if_without_effect(self, cls: type, given: Any, base: KVCacheSpec,
                                   f: dataclasses.Field[Any], init: set[str]) -> tuple[Any, ...]:
        """``(value,)``: what ``cls`` derives for field ``f`` when it is not given, if that differs
        from the contract's and leaves the page unchanged; else ``()``."""
        kwargs = {n: getattr(given, n) for n in init if n != f.name and hasattr(given, n)}
        try:
            derived = cls(**kwargs)
            value = getattr(derived, f.name)
            if self._from_value(f.default, value) == getattr(base, f.name):
                return ()
            same_page = int(derived.page_size_bytes) == int(given.page_size_bytes)
        except Exception:  # noqa: BLE001 - required, or a value the contract cannot hold: not this case
            return ()
        return (value,) if same_page else ()

    # -- conversion ---------------------------------------------------------
    def _to_value(self, value: Any, hint: Any = None) -> Any:
        """A reference value as the engine field annotated ``hint`` holds it."""
        if isinstance(value, KVDtype):
            return getattr(self.torch, value.type_name)
        if isinstance(value, enum.Enum) and type(value).__name__ in REF_ENUMS:
            if hint is str:
                return value.value
            engine_enum = self.engine_enums().get(type(value).__name__)
            if engine_enum is None:
                raise UnmappableResult(f"vllm {self.version} has no enum for {type(value).__name__}")
            if isinstance(value, SparseCacheRole):
                return engine_enum(value.value)
            return engine_enum[value.name]
        if isinstance(value, tuple):
            return tuple(self._to_value(v) for v in value)
        return value

    def _from_value(self, reference_default: Any, value: Any) -> Any:
        if isinstance(value, self.torch.dtype):
            return KVDtype.from_name(str(value).removeprefix("torch."))
        if isinstance(value, enum.Enum):
            ref_enum = ENGINE_ENUMS.get(type(value).__name__)
            return value if ref_enum is None else ref_enum[value.name]
        if isinstance(value, str) and isinstance(reference_default, enum.Enum):
            try:  # a release that holds the value as a plain string (MambaSpec.mamba_type < 0.28)
                return type(reference_default)(value)
            except ValueError:
                return value
        if isinstance(value, tuple | list):
            return tuple(self._from_value(None, v) for v in value)
        return value

    def to_engine(self, spec: KVCacheSpec) -> Any:
        cls = self.engine_class(type(spec))
        if cls is None:
            raise UnmappableResult(f"vllm {self.version} has no {type(spec).__name__}")
        have = {f.name for f in dataclasses.fields(cls) if f.init}
        hints = self.field_types(cls)
        kwargs = {f.name: self._to_value(getattr(spec, f.name), hints.get(f.name))
                  for f in dataclasses.fields(spec) if f.name in have}
        for name, value in ENGINE_ONLY_VALUES.items():
            if name in have and name not in kwargs:
                kwargs[name] = value
        return cls(**kwargs)

    def from_engine(self, obj: Any) -> KVCacheSpec:
        kind = KINDS_BY_NAME.get(type(obj).__name__)
        if kind is None:
            raise UnmappableResult(f"vllm returned a {type(obj).__name__}, not a reference kind")
        values = {}
        self.unsupported_fields(kind)  # finds the fields not to read back, once per kind
        ignored = self._not_read_back.get(kind, frozenset())
        for f in dataclasses.fields(kind):
            if hasattr(obj, f.name) and f.name not in ignored:
                values[f.name] = self._from_value(f.default, getattr(obj, f.name))
        spec = kind(**values)
        # MLA pages: vLLM stores the alignment padding it derived; so does the model.
        if getattr(obj, "page_size_padded", None) != getattr(spec, "page_size_padded", None):
            object.__setattr__(spec, "page_size_padded", getattr(obj, "page_size_padded", None))
        return spec

    # -- operations ---------------------------------------------------------
    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        return (objs[0] if objs else self.interface.KVCacheSpec).merge(objs)

    def _require_planning(self) -> Any:
        if self.planning is None:
            raise EngineUnavailable(f"vllm {self.version}: no module of {PLANNING_MODULES} "
                                    "has is_kv_cache_spec_uniform")
        return self.planning

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        return bool(self._require_planning().is_kv_cache_spec_uniform(dict(objs_by_layer)))

    def _layout(self) -> Any:
        """A function returning the release's layer-outermost ``KVCacheLayout``."""
        try:
            layout_module = importlib.import_module("vllm.v1.kv_cache_layout")
        except ImportError:
            raise ConfigGap("cache_config.get_resolved_kv_cache_layout") from None
        layout = next(m for m in layout_module.KVCacheLayout if not m.is_block_outermost)
        return lambda: layout

    def _neutral(self, path: str) -> Any:
        value = NEUTRAL_CONFIG[path]
        return self._layout() if value == "LAYOUT" else value

    def grouping_config(self) -> Any:
        """The part of a VllmConfig this release's grouping reads, with the values
        that switch its optional features off. Only the paths grouping was seen to
        read are set (:meth:`group_layers` learns them by trying); reading any other
        raises :class:`ConfigGap`."""
        tree: dict[str, Any] = {}
        for path, value in self._config_values.items():
            node = tree
            *parents, leaf = path.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value

        def build(prefix: str, values: Mapping[str, Any]) -> StrictConfig:
            return StrictConfig(prefix, {k: build(f"{prefix}{k}.", v) if isinstance(v, dict) else v
                                         for k, v in values.items()})

        return build("", tree)

    def _learn(self, gap: ConfigGap) -> bool:
        """Add the neutral value of the path grouping read; False when there is none."""
        path = gap.path
        known = next((p for p in NEUTRAL_CONFIG if p == path or p.startswith(path + ".")
                      or path.startswith(p + ".")), None)
        if known is None or known in self._config_values:
            return False
        if path.startswith(known + "."):
            return False  # grouping reads below a value we set (None): not neutral after all
        try:
            self._config_values[known] = self._neutral(known)
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
            return (f"vllm {self.version} has no get_kv_cache_groups in {', '.join(PLANNING_MODULES)}")
        if self._grouping_problem is None:
            self._grouping_problem = ""
            from kvcontract.reference import FullAttentionSpec

            try:
                probe = self.to_engine(FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64,
                                                         dtype=KVDtype.FLOAT16))
                self.group_layers({"probe.0": probe})
            except KitFailure as exc:
                self._grouping_problem = str(exc)
            except Exception as exc:  # noqa: BLE001 - the engine's own refusal: driven, judged by the laws
                self._grouping_probe_error = f"{type(exc).__name__}: {exc}"
        return self._grouping_problem or None

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        """The release's ``get_kv_cache_groups``. A config attribute it reads that the
        adapter cannot give is a :class:`ConfigGap` (a :class:`KitFailure`): the kit
        could not drive grouping, which is no finding of the engine."""
        planning = self.planning
        if planning is None or not hasattr(planning, "get_kv_cache_groups"):
            raise GroupingUnavailable(f"vllm {self.version} has no get_kv_cache_groups in "
                                      f"{', '.join(PLANNING_MODULES)}")
        for _ in range(len(NEUTRAL_CONFIG) + 1):
            try:
                groups = planning.get_kv_cache_groups(self.grouping_config(), dict(objs_by_layer))
                break
            except ConfigGap as gap:
                if not self._learn(gap):
                    raise GroupingUnavailable(f"vllm {self.version}: {gap}") from None
        else:  # pragma: no cover - every retry learns one more path
            raise GroupingUnavailable(f"vllm {self.version}: grouping's config needs did not settle")
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
                 f"from vllm.v1.kv_cache_interface import {', '.join(sorted({*names, 'KVCacheSpec'}))}"]

        # The enums this release's fields hold, from where the release defines them.
        for engine_enum in sorted(self.engine_enums().values(), key=lambda e: e.__name__):
            lines.append(f"from {engine_enum.__module__} import {engine_enum.__name__}")
        if self.planning_module:
            lines.append(f"from {self.planning_module} import is_kv_cache_spec_uniform, get_kv_cache_groups")
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
        """Source building :meth:`grouping_config` (the paths grouping reads) with SimpleNamespace."""
        tree: dict[str, Any] = {}
        for path in self._config_values:
            node = tree
            *parents, leaf = path.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = path

        def value(path: str) -> str:
            if NEUTRAL_CONFIG[path] == "LAYOUT":
                name = self._config_values[path]().name
                return (f"lambda: __import__('vllm.v1.kv_cache_layout', fromlist=['x']).KVCacheLayout.{name}")
            return repr(self._config_values[path])

        def build(values: Mapping[str, Any]) -> str:
            inner = ", ".join(f"{k}={build(v) if isinstance(v, dict) else value(v)}" for k, v in values.items())
            return f"__import__('types').SimpleNamespace({inner})"

        return build(tree)

    def render_group_layers(self, table_expr: str) -> str:
        return f"get_kv_cache_groups({self.render_config()}, dict({table_expr}))"

    def render_group_pairs(self, groups_expr: str) -> str:
        return f"[(tuple(g.layer_names), g.kv_cache_spec) for g in {groups_expr}]"

    def render_page_size(self, obj_expr: str) -> str:
        return f"{obj_expr}.page_size_bytes"

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
