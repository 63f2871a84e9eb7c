"""Engines named by their declaration (issue 41): homes as data, plugins' stand-ins and kinds by
inheritance, declared field roles, engine environments the workers run in. Fast: no vLLM needed
(the stand-in engines are plain modules made here)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from kvcontract.conformance.contract import surface
from kvcontract.conformance.engines import environments
from kvcontract.conformance.engines.declared import DECLARED_ENGINES, declaration_of, engine_env
from kvcontract.conformance.engines.protocol import BUILTIN_ENGINES, EngineUnavailable
from kvcontract.conformance.engines.vllm import loading
from kvcontract.conformance.engines.vllm.homes import (
    VLLM_HOMES,
    Call,
    EngineDeclaration,
    FieldRole,
    Plugin,
    Stub,
)

ROOT = Path(__file__).resolve().parent.parent


def test_a_forks_homes_are_vllms_under_its_package() -> None:
    homes = VLLM_HOMES.rebased("aphrodite", config_class="aphrodite.config.AphroditeConfig")
    assert homes.package == "aphrodite" and homes.logging_env == VLLM_HOMES.logging_env
    assert homes.interface == "aphrodite.v1.kv_cache_interface"
    assert homes.planning == ("aphrodite.v1.core.kv_cache_planning", "aphrodite.v1.core.kv_cache_utils")
    assert all(m.startswith("aphrodite.") for m in homes.modules())
    assert not any(m.startswith("vllm") for m in homes.modules())
    assert homes.enum_homes[2] == ("MambaType", "aphrodite.v1.attention.backends.registry",
                                   "MambaAttentionBackendEnum")


def test_every_declared_engine_is_a_builtin_with_a_light_declaration() -> None:
    """The command line reads a declaration without importing an engine."""
    for name in DECLARED_ENGINES:
        declaration = declaration_of(name)
        assert declaration is not None and declaration.name == name and name in BUILTIN_ENGINES
        assert declaration.environment is None or declaration.install.startswith("bash scripts/install-engine.sh")
    code = ("import sys; from kvcontract.conformance.engines.declared import declaration_of; "
            "[declaration_of(n) for n in ('aphrodite', 'vllm-ascend')]; "
            "print(sorted(m for m in ('torch', 'vllm', 'aphrodite', 'vllm_ascend') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_a_declared_field_role_must_be_a_role_with_two_values() -> None:
    with pytest.raises(ValueError, match="role 'sizing' is none of"):
        FieldRole("MLAAttentionSpec", "x", "sizing", (0, 1), "here")
    with pytest.raises(ValueError, match="two values"):
        FieldRole("MLAAttentionSpec", "x", "layout", (0,), "here")


def test_an_import_failure_names_the_missing_package_not_an_absence() -> None:
    inner = ModuleNotFoundError("No module named 'cbor2'", name="cbor2")
    assert "no module named 'cbor2' (the package providing 'cbor2' is not installed)" in \
        loading.import_failure("vllm.v1.core.kv_cache_utils", inner)
    absent = ModuleNotFoundError("No module named 'vllm.v1.core.kv_cache_planning'",
                                 name="vllm.v1.core.kv_cache_planning")
    assert "does not exist here" in loading.import_failure("vllm.v1.core.kv_cache_planning", absent)
    assert loading.missing_module("vllm.v1.core.kv_cache_utils", inner) == "cbor2"
    assert loading.missing_module("vllm.v1.core.kv_cache_planning", absent) is None


def test_stand_ins_are_minimal_named_and_only_where_the_module_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    stubs = (Stub("kvc_device_not_here", "a device module", {"Stream": "class", "is_available": "function",
                                                              "flag": "false", "soc": "str:A2", "n": "int:3"}),
             Stub("json", "a module that imports here: never stood in for"))
    monkeypatch.delitem(sys.modules, "kvc_device_not_here", raising=False)
    try:
        used = loading.install_stubs(stubs)
        module = sys.modules["kvc_device_not_here"]
        assert used == ["kvc_device_not_here"] and sys.modules["json"] is json
        assert module.is_available() is None and module.flag is False and module.soc == "A2" and module.n == 3
        assert isinstance(module.Stream, type) and "a device module" in (module.__doc__ or "")
        assert importlib.util.find_spec("kvc_device_not_here") is not None  # a spec, as transformers asks
        assert not [a for a in vars(module) if not a.startswith("__")
                    and a not in ("Stream", "is_available", "flag", "soc", "n")]
        with pytest.raises(ValueError, match="unknown attribute kind"):
            loading.install_stubs((Stub("kvc_other_not_here", "x", {"a": "gadget"}),))
    finally:
        sys.modules.pop("kvc_device_not_here", None)


def _fake_engine(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A spec module with a kind (``FullAttentionSpec``), an engine-added class deriving from it, and a
    plugin module whose class derives from it too."""
    @dataclasses.dataclass(frozen=True)
    class KVCacheSpec:
        block_size: int = 16

    @dataclasses.dataclass(frozen=True)
    class FullAttentionSpec(KVCacheSpec):
        head_size: int = 64

    @dataclasses.dataclass(frozen=True)
    class TailSpec(FullAttentionSpec):
        pass

    interface = types.ModuleType("kvc_fake_engine.interface")
    plugin = types.ModuleType("kvc_fake_plugin.specs")

    @dataclasses.dataclass(frozen=True)
    class PluginFullSpec(FullAttentionSpec):
        scale_dim: int = 0
        sparse: bool = False

    for cls, module in ((KVCacheSpec, interface), (FullAttentionSpec, interface), (TailSpec, interface),
                        (PluginFullSpec, plugin)):
        cls.__module__ = module.__name__
        cls.__qualname__ = cls.__name__
        setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, interface.__name__, interface)
    monkeypatch.setitem(sys.modules, plugin.__name__, plugin)
    return interface


