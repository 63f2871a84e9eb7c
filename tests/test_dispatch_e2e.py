"""Routed attention end to end: router, path kernels, every row against the ground truth (DISPATCH-ROWS-1).

A mixed batch (single-token decodes, causal verify blocks, fresh short
prefills, non-causal draft blocks, trailing padding) is split into its causal
and non-causal invocations, each routed by an engine's router; the decode part
runs on vLLM's Triton MLA kernels (through Triton's interpreter without a GPU)
as the path serves it, the prefill part on the reference kernel (vLLM runs
prefill in another backend), and ``check_batch`` compares every row with the
float64 ground truth (NUM-TOL-1, NUM-DISPATCH-1). The router that widens the
decode threshold for a capable group must fail here numerically.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcontract.conformance.engines.mutants import MUTANTS
from kvcontract.kernels import CaseSpec, Kind, RequestSpec, build_batch, check_batch, get_backend
from kvcontract.kernels.routed import GroupSetting, RoutedBackend
from kvcontract.kernels.vllm_triton import BackendUnavailable, load_kernels
from kvcontract.reference import QueryLenSupport, route

pytestmark = [pytest.mark.slow, pytest.mark.triton]

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_kernels()  # sets the interpreter environment only around the import
except BackendUnavailable as exc:
    pytest.skip(f"vLLM's Triton MLA kernels cannot run here: {exc}", allow_module_level=True)

PRE_FIX = GroupSetting(capability=True, backend_non_causal=True, decode_threshold=4,
                       query_len_support=QueryLenSupport.SINGLE_ONLY)
"""A group with target and DSpark draft layers on a backend whose causal decode path is one row per request."""
TRITON_034 = GroupSetting(capability=True, backend_non_causal=True, decode_threshold=4,
                          query_len_support=QueryLenSupport.UNIFORM)
"""The same group on vLLM 0.34.0's TritonMLAMetadataBuilder (UNIFORM, non-causal support)."""
THRESHOLD_MUTANT = MUTANTS["dispatch-capability-threshold"]().route


def _spec(*requests: tuple[Kind, int, int], seed: int = 0) -> CaseSpec:
    return CaseSpec(requests=tuple(RequestSpec(k, n, length) for k, n, length in requests),
                    num_heads=2, kv_lora_rank=32, rope_dim=16, block_size=16, seed=seed)


MIXED = _spec((Kind.DECODE, 1, 20), (Kind.VERIFY, 3, 30), (Kind.PREFILL, 5, 5), (Kind.DRAFT, 4, 25),
              (Kind.VERIFY, 3, 12), (Kind.DRAFT, 4, 40), (Kind.PADDING, 0, 0))
NO_SINGLE_DECODE = _spec((Kind.VERIFY, 3, 30), (Kind.PREFILL, 5, 5), (Kind.VERIFY, 3, 12),
                         (Kind.DRAFT, 4, 25), (Kind.PADDING, 0, 0))


def _check(router, setting: GroupSetting, spec: CaseSpec):  # type: ignore[no-untyped-def]
    backend = RoutedBackend("under test", router, setting, decode_backend=get_backend("vllm-triton"),
                            prefill_backend=get_backend("reference"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = check_batch(backend, build_batch(spec), spec=spec)
    return result, backend.routings


def _failures(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.message or "" for r in result.records if not r.passed]


@pytest.mark.parametrize("setting", [PRE_FIX, TRITON_034], ids=["single-only", "uniform"])
@pytest.mark.parametrize("spec", [MIXED, NO_SINGLE_DECODE], ids=["mixed", "no-single-decode"])
def test_reference_routing_on_vllm_kernels_matches_the_ground_truth(setting, spec):
    result, routings = _check(route, setting, spec)
    assert not _failures(result), (spec, routings, _failures(result))
    assert {causal for causal, _, _ in routings} == {True, False}


@pytest.mark.parametrize("setting", [PRE_FIX, TRITON_034], ids=["single-only", "uniform"])
def test_vllm_router_on_vllm_kernels_matches_the_ground_truth(setting):
    try:
        from kvcontract.conformance.engines.vllm.routing import VllmRouter

        router = VllmRouter().route
    except Exception as exc:  # noqa: BLE001 - no builder here: skip, with the cause
        pytest.skip(f"vLLM's MLA metadata builder cannot be built here: {exc}")
    for spec in (MIXED, NO_SINGLE_DECODE):
        result, routings = _check(router, setting, spec)
        assert not _failures(result), (spec, routings, _failures(result))


def test_the_threshold_mutant_fails_numerically_on_misrouted_causal_blocks():
    """DISPATCH-CAUSAL-1 broken: verify blocks reach the one-row decode path and see later keys."""
    result, routings = _check(THRESHOLD_MUTANT, PRE_FIX, NO_SINGLE_DECODE)
    failures = _failures(result)
    assert failures, routings
    failed = {r.request for r in result.records if not r.passed and r.mode != "padding"}
    assert failed == {0, 2}, failures  # the two verify blocks; the prefill and the draft are right
    assert all("NON-CAUSAL visibility" in m and "misrouted" in m for m in failures if "padding" not in m)
    # The same router on a batch whose causal invocation starts with a single-token decode is harmless:
    # the uniform split keeps the verify blocks out of the decode path.
    assert not _failures(_check(THRESHOLD_MUTANT, PRE_FIX, MIXED)[0])


def test_a_refused_invocation_fails_the_batch():
    """DISPATCH-UNIFORM-1: draft blocks of two lengths are refused by the router, so no row is written."""
    spec = _spec((Kind.DRAFT, 2, 20), (Kind.DRAFT, 3, 20), (Kind.DECODE, 1, 9))
    result, _ = _check(route, PRE_FIX, spec)
    assert any("DispatchError" in m and "[2, 3]" in m for m in _failures(result))


@st.composite
def mixed_specs(draw: st.DrawFn) -> CaseSpec:
    """Mixed batches with one draft block length (a valid non-causal invocation) and trailing padding."""
    requests: list[tuple[Kind, int, int]] = []
    for _ in range(draw(st.integers(0, 2))):
        requests.append((Kind.DECODE, 1, draw(st.integers(1, 40))))
    for _ in range(draw(st.integers(0, 2))):
        n = draw(st.integers(2, 4))
        requests.append((Kind.VERIFY, n, draw(st.integers(n, 40))))
    for _ in range(draw(st.integers(0, 2))):
        n = draw(st.integers(1, 8))
        requests.append((Kind.PREFILL, n, n))
    block = draw(st.integers(1, 4))
    for _ in range(draw(st.integers(0, 2))):
        requests.append((Kind.DRAFT, block, draw(st.integers(block, 40))))
    if not requests:
        requests.append((Kind.VERIFY, 2, 9))
    requests = draw(st.permutations(requests))
    requests += [(Kind.PADDING, 0, 0)] * draw(st.integers(0, 2))
    return _spec(*requests, seed=draw(st.integers(0, 2**16)))


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(mixed_specs(), st.sampled_from([PRE_FIX, TRITON_034]))
def test_routed_mixed_batches_match_the_ground_truth_and_misrouting_fails(spec, setting):
    result, _ = _check(route, setting, spec)
    assert not _failures(result), (spec, _failures(result))
    mutant, routings = _check(THRESHOLD_MUTANT, setting, spec)
    misrouted = setting.query_len_support is QueryLenSupport.SINGLE_ONLY and any(
        causal and any(n > 1 for n in lens[: routing.num_decodes]) for causal, lens, routing in routings)
    assert bool(_failures(mutant)) == misrouted, (spec, routings, _failures(mutant))
