"""Loading an engine built on vLLM's spec layer from its declaration (:mod:`.homes`): its
package, a plugin's stand-ins for device modules, its patch modules and registrations, the
plugin's spec classes mapped to the contract's kinds by inheritance.

What cannot import is :class:`~kvcontract.conformance.engines.protocol.EngineUnavailable`
naming the module that failed and, for a missing one, the package to install (a command line
turns it into one usage line, exit 2), never a report of error records.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any

from kvcontract.conformance.engines import environments
from kvcontract.conformance.engines.protocol import EngineUnavailable
from kvcontract.conformance.engines.vllm.homes import EngineDeclaration, Plugin, Stub
from kvcontract.reference import KINDS_BY_NAME


def import_failure(module: str, exc: BaseException) -> str:
    """What stopped ``import module``, in words: a missing module named as such (with the
    distribution to install when it is a third-party one), anything else as raised."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        missing = exc.name
        if missing == module or module.startswith(missing + "."):
            return f"{module} does not exist here (no module named {missing!r})"
        top = missing.partition(".")[0]
        return (f"importing {module} failed: no module named {missing!r} (the package providing "
                f"{top!r} is not installed)")
    return f"importing {module} failed: {type(exc).__name__}: {exc}"


class ModuleMissing(EngineUnavailable):
    """The engine does not import here because a module it imports is missing (``missing``)."""

    def __init__(self, message: str, missing: str) -> None:
        super().__init__(message)
        self.missing = missing


def missing_module(module: str, exc: BaseException) -> str | None:
    """The module whose absence stopped ``import module`` (itself excepted: an absent module is
    no missing package), or None."""
    if isinstance(exc, ModuleNotFoundError) and exc.name and not (
            exc.name == module or module.startswith(exc.name + ".")):
        return exc.name
    return None


def try_import(module: str) -> tuple[types.ModuleType | None, str]:
    """``(module, "")``, or ``(None, why)`` (:func:`import_failure`)."""
    found, why, _missing = _try_import(module)
    return found, why


def _try_import(module: str) -> tuple[types.ModuleType | None, str, str | None]:
    try:
        return importlib.import_module(module), "", None
    except Exception as exc:  # noqa: BLE001 - any failure is reported, by what it was
        return None, import_failure(module, exc), missing_module(module, exc)


def _stand_in(stub: Stub) -> types.ModuleType:
    """A minimal module offering exactly the attributes the stub names."""
    module = types.ModuleType(stub.module, f"kvcontract stand-in: {stub.why}")
    module.__kvcontract_stub__ = True  # type: ignore[attr-defined]
    # a spec, as every imported module has one (``importlib.util.find_spec`` reads it); no
    # distribution ships it, so a check of the installed package still finds none
    module.__spec__ = importlib.machinery.ModuleSpec(stub.module, None, origin="kvcontract stand-in")
    for name, what in stub.attributes.items():
        value: Any
        if what == "module":
            value = types.ModuleType(f"{stub.module}.{name}")
        elif what == "class":
            value = type(name, (), {"__module__": stub.module})
        elif what == "function":
            def value(*_args: Any, **_kwargs: Any) -> None:
                return None
        elif what == "false":
            value = False
        elif what == "none":
            value = None
        elif what.startswith("int:"):
            value = int(what.removeprefix("int:"))
        elif what.startswith("str:"):
            value = what.removeprefix("str:")
        else:
            raise ValueError(f"stub {stub.module}.{name}: unknown attribute kind {what!r}")
        setattr(module, name, value)
    return module


def install_stubs(stubs: Sequence[Stub]) -> list[str]:
    """Stand in for each stub's module that does not import here; the names stood in for."""
    used = []
    for stub in stubs:
        if stub.module in sys.modules:
            continue
        found, _why = try_import(stub.module)
        if found is not None:
            continue
        parent, _, leaf = stub.module.rpartition(".")
        module = _stand_in(stub)
        sys.modules[stub.module] = module
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], leaf, module)
        used.append(stub.module)
    return used


