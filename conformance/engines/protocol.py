"""The engine protocol: what an adapter offers the conformance laws.

Adapters are thin: they convert specs and call the engine's own operations.
All judgement lives in the laws (:mod:`kvcontract.conformance.contract.laws`). A
third-party adapter is named on the command line as
``package.module:factory``, where ``factory()`` returns an object satisfying
:class:`Engine`; an installed package can also register adapters under a
name through the entry-point group ``kvcontract.engines``.

:class:`Engine` (required): specs in and out, merge, uniformity, grouping,
page size, and the snippets that reproduce a finding with the engine's own
classes. Optional capabilities, each a protocol of its own that the kit checks
with ``isinstance`` (an adapter declares one by implementing it):

- :class:`RoutingEngine`: an adapter whose ``router()`` returns a :data:`Router`
  is checked against chapter DISPATCH; ``router()`` returning None (or no such
  method) skips those clauses with the reason;
- :class:`GroupingAvailability`: ``grouping_unavailable()`` says why the engine's
  grouping cannot be driven here (the GROUP clauses skip with it); likewise
  :class:`MergeAvailability` (``merge_unavailable()``: a release whose specs have no merge)
  and :class:`UniformAvailability`;
- :class:`ValueDomains`: ``value_domains()``, the reference values the engine
  accepts per value type (what generated specs draw from); with
  :class:`ValueIntrospectable` also the engine's own values (ROLE-COVER-1);
- :class:`ProducibleDomain`: ``producible_fields()``, per engine kind the fields the engine's
  own code sets (with the call sites and literal values): check's default domain pins the
  others at their defaults (``check --domain constructor`` draws the whole constructor domain);
- :class:`Introspectable`: ``spec_classes()``, the engine's spec classes found by
  introspection (the drift guard ROLE-COVER-1, ``kvcontract coverage``);
- :class:`KindMapping`: ``kind_of(cls)``, the contract kind an engine class stands for (a
  plugin's subclass: its base's kind); :class:`DeclaredRoles`: ``declared_roles()``, the roles
  of fields the engine adds (ROLE-COVER-1 classifies them and judges them by their role);
- :class:`SourceInfo`: ``source_info()``, where a checked source tree comes from
  (the report's ``engine_source``);
- :class:`Locatable`: ``source_roots()`` and ``deciders(outcome)``, what traces a
  finding to the engine line that causes it (a defect);
- :class:`ModelTables`: ``model_tables()``, the layer tables the engine builds for real
  models, fed to the laws first (what makes a defect reachable);
- :class:`DistributionIdentity`: ``distribution``, the installed distribution the
  engine was loaded from; bundled expectations are keyed on it and the version,
  never on the display ``name`` (an engine without it gets none).

The name an engine was loaded by (``NAME``, ``NAME@DIR``, ``package.module:factory``,
``mutant:<key>``) is recorded at loading: :func:`engine_ref` answers it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
import weakref
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


@dataclasses.dataclass(frozen=True)
class EngineTensor:
    """One tensor of an engine's plan: the layers it places in the backing allocation of
    ``size_bytes``; layer ``l``'s page of block ``b`` starts at ``offset + l * layer_stride
    + b * block_stride`` (chapter PLAN)."""

    layer_names: tuple[str, ...]
    size_bytes: int
    offset: int | None = None
    layer_stride: int | None = None
    block_stride: int | None = None
    """Placement; None where the engine release does not state it (not judged then)."""


@dataclasses.dataclass(frozen=True)
class EnginePlan:
    """An engine's plan of a layer table within a memory budget (chapter PLAN)."""

    groups: tuple[EngineGroup, ...]
    num_blocks: int
    tensors: tuple[EngineTensor, ...]


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
class FreshObjects(Protocol):
    """An adapter whose ``to_engine`` builds a new engine object from the spec's field values on
    every call and keeps no reference to the spec: the kit hands it its own spec, not a copy,
    so the adapter can remember a conversion per spec object. Any other adapter is given a copy,
    so that an engine cannot write into the kit's examples (MERGE-PURE-1 is its finding)."""

    def builds_fresh_objects(self) -> bool: ...


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


@runtime_checkable
class GroupingAvailability(Protocol):
    """An adapter that knows whether its engine's grouping can be driven here (optional).

    ``grouping_unavailable()`` returns the reason it cannot, or None; the GROUP
    clauses skip with that reason. Without it, grouping is taken as drivable.
    """

    def grouping_unavailable(self) -> str | None: ...


