"""What a vLLM release has, read from its code: its spec classes and their fields'
annotations, its enums, the cache dtypes and enum members it accepts, the kinds it lacks.

Where to look is the engine's declaration (:class:`~kvcontract.conformance.engines.vllm.homes.EngineHomes`,
``self.homes``): the spec module, the base spec class names, the dtype table's modules, the
enums' fallback homes; a plugin's spec classes replace the base engine's for their kinds. What the contract knows is the reference's (:data:`REF_ENUMS`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import sys
import typing
from collections.abc import Mapping
from types import ModuleType
from typing import Any, ClassVar

from kvcontract.conformance.contract.surface import spec_subclasses
from kvcontract.conformance.engines.protocol import EngineUnavailable
from kvcontract.conformance.engines.vllm.homes import EngineHomes
from kvcontract.conformance.engines.vllm.loading import base_kind
from kvcontract.reference import (
    KINDS_BY_NAME,
    SPEC_KINDS,
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    MambaType,
    SparseCacheRole,
)

REF_ENUMS: dict[str, type[enum.Enum]] = {"KVQuantMode": KVQuantMode, "SparseCacheRole": SparseCacheRole,
                                         "MambaType": MambaType}


@functools.cache
def ref_value_type(kind: type[KVCacheSpec], name: str) -> type[enum.Enum] | None:
    """The reference enum a field of ``kind`` holds (from its default), if any."""
    for f in dataclasses.fields(kind):
        if f.name == name:
            default = f.default
            return type(default) if isinstance(default, enum.Enum) and type(default).__name__ in REF_ENUMS \
                else _annotated_enum(kind, name)
    return None


def _annotated_enum(kind: type, name: str) -> type[enum.Enum] | None:
    hints = _hints(kind)
    if hints is None:
        return None
    hint = hints.get(name)
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and candidate.__name__ in REF_ENUMS:
            return candidate
    return None


@functools.cache
def _hints(kind: type) -> dict[str, Any] | None:
    """``kind``'s resolved annotations, once per kind (resolving them took 0.8 ms a field); None
    when one cannot be resolved."""
    try:
        return typing.get_type_hints(kind)
    except Exception:  # noqa: BLE001
        return None


class VllmDiscovery:
    """Reading a release (the first layer of :class:`~kvcontract.conformance.engines.vllm.engine.VllmEngine`)."""

    homes: EngineHomes
    """Where the engine keeps things (its declaration's)."""
    name: str
    _plugin_classes: dict[str, type]
    """Contract kind name -> the plugin's class that replaces the base engine's (by inheritance)."""
    REF_ENUM_OF_ENGINE: ClassVar[dict[str, str]]
    ENGINE_ENUMS: ClassVar[dict[str, type[enum.Enum]]]
    ENGINE_ONLY_VALUES: ClassVar[dict[str, Any]]

    version: str
    interface: ModuleType
    torch: Any
    _field_types: dict[type, dict[str, Any]]
    _engine_enums: dict[str, type[enum.Enum]] | None
    _plain: set[str] | None

    def engine_class(self, kind: type[KVCacheSpec]) -> type | None:
        """The engine class built for ``kind``: a plugin's subclass where it has one, else the
        spec module's class of the kind's name."""
        cls = self._plugin_classes.get(kind.__name__) or getattr(self.interface, kind.__name__, None)
        return cls if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None

    def kind_of(self, cls: type) -> str | None:
        """The contract kind an engine class stands for: a class of the spec module, the kind of its
        own name (a class the engine adds there, even one deriving from a kind, is new: the drift
        guard names it); a plugin's spec class, the kind of the nearest base it derives from."""
        if getattr(self.interface, cls.__name__, None) is cls:
            if cls.__name__ in self.homes.spec_bases[1:]:  # the base under an older name (0.7.0's KVCacheSpecBase)
                return self.homes.spec_bases[0]
            return cls.__name__ if cls.__name__ in KINDS_BY_NAME else None
        if cls in self._plugin_classes.values():
            return base_kind(cls, self.interface)
        return None

    def spec_classes(self) -> list[type]:
        """``KVCacheSpec`` and every dataclass subclass of it, transitively, that
        the loaded modules define (ROLE-COVER-1): introspection, not a list."""
        base = next((c for c in (getattr(self.interface, n, None) for n in self.homes.spec_bases)
                     if isinstance(c, type)), None)
        if base is None:
            raise EngineUnavailable(f"{self.name} {self.version}'s {self.homes.interface} defines none of "
                                    f"{', '.join(self.homes.spec_bases)} as a class")
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
        annotations of its spec classes' fields (the declared ``enum_homes`` as a fallback)."""
        if self._engine_enums is None:
            self._engine_enums = self._find_engine_enums()
        return self._engine_enums

    def _find_engine_enums(self) -> dict[str, type[enum.Enum]]:
        found: dict[str, type[enum.Enum]] = {}
        for cls in self.spec_classes():
            for hint in self.field_types(cls).values():
                for candidate in (hint, *typing.get_args(hint)):
                    if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
                        key = self.REF_ENUM_OF_ENGINE.get(candidate.__name__)
                        if key is not None:
                            found.setdefault(key, candidate)
        plain = self._string_valued()
        for key, module, name in self.homes.enum_homes:
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
                ref_type = ref_value_type(kind, f.name)  # type: ignore[arg-type]  # classes hash
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
        for module in self.homes.dtype_tables:
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
            ref_enum = self.ENGINE_ENUMS[name]
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
                and f.name not in ours and f.name not in self.ENGINE_ONLY_VALUES]

    def unsupported_kinds(self) -> Mapping[type[KVCacheSpec], str]:
        out: dict[type[KVCacheSpec], str] = {}
        for k in SPEC_KINDS:
            if self.engine_class(k) is None:
                out[k] = f"{self.name} {self.version} has no {k.__name__}"
            elif extras := self._required_extras(k):
                out[k] = (f"{self.name} {self.version}'s {k.__name__} requires {', '.join(extras)}, which the "
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
                ref_type = ref_value_type(kind, f.name)  # type: ignore[arg-type]  # classes hash
                if ref_type is not None and hints.get(f.name) is str:
                    out.add(ref_type.__name__)
        self._plain = out
        return out
