"""The reference model of routing, its laws, and the dispatch mutants (spec chapter DISPATCH)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcontract.conformance.contract.laws import law as dispatch_law
from kvcontract.conformance.contract.laws.dispatch import DISPATCH_LAWS, DispatchExample
from kvcontract.conformance.engines.dispatch import needs_router, router_for
from kvcontract.conformance.engines.mutants import MUTANTS, load_mutant
from kvcontract.conformance.engines.protocol import load_engine
from kvcontract.conformance.run.execution import run_law
from kvcontract.reference import (
    DispatchError,
    InvalidRoutingRequest,
    QueryLenSupport,
    Routing,
    RoutingRequest,
    decode_threshold_of,
    route,
)
from kvcontract.spec import SPEC_DIR, parse_spec_md

DISPATCH_MUTANTS = {k: v for k, v in MUTANTS.items() if k.startswith("dispatch-")}


def run_dispatch_law(engine, law, profile, seed):  # type: ignore[no-untyped-def]
    """The law's one record: its first finding, else its pass or skip."""
    records, _run = run_law(engine, law, profile, seed, None)
    return next((r for r in records if r.status == "fail"), records[0])

U, S, V = QueryLenSupport.UNIFORM, QueryLenSupport.SINGLE_ONLY, QueryLenSupport.VARLEN


def _req(lens, *, causal=True, cap=True, backend=True, threshold=4, support=U, seq=None):  # type: ignore[no-untyped-def]
    seq = seq if seq is not None else tuple(n + 10 if n else 0 for n in lens)
    return RoutingRequest(tuple(lens), tuple(seq), causal=causal, capability=cap, backend_non_causal=backend,
                          decode_threshold=threshold, query_len_support=support)


# -- the model on named cases ------------------------------------------------------------

@pytest.mark.parametrize(("lens", "support", "threshold", "want"), [
    ((1, 1), U, 4, (2, 0, 2, 0)),                 # plain decodes
    ((3, 3, 5), U, 4, (2, 1, 6, 5)),              # uniform verify blocks, then a longer prefill
    ((1, 3, 3), U, 4, (1, 2, 1, 6)),              # the uniform path takes the first length only
    ((3, 3, 0), U, 4, (3, 0, 6, 0)),              # trailing padding rides with a uniform block
    ((5, 5), U, 4, (0, 2, 0, 10)),                # longer than the threshold: prefill
    ((1, 3, 2, 6), V, 4, (3, 1, 6, 6)),           # VARLEN: anything up to the threshold
    ((2, 2), S, 8, (0, 2, 0, 4)),                 # SINGLE_ONLY: one row per decode, whatever is configured
    ((1, 0, 1, 3), S, 8, (3, 1, 2, 3)),
    ((0, 1, 1), S, 1, (3, 0, 2, 0)),
])
def test_causal_split(lens, support, threshold, want):  # type: ignore[no-untyped-def]
    """DISPATCH-SPLIT-1, DISPATCH-ROWS-1."""
    for cap in (False, True):
        assert route(_req(lens, support=support, threshold=threshold, cap=cap)).as_tuple() == want


def test_non_causal_block_is_one_decode_block_with_its_padding():
    """DISPATCH-BLOCK-1 (vLLM's unit-test cases)."""
    assert route(_req((8, 8), causal=False)).as_tuple() == (2, 0, 16, 0)
    assert route(_req((8, 8, 0), causal=False)).as_tuple() == (3, 0, 16, 0)
    assert route(_req((1,), causal=False, support=S, threshold=1)).as_tuple() == (1, 0, 1, 0)


@pytest.mark.parametrize(("cap", "backend", "what"), [
    (False, True, "capability"), (True, False, "backend"), (False, False, "capability")])
def test_non_causal_needs_capability_and_backend(cap, backend, what):  # type: ignore[no-untyped-def]
    """DISPATCH-NONCAUSAL-1."""
    with pytest.raises(DispatchError, match=what) as info:
        route(_req((8, 8), causal=False, cap=cap, backend=backend))
    assert isinstance(info.value, ValueError) and "[8, 8]" in str(info.value)


@pytest.mark.parametrize("lens", [(3, 8), (8, 0, 8), (0, 8), (0,), (0, 0), (8, 8, 0, 8)])
def test_non_uniform_or_interleaved_blocks_are_refused_naming_the_lengths(lens):  # type: ignore[no-untyped-def]
    """DISPATCH-UNIFORM-1."""
    with pytest.raises(DispatchError, match="uniform query block") as info:
        route(_req(lens, causal=False))
    assert str(list(lens)) in str(info.value)


def test_dispatch_errors_survive_python_O():
    """DISPATCH-NONCAUSAL-1: raised explicitly, so also in the optimized interpreter."""
    code = ("from kvcontract.reference import RoutingRequest, route, DispatchError\n"
            "for r in (RoutingRequest((8, 0, 8), (9, 0, 9), causal=False, capability=True, backend_non_causal=True),\n"
            "          RoutingRequest((8,), (9,), causal=False)):\n"
            "    try:\n        route(r)\n    except DispatchError:\n        continue\n"
            "    raise SystemExit('routed under -O')\nprint('ok')")
    done = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("bad", [
    dict(query_lens=(), seq_lens=()), dict(query_lens=(1,), seq_lens=(1, 2)),
    dict(query_lens=(-1,), seq_lens=(1,)), dict(query_lens=(3,), seq_lens=(2,)),
    dict(query_lens=(1,), seq_lens=(1,), decode_threshold=0)])
def test_malformed_requests_are_rejected_at_construction(bad):  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRoutingRequest):
        RoutingRequest(**bad)