def _import_required(module: str, declaration: EngineDeclaration) -> types.ModuleType:
    found, why, missing = _try_import(module)
    if found is None:
        install = f"; install it with: {declaration.install}" if declaration.install else ""
        message = f"{declaration.name} is not importable here: {why}{install}"
        raise ModuleMissing(message, missing) if missing else EngineUnavailable(message)
    return found


def use_environment(declaration: EngineDeclaration) -> None:
    """Put the declared engine environment's folders first on ``sys.path`` where it is installed
    (an in-process load: ``coverage``, ``plan``, the pytest plugin, a repro; the check's workers
    have them on their path already). Not installed: the import that follows names what is missing."""
    if declaration.environment is None:
        return
    found = environments.state(declaration.environment)
    if found is None:
        return
    ahead = [str(p) for p in found["paths"] if str(p) not in sys.path]
    sys.path[:0] = ahead
    if ahead:
        importlib.invalidate_caches()


@dataclasses.dataclass
class Loaded:
    """What loading an engine found: its modules, and a plugin's stand-ins and patches."""

    torch: Any
    package: types.ModuleType
    interface: types.ModuleType
    plugin_package: types.ModuleType | None = None
    stubs: list[str] = dataclasses.field(default_factory=list)
    patches: list[str] = dataclasses.field(default_factory=list)


def load(declaration: EngineDeclaration) -> Loaded:
    """Import the engine (and its plugin, patched in as its platform does), or raise
    :class:`EngineUnavailable` naming what did not import."""
    homes, plugin = declaration.homes, declaration.plugin
    use_environment(declaration)
    torch = _import_required("torch", declaration)
    package = _import_required(homes.package, declaration)
    loaded = Loaded(torch, package, package)
    if plugin is not None:
        loaded.stubs = install_stubs(plugin.stubs)
        loaded.plugin_package = _import_required(plugin.package, declaration)
        load_plugin(plugin, declaration, loaded)
    loaded.interface = _import_required(homes.interface, declaration)
    return loaded


def load_plugin(plugin: Plugin, declaration: EngineDeclaration, loaded: Loaded) -> None:
    """The plugin's patch modules imported and its registrations called, in declared order."""
    for module in plugin.patches:
        _import_required(module, declaration)
        loaded.patches.append(module)
    for call in plugin.setup:
        module, _, function = call.target.partition(":")
        target = getattr(_import_required(module, declaration), function, None)
        if not callable(target):
            raise EngineUnavailable(f"{declaration.name}: {module} has no function {function!r} ({call.target})")
        try:
            target(*call.args)
        except Exception as exc:  # noqa: BLE001 - a registration that fails here: not drivable
            raise EngineUnavailable(f"{declaration.name}: {call.target}{call.args} raised "
                                    f"{type(exc).__name__}: {exc}") from None


def plugin_classes(plugin: Plugin, interface: types.ModuleType) -> dict[str, type]:
    """Contract kind name -> the plugin class that replaces the base engine's class for it: each
    dataclass of the plugin's spec modules that derives from a class of ``interface`` named as a
    contract kind (the nearest such base decides). Two plugin classes for one kind is a
    declaration to make, not a guess."""
    out: dict[str, type] = {}
    for module_name in plugin.spec_modules:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if not (isinstance(value, type) and dataclasses.is_dataclass(value)
                    and value.__module__ == module_name):
                continue
            kind = base_kind(value, interface)
            if kind is None:
                continue
            if kind in out and out[kind] is not value:
                raise EngineUnavailable(f"{module_name}: both {out[kind].__name__} and {value.__name__} derive "
                                        f"from {kind}; declare which one the plugin builds")
            out[kind] = value
    return out


def base_kind(cls: type, interface: types.ModuleType) -> str | None:
    """The contract kind of ``cls``: that of the nearest class in its MRO that ``interface``
    defines under a contract kind's name (its own for the base engine's classes)."""
    for klass in cls.__mro__:
        name = klass.__name__
        if name in KINDS_BY_NAME and getattr(interface, name, None) is klass:
            return name
    return None


def describe_stubs(stubs: Sequence[Stub], used: Sequence[str]) -> Mapping[str, str]:
    """Module -> why, for the stand-ins in use (``kvcontract engines`` and the report's log)."""
    return {s.module: s.why for s in stubs if s.module in used}
