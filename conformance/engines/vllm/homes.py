"""What an engine built on vLLM's spec layer declares: one record per engine, pure data.

vLLM's spec layer (``kv_cache_interface``, grouping, planning) is copied by forks under their
own package name and subclassed by hardware plugins that patch vLLM's grouping at run time. The
adapter (:class:`~kvcontract.conformance.engines.vllm.engine.VllmEngine`) reads everything it
drives from an :class:`EngineDeclaration`, never from a module it imports by name:

- :class:`EngineHomes`: the engine's package and where it keeps each part the adapter drives
  (the spec module, grouping and planning, the cache layout, routing's builder, the dtype
  tables, the enums' fallback homes). :data:`VLLM_HOMES` is vLLM's; a fork's is
  ``VLLM_HOMES.rebased("aphrodite")`` plus what it moved;
- :class:`Plugin`: a plugin's package, the patch modules its platform imports at start-up, the
  registration calls it makes, the modules that need its device (each a named, minimal
  :class:`Stub`) and the modules holding its spec subclasses (mapped to the contract's kinds by
  inheritance);
- :class:`FieldRole`: the role of a field the fork or plugin adds (else ROLE-COVER-1 reports it
  unclassified);
- the engine environment it runs in (:mod:`kvcontract.conformance.engines.environments`) and the
  one documented step that installs it.

This module imports nothing of an engine: the command line reads a declaration (which
environment the workers run in) without loading the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

ROLES = ("layout", "allocation", "capability", "annotation-any", "annotation-common")
"""The roles a declared field can take (the contract's, :mod:`kvcontract.reference.roles`)."""


def _rebase(path: str, old: str, new: str) -> str:
    return new + path[len(old):] if path == old or path.startswith(old + ".") else path


@dataclasses.dataclass(frozen=True)
class EngineHomes:
    """Where an engine keeps what the adapter drives, module by module (the first of a tuple that
    imports and has what is looked for wins: releases moved things)."""

    package: str = "vllm"
    """The engine's top-level package: its version, its source root, its source scan."""
    interface: str = "vllm.v1.kv_cache_interface"
    """The spec classes: a reference kind maps to this module's class of the same name."""
    planning: tuple[str, ...] = ("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils")
    """Where grouping lives: the first that imports and has ``is_kv_cache_spec_uniform``."""
    layout: str = "vllm.v1.kv_cache_layout"
    """Where a release keeps ``KVCacheLayout`` (grouping's ``"LAYOUT"`` config value); a release
    without it plans without a layout."""
    dtype_tables: tuple[str, ...] = ("vllm.utils.torch_utils", "vllm.utils")
    """Where a release keeps ``STR_DTYPE_TO_TORCH_DTYPE``, its cache-dtype-name table."""
    enum_homes: tuple[tuple[str, str, str], ...] = (
        ("KVQuantMode", "vllm.v1.kv_cache_interface", "KVQuantMode"),
        ("SparseCacheRole", "vllm.v1.kv_cache_interface", "SparseCacheRole"),
        ("MambaType", "vllm.v1.attention.backends.registry", "MambaAttentionBackendEnum"),
    )
    """Reference value type -> where the engine defines its enum: only a fallback (the enums a
    release uses are read from its spec classes' field annotations)."""
    spec_bases: tuple[str, ...] = ("KVCacheSpec", "KVCacheSpecBase")
    """The base spec class's names in :attr:`interface` (0.7.x: ``KVCacheSpecBase``)."""
    config_class: str = "vllm.config.VllmConfig"
    """The engine's config class (what its grouping and planning take), named in repros."""
    routing_builders: tuple[str, ...] = ("vllm.model_executor.layers.attention.mla_attention",
                                         "vllm.v1.attention.backends.mla.common")
    """Where a release keeps ``MLACommonMetadataBuilder`` (chapter DISPATCH)."""
    routing_metadata: tuple[str, ...] = ("vllm.v1.attention.backend", "vllm.v1.attention.backends.utils")
    """Where a release keeps ``CommonAttentionMetadata``."""
    pinned_flags: tuple[str, ...] = ("vllm.utils.torch_utils", "vllm.v1.attention.backends.utils", "vllm.utils")
    """Modules whose ``PIN_MEMORY`` / ``is_pin_memory_available`` the router turns off on the CPU."""
    logging_env: str = "VLLM_LOGGING_LEVEL"
    """The environment variable that sets the engine's log level."""

    def rebased(self, package: str, **changes: object) -> EngineHomes:
        """These homes under another top-level package (a fork's copy), with ``changes``."""
        old = self.package

        def move(value: object) -> object:
            if isinstance(value, str):
                return _rebase(value, old, package)
            if isinstance(value, tuple):
                return tuple(move(v) for v in value)
            return value

        moved = {f.name: move(getattr(self, f.name)) for f in dataclasses.fields(self)
                 if f.name not in ("package", "logging_env")}
        return dataclasses.replace(self, package=package, **{**moved, **changes})  # type: ignore[arg-type]

    def modules(self) -> tuple[str, ...]:
        """Every module path named here (each must lie under :attr:`package`)."""
        out: list[str] = [self.interface, *self.planning, self.layout, *self.dtype_tables,
                          *(m for _, m, _ in self.enum_homes), self.config_class.rpartition(".")[0],
                          *self.routing_builders, *self.routing_metadata, *self.pinned_flags]
        return tuple(dict.fromkeys(out))


@dataclasses.dataclass(frozen=True)
class Stub:
    """A module that needs the plugin's device, replaced by a minimal stand-in while the plugin
    loads (only when the real one does not import): the attributes it must offer, each a short
    description the stand-in is built from (``"module"``, ``"class"``, ``"function"``,
    ``"false"``, ``"none"`` or ``"int:N"`` / ``"str:TEXT"``), and why the kit needs it."""

    module: str
    why: str
    attributes: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Call:
    """A start-up call: ``module:function`` with positional ``args`` (plain values)."""

    target: str
    args: tuple[object, ...] = ()

    def source(self) -> str:
        """The call as Python source (for a repro)."""
        module, _, function = self.target.partition(":")
        return f"__import__({module!r}, fromlist=['x']).{function}({', '.join(map(repr, self.args))})"


@dataclasses.dataclass(frozen=True)
class Plugin:
    """A hardware plugin that subclasses the base engine's specs and patches its grouping."""

    package: str
    """The plugin's top-level package (its files are the engine's source too)."""
    patches: tuple[str, ...] = ()
    """Modules its platform imports at start-up to patch the base engine, in order."""
    setup: tuple[Call, ...] = ()
    """Calls the engine and its platform make at start-up, in order (spec registration)."""
    spec_modules: tuple[str, ...] = ()
    """Modules defining its spec classes: each maps to the contract kind of the nearest base
    engine class it derives from, and replaces that class where the adapter builds the kind."""
    stubs: tuple[Stub, ...] = ()
    """Modules that need its device, stood in for on the CPU (each named, minimal)."""


@dataclasses.dataclass(frozen=True)
class FieldRole:
    """The role of a field a fork or plugin adds to a kind (by the engine class that declares it):
    classified, the laws exercise it by its role (ROLE-COVER-1's role check)."""

    kind: str
    """The contract kind whose engine class carries the field (``MLAAttentionSpec``)."""
    field: str
    role: str
    """One of :data:`ROLES`."""
    values: tuple[object, ...]
    """Values the engine's own code gives it (the first two are compared; at least two)."""
    relied_on_by: str
    """The engine code that reads it (``path:line``), as the contract's own fields cite."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"{self.kind}.{self.field}: role {self.role!r} is none of {', '.join(ROLES)}")
        if len(self.values) < 2:
            raise ValueError(f"{self.kind}.{self.field}: a declared field needs two values to compare")


@dataclasses.dataclass(frozen=True)
class EngineDeclaration:
    """One engine built on vLLM's spec layer, as the adapter drives it."""

    name: str
    """The engine's name on the command line (``--engine NAME``)."""
    distribution: str | None
    """The installed distribution it comes from (bundled expectations are keyed on it)."""
    homes: EngineHomes = EngineHomes()
    plugin: Plugin | None = None
    field_roles: tuple[FieldRole, ...] = ()
    environment: str | None = None
    """The engine environment its workers run in (None: the kit's own interpreter)."""
    install: str = ""
    """The one documented step that installs it (said when it is missing)."""
    version_from: str = ""
    """Which package's version is the engine's (default: the plugin's, else the homes' package)."""
    base: str = ""
    """What it derives from, in words (``vLLM 0.29.0 with later picks``), for ``kvcontract engines``."""

    @property
    def version_package(self) -> str:
        return self.version_from or (self.plugin.package if self.plugin else self.homes.package)


VLLM_HOMES = EngineHomes()
"""Where vLLM keeps things (0.7.0 to 0.34.0: the tuples list where each release has them)."""
VLLM = EngineDeclaration(name="vllm", distribution="vllm", homes=VLLM_HOMES,
                         install="bash scripts/setup.sh (vLLM 0.34.0; another release: "
                                 "bash scripts/install-vllm.sh VERSION .venv/bin/python)")
"""vLLM itself: the default declaration."""