def test_decode_threshold_is_one_for_a_single_row_path():
    """DISPATCH-ROWS-1, DISPATCH-CAUSAL-1."""
    assert decode_threshold_of(_req((1,), support=S, threshold=8)) == 1
    assert decode_threshold_of(_req((1,), support=U, threshold=8, cap=False)) == 8
    assert decode_threshold_of(_req((1,), support=U, threshold=8, cap=True)) == 8


# -- the model's laws over generated requests ----------------------------------------------

@st.composite
def requests(draw: st.DrawFn) -> RoutingRequest:
    lens = tuple(draw(st.lists(st.integers(0, 12), min_size=1, max_size=6)))
    return _req(lens, causal=draw(st.booleans()), cap=draw(st.booleans()), backend=draw(st.booleans()),
                threshold=draw(st.integers(1, 9)), support=draw(st.sampled_from(list(QueryLenSupport))),
                seq=tuple(n + draw(st.integers(0, 5)) for n in lens))


@settings(max_examples=400, deadline=None)
@given(requests())
def test_routing_is_a_partition_and_causal_routing_ignores_the_capability(request):  # type: ignore[no-untyped-def]
    """DISPATCH-PARTITION-1, DISPATCH-CAUSAL-1, DISPATCH-ROWS-1, DISPATCH-BLOCK-1."""
    try:
        got = route(request)
    except DispatchError as exc:
        assert not request.causal and str(list(request.query_lens)) in str(exc)
        return
    lens = request.query_lens
    assert got.num_decodes + got.num_prefills == len(lens)
    assert got.num_decode_tokens == sum(lens[: got.num_decodes])
    assert got.num_decode_tokens + got.num_prefill_tokens == sum(lens)
    if request.causal:
        flipped = dataclasses.replace(request, capability=not request.capability,
                                      backend_non_causal=not request.backend_non_causal)
        assert route(flipped) == got
        decoded = lens[: got.num_decodes]
        assert all(n <= decode_threshold_of(request) for n in decoded)
        if request.query_len_support is not V:
            assert len({n for n in decoded if n}) <= 1
    else:
        assert got == Routing(len(lens), 0, sum(lens), 0)


# -- the laws against the reference engine and the mutants ------------------------------------

def test_dispatch_laws_cover_every_clause_of_the_draft():
    merged = [c for c in parse_spec_md() if c.id.startswith("DISPATCH-")]
    draft = merged or parse_spec_md((SPEC_DIR / "dispatch-draft.md").read_text())
    assert [c.id for c in draft] == [law.clause for law in DISPATCH_LAWS]
    assert all(c.level == "MUST" for c in draft)
    assert all(law.example_type is DispatchExample and law.title and law.level == "MUST" for law in DISPATCH_LAWS)


def test_the_reference_engine_passes_every_dispatch_law():
    engine = load_engine("reference")
    assert router_for(engine) is route
    for law in DISPATCH_LAWS:
        record = run_dispatch_law(engine, law, "default", 0)
        assert record.status == "pass", (law.clause, record.message)
        assert record.examples > 1


def test_an_engine_without_a_router_skips_with_a_reason():
    engine = SimpleNamespace(name="third-party", version="1", unsupported_kinds=dict,
                             unsupported_fields=lambda _kind: {})
    assert "no router" in (needs_router(engine) or "")
    record = run_dispatch_law(engine, DISPATCH_LAWS[0], "quick", 0)
    assert record.status == "skip" and "no router" in (record.message or "")


def test_a_third_party_router_is_used():
    """An adapter implements the RoutingEngine protocol: router(), router_unavailable(), router_source()."""
    engine = SimpleNamespace(name="third-party", router=lambda: route, router_unavailable=lambda: "",
                             router_source=lambda: ["from kvcontract.reference import route as ROUTE"])
    assert router_for(engine) is route and needs_router(engine) is None


@pytest.mark.slow
@pytest.mark.parametrize("key", list(DISPATCH_MUTANTS))
def test_every_dispatch_mutant_is_killed_by_a_clause_it_violates(key, tmp_path):  # type: ignore[no-untyped-def]
    mutant = load_mutant(f"mutant:{key}")
    cls = DISPATCH_MUTANTS[key]
    assert mutant.name == f"mutant:{key}" and cls.description and "\n" not in cls.description
    assert set(cls.expected_clauses) <= {law.clause for law in DISPATCH_LAWS}
    killed = []
    for clause in cls.expected_clauses:
        record = run_dispatch_law(mutant, dispatch_law(clause), "default", 0)
        if record.status == "fail":
            killed.append(record)
    assert killed, key
    record = killed[0]
    # the witness replays, and the repro snippet reproduces the finding
    law = dispatch_law(record.clause)
    with pytest.raises(Exception, match="."):
        law.check(mutant, DispatchExample.from_json(record.witness))
    script = tmp_path / "repro.py"
    script.write_text(record.snippet)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and f"VIOLATION of {record.clause}" in done.stderr, (record.snippet, done)


@pytest.mark.slow
def test_the_threshold_mutant_imitates_the_engine_commit_and_shrinks_to_a_small_repro():
    record = run_dispatch_law(load_mutant("dispatch-capability-threshold"),
                              dispatch_law("DISPATCH-CAUSAL-1"), "default", 0)
    assert record.status == "fail"
    request = DispatchExample.from_json(record.witness).request
    assert request is not None and len(request.query_lens) <= 2 and request.causal
    assert "reorder_batch_threshold" in DISPATCH_MUTANTS["dispatch-capability-threshold"].imitates


def test_dispatch_examples_round_trip_through_json():
    example = DispatchExample(request=_req((3, 3, 0), causal=False, support=V, threshold=2))
    assert DispatchExample.from_json(example.to_json()) == example
    assert DispatchExample.from_json({}) == DispatchExample()