@runtime_checkable
class MergeAvailability(Protocol):
    """An adapter that knows whether its engine's spec merge exists here (optional).

    ``merge_unavailable()`` returns the reason it does not (a release whose spec classes have
    no ``merge``), or None; the laws that merge skip with that reason rather than judge the
    missing method as the engine's answer.
    """

    def merge_unavailable(self) -> str | None: ...


@runtime_checkable
class UniformAvailability(Protocol):
    """An adapter that knows whether its engine's uniformity test can be driven here (optional).

    ``uniform_unavailable()`` returns the reason it cannot (a release without the function), or
    None; the UNIFORM clauses skip with that reason rather than judge the adapter's own refusal.
    """

    def uniform_unavailable(self) -> str | None: ...


@runtime_checkable
class Planning(Protocol):
    """An adapter that drives its engine's planner (optional; chapter PLAN).

    ``plan_layers`` plans ``objs_by_layer`` within ``memory_bytes``, with the engine's
    hybrid manager on or off, in a layer-outermost or block-outermost cache layout;
    ``planning_unavailable()`` says why the planner cannot be driven here (None: it can).
    ``render_plan`` is snippet source calling the planner (``block_outermost_expr``: the
    layout, an expression of a bool), ``render_plan_view`` source turning its result into
    ``(num_blocks, [(layer_names, size, offset, layer_stride, block_stride), ...],
    [(layer_names, spec), ...])``. An adapter whose engine cannot plan block-outermost here
    may say why with ``block_outermost_unavailable()`` (optional; PLAN-MATCH-1 then judges
    the layer-outermost layout only).
    """

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *,
                    hybrid: bool = True, block_outermost: bool = False) -> EnginePlan: ...

    def planning_unavailable(self) -> str | None: ...

    def render_plan(self, table_expr: str, memory_expr: str, hybrid_expr: str,
                    block_outermost_expr: str = "False") -> str: ...

    def render_plan_view(self, plan_expr: str) -> str: ...


@runtime_checkable
class ValueDomains(Protocol):
    """An adapter that lists the reference values its engine accepts (optional);
    without it, generated specs draw every reference value."""

    def value_domains(self) -> Mapping[str, Sequence[Any]]:
        """Reference values per value type (a key of ``strategies.ENUM_TYPES``)."""
        ...


@runtime_checkable
class ValueIntrospectable(ValueDomains, Protocol):
    """An adapter that can list the values its engine accepts for enumerated types."""

    def engine_value_domains(self) -> Mapping[type, Sequence[Any]]:
        """The engine's own values per engine type (e.g. ``torch.dtype``)."""
        ...

    def unmapped_values(self) -> Sequence[tuple[str, str]]:
        """``(engine type name, value name)`` the engine accepts and the reference lacks."""
        ...


@runtime_checkable
class ProducibleDomain(Protocol):
    """An adapter that knows which spec fields its engine's own code sets (optional); without
    it, generated specs draw the whole constructor domain (every field, every value).

    ``producible_fields()`` maps an engine kind's class name to the fields some call site of
    the engine sets on that kind, each to a record with ``sites`` (where: ``path:line``, and the
    value when it is a literal), ``literals`` (the values passed, when every site passes a
    literal; else None) and ``always_set`` (every construction passes it, so its default is
    never built). A reference field its kind's entry lacks is kept at its default; the key ``"*"``
    (a call whose arguments cannot all be read) keeps every field of that kind."""

    def producible_fields(self) -> Mapping[str, Mapping[str, Any]]: ...


@runtime_checkable
class Introspectable(Protocol):
    """An adapter that can list its engine's spec classes (ROLE-COVER-1)."""

    def spec_classes(self) -> Sequence[type]:
        """Every spec class the engine defines: its base spec class and every
        dataclass subclass of it, transitively, found by introspection."""
        ...


@runtime_checkable
class KindMapping(Protocol):
    """An adapter that says which contract kind each of its engine's classes stands for (optional):
    a plugin's subclass of a kind stands for that kind (by inheritance, not by its name). Without
    it, an engine class stands for the kind of its own name."""

    def kind_of(self, cls: type) -> str | None:
        """The contract kind ``cls`` stands for, or None (a base, a container, an unknown class)."""
        ...


@runtime_checkable
class DeclaredRoles(Protocol):
    """An adapter that declares the roles of fields its engine adds to the contract's kinds
    (optional): each record has ``kind``, ``field``, ``role`` (``layout``, ``allocation``,
    ``capability``, ``annotation-any`` or ``annotation-common``), ``values`` (two or more the
    engine's code gives it) and ``relied_on_by``. A declared field is classified (ROLE-COVER-1),
    and judged by its role's merge rule."""

    def declared_roles(self) -> Sequence[Any]: ...


