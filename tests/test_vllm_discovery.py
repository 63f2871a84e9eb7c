"""The vLLM adapter discovers what a release has: grouping's config needs, enums, routing entry points.

The fast tests drive the discovery code against stand-ins for a release's
planning module; the ``vllm`` tests run it on the installed release.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any

import pytest

from kvcontract.conformance.contract.model import KitFailure
from kvcontract.conformance.engines.protocol import EngineUnavailable, GroupingAvailability
from kvcontract.conformance.engines.vllm.config import ConfigGap, StrictConfig
from kvcontract.conformance.engines.vllm.engine import VllmEngine
from kvcontract.conformance.engines.vllm.grouping import GroupingUnavailable
from kvcontract.conformance.engines.vllm.homes import VLLM, VLLM_HOMES, EngineDeclaration

NEUTRAL_CONFIG = VllmEngine.NEUTRAL_CONFIG


def bare_engine(planning: Any, declaration: EngineDeclaration = VLLM) -> VllmEngine:
    """A VllmEngine without a vLLM: only what grouping discovery uses, from ``declaration``."""
    engine = object.__new__(VllmEngine)
    engine.declaration, engine.homes, engine.name = declaration, declaration.homes, declaration.name
    engine._planning_problems = []
    engine.version = "9.9.9"
    engine.planning = planning
    engine.planning_module = getattr(planning, "__name__", None)
    engine._config_values = {}
    engine._grouping_problem = None
    return engine


def planning(reads: list[str]) -> types.ModuleType:
    """A planning module whose get_kv_cache_groups reads the config paths ``reads``."""
    module = types.ModuleType("fake_planning")
    seen: list[dict[str, Any]] = []

    def get_kv_cache_groups(config: Any, specs: dict[str, Any]) -> list[Any]:
        values = {}
        for path in reads:
            node = config
            for part in path.split("."):
                node = getattr(node, part)
            values[path] = node
        seen.append(values)
        return []

    module.get_kv_cache_groups = get_kv_cache_groups  # type: ignore[attr-defined]
    module.is_kv_cache_spec_uniform = lambda specs: True  # type: ignore[attr-defined]
    module.seen = seen  # type: ignore[attr-defined]
    return module


def test_strict_config_names_the_path_and_is_an_attribute_error() -> None:
    config = StrictConfig("", {"scheduler_config": StrictConfig("scheduler_config.", {"x": 1})})
    assert config.scheduler_config.x == 1
    with pytest.raises(ConfigGap, match=r"vllm_config\.scheduler_config\.y"):
        _ = config.scheduler_config.y
    assert getattr(config, "kv_transfer_config", "default") == "default"  # the engine's own default
    assert isinstance(ConfigGap("a"), KitFailure) and isinstance(ConfigGap("a"), AttributeError)


def test_grouping_learns_exactly_the_paths_a_release_reads() -> None:
    fake = planning(["scheduler_config.disable_hybrid_kv_cache_manager", "speculative_config"])
    engine = bare_engine(fake)
    assert engine.group_layers({}) == []
    assert engine._config_values == {"scheduler_config.disable_hybrid_kv_cache_manager": False,
                                      "speculative_config": None}
    assert fake.seen[-1] == {"scheduler_config.disable_hybrid_kv_cache_manager": False, "speculative_config": None}
    # The repro builds the same config.
    source = engine.render_group_layers("table")
    assert "disable_hybrid_kv_cache_manager=False" in source and "speculative_config=None" in source
    assert "kv_cache_layout" not in source  # never imported where not read


def test_a_path_without_a_neutral_value_cannot_be_driven() -> None:
    engine = bare_engine(planning(["scheduler_config.disable_hybrid_kv_cache_manager", "model_config.hf_config"]))
    with pytest.raises(GroupingUnavailable, match=r"reads vllm_config\.model_config"):
        engine.group_layers({})
    assert "model_config" not in " ".join(NEUTRAL_CONFIG)


def test_layout_is_given_only_where_the_release_has_the_module() -> None:
    engine = bare_engine(planning(["cache_config.get_resolved_kv_cache_layout"]))
    try:
        import vllm.v1.kv_cache_layout  # noqa: F401
    except ImportError:
        with pytest.raises(GroupingUnavailable, match="get_resolved_kv_cache_layout"):
            engine.group_layers({})
    else:
        engine.group_layers({})
        assert not engine._config_values["cache_config.get_resolved_kv_cache_layout"]().is_block_outermost


def test_no_grouping_function_is_unavailable_with_the_reason() -> None:
    engine = bare_engine(types.ModuleType("empty"))
    assert "has no get_kv_cache_groups" in (engine.grouping_unavailable() or "")
    with pytest.raises(GroupingUnavailable):
        engine.group_layers({})


FORK = EngineDeclaration("fork", None, VLLM_HOMES.rebased(
    "fork_of_vllm", planning=("fork_of_vllm.no_such_planning", "fork_of_vllm.planning")))
"""A fork's declaration: vLLM's homes under its own package, with grouping kept elsewhere."""


def test_a_declarations_module_paths_are_the_ones_read(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = planning([])
    monkeypatch.setitem(sys.modules, "fork_of_vllm.planning", fake)
    engine = bare_engine(None, FORK)
    assert engine._find_planning() is fake  # the first that imports and has is_kv_cache_spec_uniform


def test_a_planning_module_that_fails_to_import_is_named_as_that_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: a module that fails to import (a light package missing) is not read as absence."""
    engine = bare_engine(None, FORK)
    real_import = __import__

    def failing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "fork_of_vllm.planning":
            raise ModuleNotFoundError("No module named 'cbor2'", name="cbor2")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr("importlib.import_module", lambda name, package=None: failing(name))
    assert engine._find_planning() is None
    reason = engine.grouping_unavailable() or ""
    assert "fork_of_vllm.planning failed: no module named 'cbor2'" in reason
    assert "has no get_kv_cache_groups" not in reason and "no_such_planning" not in reason