def test_a_plugins_class_stands_for_its_bases_kind_and_an_engines_own_new_class_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    interface = _fake_engine(monkeypatch)
    plugin = Plugin("kvc_fake_plugin", spec_modules=("kvc_fake_plugin.specs",))
    found = loading.plugin_classes(plugin, interface)
    assert list(found) == ["FullAttentionSpec"] and found["FullAttentionSpec"].__name__ == "PluginFullSpec"
    assert loading.base_kind(found["FullAttentionSpec"], interface) == "FullAttentionSpec"

    from kvcontract.conformance.engines.vllm.discovery import VllmDiscovery
    from kvcontract.conformance.engines.vllm.homes import VLLM_HOMES

    engine: Any = object.__new__(VllmDiscovery)
    engine.interface, engine._plugin_classes, engine.homes = interface, found, VLLM_HOMES
    assert engine.kind_of(found["FullAttentionSpec"]) == "FullAttentionSpec"  # by inheritance
    assert engine.kind_of(interface.FullAttentionSpec) == "FullAttentionSpec"  # by its own name
    assert engine.kind_of(interface.TailSpec) is None  # the engine's new class: the drift guard names it
    old_base = type("KVCacheSpecBase", (), {})
    monkeypatch.setattr(interface, "KVCacheSpecBase", old_base, raising=False)
    assert engine.kind_of(old_base) == "KVCacheSpec"  # vLLM 0.7.0's base, under its old name
    from kvcontract import reference
    assert engine.engine_class(reference.FullAttentionSpec) is found["FullAttentionSpec"]


def test_two_plugin_classes_for_one_kind_are_a_declaration_to_make(monkeypatch: pytest.MonkeyPatch) -> None:
    interface = _fake_engine(monkeypatch)
    plugin_module = sys.modules["kvc_fake_plugin.specs"]

    @dataclasses.dataclass(frozen=True)
    class OtherFullSpec(interface.FullAttentionSpec):  # type: ignore[name-defined, misc]
        pass

    OtherFullSpec.__module__ = plugin_module.__name__
    plugin_module.OtherFullSpec = OtherFullSpec  # type: ignore[attr-defined]
    with pytest.raises(EngineUnavailable, match="both .* derive from FullAttentionSpec; declare"):
        loading.plugin_classes(Plugin("kvc_fake_plugin", spec_modules=("kvc_fake_plugin.specs",)), interface)


