"""Reference specs to a vLLM release's objects and back, value by value (torch dtypes,
the release's enums, or plain strings where a release holds one), and which fields of
a kind the release cannot be given or read back."""

from __future__ import annotations

import dataclasses
import enum
import sys
import typing
from collections.abc import Mapping
from typing import Any

from kvcontract.conformance.engines.vllm.discovery import REF_ENUMS, VllmDiscovery, ref_value_type
from kvcontract.reference import KINDS_BY_NAME, KVCacheSpec, KVDtype, SparseCacheRole


class UnmappableResult(TypeError):
    """vLLM returned an object with no reference counterpart."""


class VllmConversion(VllmDiscovery):
    """Converting specs (the second layer of :class:`~kvcontract.conformance.engines.vllm.engine.VllmEngine`)."""

    _unsupported: dict[type, dict[str, str]]
    _not_read_back: dict[type, frozenset[str]]
    """Per kind, the fields the release derives without effect (see _derived_without_effect)."""

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
        missing = {f.name: f"{self.name} {self.version}'s {kind.__name__} has no field {f.name}"
                   for f in dataclasses.fields(kind) if f.name not in have}
        hints = self.field_types(cls)
        enums = self.engine_enums()
        for f in dataclasses.fields(kind):
            ref_type = ref_value_type(kind, f.name)  # type: ignore[arg-type]  # classes hash
            if f.name in missing or ref_type is None:
                continue
            hint = hints.get(f.name)
            if hint is str or ref_type.__name__ in enums and enums[ref_type.__name__] in (hint, *typing.get_args(hint)):
                continue
            missing[f.name] = (f"{self.name} {self.version}'s {kind.__name__}.{f.name} is "
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
                out[f.name] = (f"{self.name} {self.version}'s {kind.__name__} derives {f.name}="
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

    def _to_value(self, value: Any, hint: Any = None) -> Any:
        """A reference value as the engine field annotated ``hint`` holds it."""
        if isinstance(value, KVDtype):
            return getattr(self.torch, value.type_name)
        if isinstance(value, enum.Enum) and type(value).__name__ in REF_ENUMS:
            if hint is str:
                return value.value
            engine_enum = self.engine_enums().get(type(value).__name__)
            if engine_enum is None:
                raise UnmappableResult(f"{self.name} {self.version} has no enum for {type(value).__name__}")
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
            ref_enum = self.ENGINE_ENUMS.get(type(value).__name__)
            return value if ref_enum is None else ref_enum[value.name]
        if isinstance(value, str) and isinstance(reference_default, enum.Enum):
            try:  # a release that holds the value as a plain string (MambaSpec.mamba_type < 0.28)
                return type(reference_default)(value)
            except ValueError:
                return value
        if isinstance(value, tuple | list):
            return tuple(self._from_value(None, v) for v in value)
        return value

    def builds_fresh_objects(self) -> bool:
        """:class:`~kvcontract.conformance.engines.protocol.FreshObjects`: :meth:`to_engine`
        constructs a vLLM object from the spec's (immutable) field values."""
        return True

    def to_engine(self, spec: KVCacheSpec) -> Any:
        """A new engine object for ``spec`` (new on every call: the engine may write into it).
        It is constructed once per spec object; later calls get a copy of that object's
        attributes (a check converts the same spec some 60,000 times; constructing ran vLLM's
        validation each time). While a tracer runs (a finding located), each is constructed, so
        the engine code a conversion runs is traced as it was found."""
        cls = self.engine_class(type(spec))
        if cls is None:
            raise UnmappableResult(f"{self.name} {self.version} has no {type(spec).__name__}")
        # Keyed by the spec object, not its value: an equal spec whose values are other objects
        # reaches the engine with those objects (an engine comparing with ``is`` tells them
        # apart). The entry holds the spec, so its id stays its own.
        cache: dict[int, tuple[KVCacheSpec, dict[str, Any], Any]] = self.__dict__.setdefault("_to_engine", {})
        hit = cache.get(id(spec))
        if hit is not None and hit[0] is spec:
            if hit[2] is None or sys.gettrace() is not None:
                return cls(**hit[1])
            return _copy(hit[2])
        kwargs = self._engine_kwargs(cls, spec)
        obj = cls(**kwargs)
        if len(cache) >= 1 << 15:
            cache.clear()
        cache[id(spec)] = (spec, kwargs, _copy(obj) if _copyable(cls, obj) else None)  # before the engine sees it
        return obj

    def _engine_kwargs(self, cls: type, spec: KVCacheSpec) -> dict[str, Any]:
        have = {f.name for f in dataclasses.fields(cls) if f.init}
        hints = self.field_types(cls)
        kwargs = {f.name: self._to_value(getattr(spec, f.name), hints.get(f.name))
                  for f in dataclasses.fields(spec) if f.name in have}
        for name, value in self.ENGINE_ONLY_VALUES.items():
            if name in have and name not in kwargs:
                kwargs[name] = value
        return kwargs

    def from_engine(self, obj: Any) -> KVCacheSpec:
        # the contract kind of an engine class: by inheritance (a plugin's subclass is its base's kind)
        kinds: dict[type, type[KVCacheSpec] | None] = self.__dict__.setdefault("_kinds", {})
        if type(obj) not in kinds:
            name = self.kind_of(type(obj))
            kinds[type(obj)] = KINDS_BY_NAME.get(name) if name is not None else None
        kind = kinds[type(obj)]
        if kind is None:
            raise UnmappableResult(f"{self.name} returned a {type(obj).__name__}, not a reference kind")
        # the fields to read back, per engine class: those it has, less those not read back
        readable: dict[type, tuple[tuple[str, Any], ...]] = self.__dict__.setdefault("_readable", {})
        fields = readable.get(type(obj))
        if fields is None:
            self.unsupported_fields(kind)  # finds the fields not to read back, once per kind
            ignored = self._not_read_back.get(kind, frozenset())
            fields = readable[type(obj)] = tuple((f.name, f.default) for f in dataclasses.fields(kind)
                                                 if hasattr(obj, f.name) and f.name not in ignored)
        values = [getattr(obj, name) for name, _ in fields]
        padded = getattr(obj, "page_size_padded", None)
        key = _answer_key(type(obj), values, padded)
        read: dict[tuple[Any, ...], KVCacheSpec] = self.__dict__.setdefault("_read_back", {})
        if key is not None and key in read:
            return read[key]
        spec = kind(**{name: self._from_value(default, value) for (name, default), value in zip(fields, values,
                                                                                                 strict=True)})
        # MLA pages: vLLM stores the alignment padding it derived; so does the model.
        if padded != getattr(spec, "page_size_padded", None):
            object.__setattr__(spec, "page_size_padded", padded)
        if key is not None:
            if len(read) >= 1 << 15:
                read.clear()
            read[key] = spec
        return spec


def _copyable(cls: type, obj: Any) -> bool:
    """Whether ``obj`` is all in its ``__dict__`` (no slots on its class), so :func:`_copy` is it."""
    return type(obj) is cls and isinstance(getattr(obj, "__dict__", None), dict) \
        and not any("__slots__" in vars(k) for k in cls.__mro__[:-1])


def _copy(obj: Any) -> Any:
    """A new object of ``obj``'s class with its attributes (shallow: they are immutable values)."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


_KEYED = (int, bool, str, type(None))
"""Field value types an answer's key holds as they are (with their type: ``1`` and ``True``
read back differently)."""


def _answer_key(cls: type, values: list[Any], padded: Any) -> tuple[Any, ...] | None:
    """A read-back answer by value, type by type (a dtype and an enum member are keyed by
    themselves); None where a value is of any other type (a list, a symbolic value) or while
    CrossHair traces, which is then read back afresh."""
    tracers = sys.modules.get("crosshair.tracers")  # loaded only by a symbolic search
    if tracers is not None and tracers.is_tracing():
        return None  # a symbolic value reads as its plain type there, and hashing it would realize it
    key: list[Any] = [cls]
    for v in (padded, *values):
        t = type(v)
        if t is float:
            key.append((t, repr(v)))  # -0.0 and nan as themselves
        elif t in _KEYED or isinstance(v, enum.Enum) or t.__module__ == "torch":
            key.append((t, v))
        else:
            return None
    return tuple(key)
