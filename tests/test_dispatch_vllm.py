"""vLLM's MLA router against the reference (spec chapter DISPATCH).

The router is vLLM's own ``MLACommonMetadataBuilder`` (constructed through its
``__init__`` on the CPU, as vLLM's builder unit tests do) and its ``build``,
which calls ``split_decodes_and_prefills``; see
:mod:`kvcontract.conformance.engines.vllm.routing`. Skipped where vLLM's builder
cannot be imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvcontract.conformance.contract.laws.dispatch import DISPATCH_LAWS
from kvcontract.conformance.engines.dispatch import router_for
from kvcontract.conformance.engines.protocol import EngineUnavailable, load_engine
from kvcontract.conformance.run.execution import run_law
from kvcontract.reference import QueryLenSupport, RoutingRequest, route


@pytest.fixture(scope="module")
def vllm_router():  # type: ignore[no-untyped-def]
    try:
        from kvcontract.conformance.engines.vllm.routing import VllmRouter

        return VllmRouter()
    except EngineUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def vllm_engine(vllm_router):  # type: ignore[no-untyped-def]
    try:
        return load_engine("vllm")
    except EngineUnavailable as exc:
        pytest.skip(str(exc))


def _req(lens, *, causal=True, cap=True, backend=True, threshold=4,  # type: ignore[no-untyped-def]
         support=QueryLenSupport.UNIFORM):
    return RoutingRequest(tuple(lens), tuple(n + 100 if n else 0 for n in lens), causal=causal, capability=cap,
                          backend_non_causal=backend, decode_threshold=threshold, query_len_support=support)


def test_vllm_passes_every_dispatch_law(vllm_engine):
    assert router_for(vllm_engine) is not None
    for law in DISPATCH_LAWS:
        records, _run = run_law(vllm_engine, law, "default", 0, None)
        assert [r.status for r in records] == ["pass"], (law.clause, [r.message for r in records])


def test_vllm_reproduces_its_own_unit_test_cases(vllm_router):
    """vLLM's builder tests, through the adapter: capability per group, causality per invocation."""
    single = dict(support=QueryLenSupport.SINGLE_ONLY, threshold=1)
    assert vllm_router.route(_req((1, 1), **single)).as_tuple() == (2, 0, 2, 0)
    assert vllm_router.route(_req((8, 8), causal=False, **single)).as_tuple() == (2, 0, 16, 0)
    with pytest.raises(ValueError, match="explicitly supported"):
        vllm_router.route(_req((8, 8), causal=False, cap=False, **single))
    with pytest.raises(ValueError, match=r"uniform query block; got query lengths \[3, 5\]"):
        vllm_router.route(_req((3, 5), causal=False, **single))
    with pytest.raises(ValueError, match="uniform query block"):
        vllm_router.route(_req((8, 0, 8), causal=False, **single))


@pytest.mark.parametrize("support", list(QueryLenSupport))
@pytest.mark.parametrize("threshold", [1, 2, 4, 16])
def test_vllm_reorder_threshold_ignores_the_capability(vllm_router, support, threshold):
    """DISPATCH-CAUSAL-1 at its source: ``reorder_batch_threshold`` of the target-only and the
    target-plus-draft builder."""
    plain = vllm_router.effective_threshold(_req((1,), cap=False, support=support, threshold=threshold))
    marked = vllm_router.effective_threshold(_req((1,), cap=True, support=support, threshold=threshold))
    assert plain == marked == (1 if support is QueryLenSupport.SINGLE_ONLY else threshold)


def test_vllm_agrees_with_the_reference_on_a_grid(vllm_router):
    """Every causal and non-causal batch of up to three requests of lengths 0..5, on every backend."""
    import itertools

    lens_grid = [lens for size in (1, 2, 3) for lens in itertools.product(range(6), repeat=size)]
    mismatches = []
    for lens in lens_grid:
        for causal, support, threshold in itertools.product(
                (True, False), list(QueryLenSupport), (1, 3)):
            request = _req(lens, causal=causal, support=support, threshold=threshold)
            want: object
            try:
                want = route(request).as_tuple()
            except ValueError:
                want = "error"
            try:
                got: object = vllm_router.route(request).as_tuple()
            except ValueError:
                got = "error"
            if got != want:
                mismatches.append((request, got, want))
    assert not mismatches, mismatches[:5]


@pytest.mark.slow
def test_vllm_dispatch_laws_hold_under_python_O(vllm_engine):
    """The refusals are explicit raises in vLLM's builder, so they survive ``python -O``."""
    code = ("from kvcontract.conformance.engines.protocol import load_engine\n"
            "from kvcontract.conformance.contract.laws.dispatch import DISPATCH_LAWS\n"
            "from kvcontract.conformance.run.execution import run_law\n"
            "engine = load_engine('vllm')\n"
            "bad = [(l.clause, r.message) for l in DISPATCH_LAWS\n"
            "       for r in run_law(engine, l, 'quick', 0, None)[0] if r.status != 'pass']\n"
            "print('bad', bad)\nraise SystemExit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "VLLM_LOGGING_LEVEL": "ERROR"})
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_the_vllm_adapter_implements_the_routing_protocol(vllm_engine):
    from kvcontract.conformance.engines.protocol import RoutingEngine

    assert isinstance(vllm_engine, RoutingEngine) and router_for(vllm_engine) is not None
    assert any("VllmRouter" in line for line in vllm_engine.router_source())