class _Declared:
    """An introspectable engine whose plugin class adds two fields, one declared."""

    name, version = "acme", "1.0"

    def __init__(self, interface: types.ModuleType, plugin_cls: type) -> None:
        self.interface, self.plugin_cls = interface, plugin_cls

    def spec_classes(self) -> list[type]:
        return [self.interface.FullAttentionSpec, self.plugin_cls]

    def kind_of(self, cls: type) -> str | None:
        return "FullAttentionSpec" if cls in (self.plugin_cls, self.interface.FullAttentionSpec) else None

    def declared_roles(self) -> tuple[FieldRole, ...]:
        return (FieldRole("FullAttentionSpec", "scale_dim", "layout", (0, 1), "acme/specs.py:1"),)


def test_a_declared_field_is_classified_and_an_undeclared_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    interface = _fake_engine(monkeypatch)
    engine = _Declared(interface, sys.modules["kvc_fake_plugin.specs"].PluginFullSpec)
    names = {u.name for u in surface.unclassified(engine)}
    assert "PluginFullSpec.sparse" in names and "PluginFullSpec.scale_dim" not in names
    assert "PluginFullSpec" not in names  # the class stands for FullAttentionSpec
    rows = {r.key: r.role for r in surface.coverage_rows(engine)}
    assert rows["PluginFullSpec.scale_dim"] == "declared layout" and rows["PluginFullSpec.sparse"] == "UNCLASSIFIED"


def test_a_start_up_call_renders_as_it_is_made() -> None:
    call = Call("vllm.v1.core.single_type_kv_cache_manager:register_all_kvcache_specs", (None,))
    assert call.source() == ("__import__('vllm.v1.core.single_type_kv_cache_manager', fromlist=['x'])"
                             ".register_all_kvcache_specs(None)")


# -- engine environments ----------------------------------------------------------------------------


def test_a_missing_engine_environment_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KVCONTRACT_ENGINE_ENVS", str(tmp_path))
    with pytest.raises(environments.EnvironmentMissing,
                       match=r"'aphrodite' is not installed here .*install it with: bash scripts/install-engine.sh "
                             r"aphrodite"):
        engine_env("aphrodite", {})
    assert engine_env("vllm", {"A": "1"}) == {"A": "1"}  # vLLM runs in the kit's own environment
    assert engine_env("mutant:merge-first", {}) == {}


def test_an_installed_engine_environment_goes_first_on_the_workers_path(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    monkeypatch.setenv("KVCONTRACT_ENGINE_ENVS", str(tmp_path))
    site = tmp_path / "aphrodite" / "site"
    site.mkdir(parents=True)
    (tmp_path / "aphrodite" / environments.STATE).write_text(json.dumps({"ok": True, "paths": [str(site)]}))
    env = engine_env("aphrodite", {"PYTHONPATH": os.pathsep.join(["/elsewhere", str(site)])})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(site), "/elsewhere"]
    site.rmdir()
    with pytest.raises(environments.EnvironmentMissing, match="lacks"):
        engine_env("aphrodite", {})


def test_check_of_an_uninstalled_engine_is_one_usage_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 41: exit 2 and one line naming the install step, never a report full of errors."""
    env = dict(os.environ, KVCONTRACT_ENGINE_ENVS=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "kvcontract", "check", "--engine", "vllm-ascend", "--quiet",
                          "--json", str(tmp_path / "r.json")], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "bash scripts/install-engine.sh vllm-ascend" in lines[0]
    assert not (tmp_path / "r.json").exists()


def test_a_declaration_that_does_not_fit_its_base_is_not_silently_vllm() -> None:
    """A fork's declaration never falls back to the installed vLLM's modules."""
    fork = EngineDeclaration("fork", None, VLLM_HOMES.rebased("kvc_no_such_fork"), install="step")
    with pytest.raises(EngineUnavailable, match="kvc_no_such_fork does not exist here.*install it with: step"):
        loading.load(fork)