@runtime_checkable
class SourceInfo(Protocol):
    """An adapter that can say where the checked engine's code comes from (optional)."""

    def source_info(self) -> dict[str, str] | None:
        """For a source tree, its ``path``, ``describe`` and ``dirty`` (the report's
        ``engine_source``); None when the engine is not loaded from one."""
        ...


@runtime_checkable
class DistributionIdentity(Protocol):
    """An adapter that declares which installed distribution its engine comes from (optional).

    Bundled expectation files (``conformance/xfails/<distribution>-<version>.toml``)
    are found by ``(distribution, version)``: an engine that merely calls itself
    ``vllm`` gets none of vLLM's. None: no known distribution (no bundled file).
    """

    @property
    def distribution(self) -> str | None: ...


@runtime_checkable
class Locatable(Protocol):
    """An adapter that says where its engine's code is and what decides an answer (optional).

    A finding is traced to the engine code that causes it
    (:mod:`kvcontract.conformance.run.locate`): frames in ``source_roots()`` are the
    engine's; ``deciders(outcome)`` names the engine functions whose answer is judged by a
    signature's outcome (``"accepted"``: the ``merge`` that accepted). Without it, the
    adapter's own module is the engine and ``merge`` decides every wrong answer.
    """

    def source_roots(self) -> Sequence[str]:
        """The directories holding the engine's own code (a package's directory)."""
        ...

    def deciders(self, outcome: str) -> Sequence[str]:
        """Names of the engine functions that decide a signature's ``outcome``."""
        ...


@runtime_checkable
class ModelTables(Protocol):
    """An adapter that ships the layer tables its engine builds for real models (optional).

    Each table is what the engine's own spec-building code produces for one model family
    (``name``, then ``(layer name, spec)`` pairs). ``check`` feeds them to the laws before
    anything drawn; a defect one of them shows is *reachable*, the others *latent*.
    """

    def model_tables(self) -> Sequence[tuple[str, Sequence[tuple[str, KVCacheSpec]]]]:
        """The release's real model tables (empty when none ship for it)."""
        ...


BUILTIN_ENGINES: dict[str, str] = {
    "reference": "kvcontract.conformance.engines.reference:ReferenceEngine",
    "vllm": "kvcontract.conformance.engines.vllm.engine:VllmEngine",
    "aphrodite": "kvcontract.conformance.engines.aphrodite:factory",
    "vllm-ascend": "kvcontract.conformance.engines.vllm_ascend:factory",
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


_LOADED_BY: dict[int, tuple[Callable[[], Any], str]] = {}
"""``id(engine)`` -> (a reference to the engine, the name it was loaded by)."""


def remember_ref(engine: Any, name: str) -> None:
    """Record ``name`` as the name that loads ``engine`` (:func:`engine_ref`). The
    loaders call it: :func:`load_engine` and the command lines' ``resolve_engine``."""
    key = id(engine)
    try:
        ref: Callable[[], Any] = weakref.ref(engine, lambda _ref: _LOADED_BY.pop(key, None))
    except TypeError:  # not weakly referable: kept for the process's life
        def ref() -> Any:
            return engine
    _LOADED_BY[key] = (ref, name)


def engine_ref(engine: Engine) -> str:
    """The name that loads ``engine`` again (``resolve_engine``): the one it was loaded
    by (:func:`remember_ref`), else its ``name``."""
    held = _LOADED_BY.get(id(engine))
    return held[1] if held is not None and held[0]() is engine else engine.name


def check_engine_name(name: str) -> None:
    """Raise :class:`UnknownEngine` when ``name`` cannot name an engine (no builtin, no installed
    entry point, not ``package.module:factory``), without loading anything: a command line
    rejects it before it starts a worker."""
    engine, _source = split_source(name)
    target = BUILTIN_ENGINES.get(engine) or installed_engines().get(engine) or engine
    if ":" not in target:
        known = ", ".join(engine_names())
        raise UnknownEngine(f"unknown engine {engine!r}; known: {known}, or package.module:factory")


def load_engine(name: str) -> Engine:
    """The engine called ``name``: a builtin, an installed entry point, or
    ``package.module:factory``; ``NAME@DIR`` loads it from the source tree
    ``DIR`` (its factory takes ``source_path``). (Mutant names resolve in
    :mod:`kvcontract.conformance.engines.registry`, which the command lines use.)

    Raises :class:`UnknownEngine` for a name that is none of these, and
    :class:`EngineUnavailable` when the engine cannot be loaded here.
    """
    loaded_by = name
    check_engine_name(name)
    name, source = split_source(name)
    target = BUILTIN_ENGINES.get(name) or installed_engines().get(name) or name
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
    remember_ref(engine, loaded_by)
    return engine
