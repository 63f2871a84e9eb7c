"""The engine protocol: what an adapter offers the conformance laws.

Adapters are thin: they convert specs and call the engine's own operations.
All judgement lives in the laws (:mod:`kvcontract.conformance.contract.laws`). A
third-party adapter is named on the command line as
``package.module:factory``, where ``factory()`` returns an object satisfying
:class:`Engine`; an installed package can also register adapters under a
name through the entry-point group ``kvcontract.engines``.

Two protocols:

- :class:`Engine` (required): specs in and out, merge, uniformity, grouping,
  page size, and the snippets that reproduce a finding with the engine's own
  classes;
- :class:`RoutingEngine` (optional): an adapter whose ``router()`` returns a
  :data:`Router` is checked against chapter DISPATCH; ``router()`` returning
  None (or no such method) skips those clauses with the reason.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from kvcontract.reference import KVCacheSpec, Routing, RoutingRequest


@dataclasses.dataclass(frozen=True)
class EngineGroup:
    """One group as an engine built it, converted back to reference specs.

    ``spec`` is the group's merged spec; an engine that keeps one spec per
    member instead (GROUP-MERGED-1) gives ``member_specs`` and ``spec=None``.
    """

    layer_names: tuple[str, ...]
    spec: KVCacheSpec | None
    member_specs: Mapping[str, KVCacheSpec] | None = None


class EngineUnavailable(Exception):
    """The engine cannot be loaded here (not installed, import failure)."""


@runtime_checkable
class Engine(Protocol):
    """An engine under test, reached through its adapter."""

    name: str
    version: str
    error_type: type[BaseException]
    """The exception type the engine's grouping callers catch (ERROR-TYPE-1)."""
    supports_empty_merge: bool
    """Whether the engine's merge can be called with no spec (ERROR-EMPTY-1)."""

    def unsupported_kinds(self) -> Mapping[type[KVCacheSpec], str]:
        """Reference kinds the engine lacks, with the reason (clauses skip them)."""
        ...

    def unsupported_fields(self, kind: type[KVCacheSpec]) -> Mapping[str, str]:
        """Fields of ``kind`` the engine lacks; generated specs keep their defaults."""
        ...

    def to_engine(self, spec: KVCacheSpec) -> Any: ...

    def from_engine(self, obj: Any) -> KVCacheSpec: ...

    def merge(self, objs: Sequence[Any]) -> Any: ...

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool: ...

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]: ...

    def page_size(self, obj: Any) -> int: ...

    # Repro snippets: Python source that uses the engine's own classes.
    def snippet_imports(self, kinds: Sequence[type[KVCacheSpec]]) -> list[str]: ...

    def render_spec(self, spec: KVCacheSpec) -> str: ...

    def render_merge(self, specs_expr: str) -> str: ...

    def render_is_uniform(self, table_expr: str) -> str: ...

    def render_group_layers(self, table_expr: str) -> str: ...

    def render_group_pairs(self, groups_expr: str) -> str:
        """Source turning the engine's groups into ``[(layer_names, spec), ...]``."""
        ...

    def render_page_size(self, obj_expr: str) -> str:
        """Source computing the engine's page size of the engine object ``obj_expr``."""
        ...


Router = Callable[[RoutingRequest], Routing]
"""Routes one attention invocation (chapter DISPATCH), or raises for an
invocation the engine rejects (DISPATCH-NONCAUSAL-1, DISPATCH-UNIFORM-1)."""


@runtime_checkable
class RoutingEngine(Protocol):
    """An engine whose adapter can route attention invocations (optional).

    ``router()`` returns the engine's router, or None when this engine or
    release cannot route here (the DISPATCH clauses then skip with
    ``router_unavailable()``'s reason). ``router_source()`` is Python source
    lines that define ``ROUTE`` for a repro snippet.
    """

    def router(self) -> Router | None: ...

    def router_unavailable(self) -> str: ...

    def router_source(self) -> list[str]: ...


BUILTIN_ENGINES: dict[str, str] = {
    "reference": "kvcontract.conformance.engines.reference:ReferenceEngine",
    "vllm": "kvcontract.conformance.engines.vllm.engine:VllmEngine",
}
"""Engine name -> ``module:factory``."""

ENTRY_POINT_GROUP = "kvcontract.engines"
"""Installed packages register engines here: ``name = "package.module:factory"``."""


class UnknownEngine(LookupError):
    """No engine of that name."""


def _load_factory(target: str) -> Callable[[], Engine]:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise UnknownEngine(f"engine {target!r}: expected a builtin name or package.module:factory")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownEngine(f"engine {target!r}: cannot import {module_name}: {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise UnknownEngine(f"engine {target!r}: {module_name} has no {attr!r}")
    return factory  # type: ignore[no-any-return]


def installed_engines() -> dict[str, str]:
    """Engines registered by installed packages (entry-point group ``kvcontract.engines``)."""
    found = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found[entry.name] = entry.value
    return found


def engine_names() -> list[str]:
    """Every engine name known here: the builtins, then installed ones."""
    return [*BUILTIN_ENGINES, *(n for n in installed_engines() if n not in BUILTIN_ENGINES)]


SOURCE_SEPARATOR = "@"
"""``NAME@DIR``: engine ``NAME`` loaded from the source tree ``DIR`` (``check --engine-path``)."""


def split_source(name: str) -> tuple[str, str | None]:
    """``"vllm@/src/vllm"`` -> ``("vllm", "/src/vllm")``; a name without a tree -> ``(name, None)``."""
    engine, sep, path = name.partition(SOURCE_SEPARATOR)
    return (engine, path) if sep and path else (name, None)


def load_engine(name: str) -> Engine:
    """The engine called ``name``: a builtin, an installed entry point, or
    ``package.module:factory``; ``NAME@DIR`` loads it from the source tree
    ``DIR`` (its factory takes ``source_path``). (Mutant names resolve in
    :mod:`kvcontract.conformance.engines.registry`, which the command lines use.)

    Raises :class:`UnknownEngine` for a name that is none of these, and
    :class:`EngineUnavailable` when the engine cannot be loaded here.
    """
    name, source = split_source(name)
    target = BUILTIN_ENGINES.get(name) or installed_engines().get(name) or name
    if ":" not in target:
        known = ", ".join(engine_names())
        raise UnknownEngine(f"unknown engine {name!r}; known: {known}, or package.module:factory")
    factory = _load_factory(target)
    if source is None:
        engine = factory()
    else:
        try:
            takes_source = "source_path" in inspect.signature(factory).parameters
        except (TypeError, ValueError):
            takes_source = False
        if not takes_source:
            raise UnknownEngine(f"engine {name!r} cannot be loaded from a source tree "
                                f"({target} takes no source_path)")
        engine = factory(source_path=source)  # type: ignore[call-arg]
    if not isinstance(engine, Engine):
        raise UnknownEngine(f"engine {name!r}: {target} did not return an Engine")
    return engine