def test_a_declaration_whose_planning_module_is_missing_reports_it() -> None:
    engine = bare_engine(None, FORK)
    assert engine._find_planning() is None
    assert isinstance(engine, GroupingAvailability)
    reason = engine.grouping_unavailable() or ""
    assert "fork_of_vllm.no_such_planning" in reason and "kv_cache_planning" not in reason
    with pytest.raises(GroupingUnavailable, match="fork_of_vllm.no_such_planning"):
        engine.group_layers({})
    with pytest.raises(EngineUnavailable, match="fork_of_vllm.no_such_planning"):
        engine.is_uniform({})


@pytest.fixture(scope="module")
def vllm_engine() -> VllmEngine:
    try:
        return VllmEngine()
    except EngineUnavailable as exc:
        pytest.skip(f"vLLM is not installed here ({exc})")


@pytest.mark.vllm
def test_installed_release_is_read_from_its_code(vllm_engine: VllmEngine) -> None:
    enums = vllm_engine.engine_enums()
    assert set(enums) >= {"KVQuantMode"}
    assert all(e.__module__.startswith("vllm.") for e in enums.values())
    assert vllm_engine.grouping_unavailable() is None
    assert vllm_engine._config_values  # learned from the release's own grouping
    imports = "\n".join(vllm_engine.snippet_imports([]))
    for e in enums.values():
        assert f"from {e.__module__} import {e.__name__}" in imports


@pytest.mark.vllm
def test_installed_release_routes_or_says_why(vllm_engine: VllmEngine) -> None:
    router = vllm_engine.router()
    if router is None:
        reason = vllm_engine.router_unavailable()
        assert "cannot drive" in reason and vllm_engine.version in reason
    else:
        from kvcontract.reference import QueryLenSupport, RoutingRequest, route

        request = RoutingRequest(query_lens=(1, 1), seq_lens=(8, 9), causal=True,
                                 query_len_support=QueryLenSupport.UNIFORM, backend_non_causal=False,
                                 capability=False, decode_threshold=1)
        assert router(request) == route(request)


@pytest.mark.vllm
def test_a_declaration_is_honoured_when_it_loads(vllm_engine: VllmEngine) -> None:
    moved = EngineDeclaration("moved", "vllm", dataclasses.replace(VLLM_HOMES, planning=("fork_of_vllm.no_such_planning",)))
    fork = VllmEngine(declaration=moved)
    assert fork.planning is None and vllm_engine.planning is not None
    assert "fork_of_vllm.no_such_planning" in (fork.grouping_unavailable() or "")
    assert vllm_engine.grouping_unavailable() is None


def test_a_declared_package_that_is_not_installed_is_named_with_its_install_step() -> None:
    """Issue 41: a fork that is not installed is one line naming the missing module, never a report."""
    missing = EngineDeclaration("acme", "acme-engine", VLLM_HOMES.rebased("acme_engine_not_here"),
                                install="bash scripts/install-engine.sh acme")
    with pytest.raises(EngineUnavailable, match=r"acme is not importable here: acme_engine_not_here does not exist "
                                                r"here .*install it with: bash scripts/install-engine.sh acme"):
        VllmEngine(declaration=missing)


@pytest.mark.vllm
def test_the_installed_release_declares_its_distribution(vllm_engine: VllmEngine) -> None:
    from kvcontract.conformance.engines.protocol import DistributionIdentity, SourceInfo
    from kvcontract.conformance.reports.expectations import bundled_xfails, default_xfails

    assert isinstance(vllm_engine, DistributionIdentity) and isinstance(vllm_engine, SourceInfo)
    assert vllm_engine.distribution == "vllm"
    assert vllm_engine.source_info() is None
    assert bundled_xfails(vllm_engine) == default_xfails("vllm", vllm_engine.version)


@pytest.mark.vllm
def test_a_converted_spec_is_a_new_object_each_time_and_constructed_under_a_tracer(vllm_engine: VllmEngine) -> None:
    """to_engine constructs an object once per spec and hands out copies of it after: each is
    its own object (what the engine writes into one reaches no other), equal to a constructed
    one; while a tracer runs (locating a finding) each is constructed, so the trace is unchanged."""
    import sys

    from kvcontract.reference import FullAttentionSpec, KVDtype

    spec = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.BFLOAT16)
    first, second = vllm_engine.to_engine(spec), vllm_engine.to_engine(spec)
    assert first is not second and first == second == type(first)(**vars(first))
    object.__setattr__(second, "block_size", 32)  # an engine writing into its input
    third = vllm_engine.to_engine(spec)
    assert third.block_size == 16 and third == first
    calls: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and "vllm" in frame.f_code.co_filename:
            calls.append(frame.f_code.co_name)

    sys.settrace(tracer)
    try:
        traced = vllm_engine.to_engine(spec)
    finally:
        sys.settrace(None)
    assert traced == first and "__post_init__" in calls
