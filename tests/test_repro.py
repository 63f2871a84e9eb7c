"""Structured repros (issue 22): every expectation an oracle can raise renders a snippet
that reproduces the finding on the misbehaving engine (it ends in ``VIOLATION of
<CLAUSE>``) and passes on a conforming one (it prints ``no violation``).

Each case drives one law's oracle on the reference engine with one defect
(``tests/engines/defective.py``), checks which expectation it raised, and runs the
rendered snippet: in this interpreter for every case, standalone for a few, and (slow,
vLLM) rendered with vLLM's own classes and calls.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvcontract.conformance.contract import expectations, plan_expectations
from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.laws.dispatch import DispatchExample
from kvcontract.conformance.contract.model import Example, Violation
from kvcontract.conformance.contract.repro import Expectation, GroupSpec, MergeOf, UniformOf
from kvcontract.conformance.engines.protocol import Engine, load_engine
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.reference import (
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVDtype,
    QueryLenSupport,
    RoutingRequest,
    RSWASpec,
    SlidingWindowSpec,
)
from tests.engines.defective import Defective

ROOT = Path(__file__).resolve().parent.parent


def _fa(**changes: object) -> FullAttentionSpec:
    return FullAttentionSpec(**{"block_size": 16, "num_kv_heads": 1, "head_size": 64,  # type: ignore[arg-type]
                                "dtype": KVDtype.BFLOAT16, **changes})


def _sw(window: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(block_size=16, num_kv_heads=1, head_size=64, dtype=KVDtype.BFLOAT16,
                             sliding_window=window)


def _table(*specs: object) -> Example:
    return Example(table=tuple((f"layers.{i}", s) for i, s in enumerate(specs)))  # type: ignore[misc]


def _request(lens: tuple[int, ...], causal: bool = True, flags: bool = False) -> DispatchExample:
    return DispatchExample(request=RoutingRequest(lens, tuple(n + 100 if n else 0 for n in lens), causal=causal,
                                                  capability=flags, backend_non_causal=flags, decode_threshold=1,
                                                  query_len_support=QueryLenSupport.UNIFORM))


ONE = Example(specs=(_fa(),))
PAIR = Example(specs=(_fa(), _fa()))
NEAR_MISS = Example(specs=(_fa(), _fa(block_size=32)), field="block_size")
SPLIT = Example(specs=(_fa(), _fa()), cut=1)
UNIFORM = _table(_fa(), _fa())
TWO_KINDS = _table(_fa(), _sw(128))
WINDOWS = _table(_sw(128), _sw(256))
CAUSAL = _request((1, 1, 4))


@dataclasses.dataclass(frozen=True)
class Case:
    expect: type[Expectation]
    clause: str
    defect: str
    example: Example
    call: object = None
    """The call or subject the expectation must name, where several are possible."""


CASES: tuple[Case, ...] = (
    Case(expectations.Accepted, "ERROR-DETECT-1", "accepts", NEAR_MISS),
    Case(expectations.Raised, "MERGE-AGREE-1", "raises", PAIR, MergeOf()),
    Case(expectations.Raised, "ERROR-TYPE-1", "raises", NEAR_MISS, MergeOf()),
    Case(expectations.Raised, "ERROR-EMPTY-1", "raises", Example(), MergeOf(empty=True)),
    Case(expectations.Raised, "UNIFORM-NORAISE-1", "uniform-raises", NEAR_MISS, UniformOf()),
    Case(expectations.Raised, "GROUP-PARTITION-1", "group-raises", UNIFORM),
    Case(expectations.Raised, "GROUP-SHARE-1", "group-raises", UNIFORM),
    Case(expectations.Invalid, "MERGE-IDENTITY-1", "invalid", ONE),
    Case(expectations.Invalid, "GROUP-MERGED-1", "group-invalid", UNIFORM),
    Case(expectations.FieldsDiffer, "MERGE-IDENTITY-1", "heads", ONE),
    Case(expectations.FieldsDiffer, "MERGE-AGREE-1", "heads", PAIR),
    Case(expectations.FieldsDiffer, "MERGE-ASSOC-1", "heads", SPLIT, MergeOf(cut=1)),
    Case(expectations.FieldsDiffer, "GROUP-MERGED-1", "group-heads", UNIFORM, GroupSpec(("layers.0", "layers.1"))),
    Case(expectations.Page, "MERGE-PAGE-1", "page", PAIR, MergeOf()),
    Case(expectations.Page, "GROUP-PAGE-1", "group-block", UNIFORM, GroupSpec(("layers.0", "layers.1"))),
    Case(expectations.Mutated, "MERGE-PURE-1", "mutates", PAIR),
    Case(expectations.Aliased, "MERGE-PURE-1", "accepts", PAIR),
    Case(expectations.Message, "ERROR-MESSAGE-1", "mute", NEAR_MISS),
    Case(expectations.Answer, "UNIFORM-MERGE-1", "uniform-false", PAIR, UniformOf()),
    Case(expectations.Answer, "UNIFORM-EMPTY-1", "uniform-false", Example(), UniformOf(empty=True)),
    Case(expectations.LayerPartition, "GROUP-PARTITION-1", "group-drops", TWO_KINDS),
    Case(expectations.GroupUnion, "GROUP-UNION-1", "group-no-capability", _table(_fa(non_causal=True), _fa())),
    Case(expectations.MemberSpecs, "GROUP-MERGED-1", "member-heads", UNIFORM),
    Case(expectations.SharedGroup, "GROUP-MERGED-1", "one-group", WINDOWS),
    Case(expectations.MixedBlockSizes, "GROUP-COMPAT-1", "one-group-members", _table(_fa(), _fa(block_size=32))),
    Case(expectations.MixedAllocation, "GROUP-COMPAT-1", "one-group", WINDOWS),
    Case(expectations.UnequalPages, "GROUP-PAGE-1", "group-block-first", TWO_KINDS),
    Case(expectations.OneGroup, "GROUP-SHARE-1", "split", UNIFORM),
    Case(expectations.Routed, "DISPATCH-SPLIT-1", "route-prefill", CAUSAL),
    Case(expectations.Routed, "DISPATCH-BLOCK-1", "route-prefill", _request((4, 4), causal=False, flags=True)),
    Case(expectations.Accepted, "DISPATCH-NONCAUSAL-1", "route-prefill", _request((4, 4), causal=False)),
    Case(expectations.Message, "DISPATCH-UNIFORM-1", "route-mute", _request((2, 3), causal=False, flags=True)),
    Case(expectations.Raised, "DISPATCH-SPLIT-1", "route-raises", CAUSAL),
    Case(expectations.CapabilityNeutral, "DISPATCH-CAUSAL-1", "route-capability", CAUSAL),
    Case(expectations.RoutingPartition, "DISPATCH-PARTITION-1", "route-miscount", CAUSAL),
    Case(expectations.DecodeRows, "DISPATCH-ROWS-1", "route-all-decode", _request((1, 8))),
    Case(expectations.Unclassified, "ROLE-COVER-1", "cover", Example(field="LookaheadAttentionSpec")),
    Case(expectations.RoleFree, "ROLE-COVER-1", "cover", Example(field="LookaheadAttentionSpec", cut=1)),
    Case(expectations.DeclaredRule, "ROLE-COVER-1", "declared", Example(specs=(_fa(),), field="FullAttentionSpec.num_kv_heads",
                                                                         cut=2)),
    Case(plan_expectations.PlanRaised, "PLAN-SIZE-1", "plan-raises", UNIFORM),
    Case(plan_expectations.TypeOfMembers, "PLAN-TYPE-1", "plan:type-by-base",
         _table(_fa(), RSWASpec(block_size=16, num_kv_heads=1, head_size=64, dtype=KVDtype.BFLOAT16, rswa_window=64))),
    Case(plan_expectations.HiddenStateGroup, "PLAN-HIDDEN-1", "plan:hidden-state-absorbed",
         _table(_fa(), _sw(128), HiddenStateCacheSpec(block_size=16, num_kv_heads=1, head_size=256,
                                                      dtype=KVDtype.BFLOAT16))),
    Case(plan_expectations.HybridPlan, "PLAN-HYBRID-1", "plan:hybrid-flag-ignored", TWO_KINDS),
    Case(plan_expectations.PlanBacked, "PLAN-SIZE-1", "plan:blocks-rounded-up", UNIFORM),
    Case(plan_expectations.PlanUsed, "PLAN-SIZE-2", "plan:bytes-per-block-summed", TWO_KINDS),
    Case(plan_expectations.PlanTensors, "PLAN-TENSOR-1", "plan:tensor-per-group", _table(_fa(), _fa(head_size=128))),
    Case(plan_expectations.PlanMatches, "PLAN-MATCH-1", "plan:contiguous-split",
         _table(_fa(), _fa(), _sw(128), _sw(128), _sw(128), _sw(128))),
    Case(plan_expectations.PlanMatches, "PLAN-MATCH-1", "plan:bytes-per-block-summed", TWO_KINDS),
    Case(plan_expectations.PlanMatches, "PLAN-MATCH-1", "plan:tensor-per-group", _table(_fa(), _fa(head_size=128))),
    Case(plan_expectations.PlanMatches, "PLAN-MATCH-1", "plan:type-by-base",
         _table(_fa(), RSWASpec(block_size=16, num_kv_heads=1, head_size=64, dtype=KVDtype.BFLOAT16, rswa_window=64))),
)


def _id(case: Case) -> str:
    return f"{case.expect.__name__}-{case.clause}-{case.defect}"


def _defective(case: Case) -> Engine:
    # the drift guard's snippet loads the engine again by the name it was loaded by
    return load_engine("tests.engines.defective:cover") if case.defect == "cover" else Defective(case.defect)


def _violation(case: Case, engine: Engine) -> Violation:
    with pytest.raises(Violation) as info:
        law(case.clause).check(engine, copy.deepcopy(case.example))
    violation = info.value
    assert type(violation.expect) is case.expect, violation.message
    if case.call is not None:
        assert case.call in (getattr(violation.expect, "call", None), getattr(violation.expect, "subject", None))
    return violation


def _exec(snippet: str) -> tuple[str, str]:
    """Run ``snippet`` here: its printed lines, and what it exited with ('' for success)."""
    out = io.StringIO()
    stopped = ""
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(snippet, "repro.py", "exec"), {"__name__": "__main__"})
        except SystemExit as stop:
            stopped = "" if stop.code in (None, 0) else str(stop.code)
    return out.getvalue(), stopped


def test_every_expectation_type_has_a_case():
    types = {obj for module in (expectations, plan_expectations) for obj in vars(module).values()
             if isinstance(obj, type) and issubclass(obj, Expectation) and obj.__module__ == module.__name__
             and not obj.__name__.startswith("_")}
    assert types == {case.expect for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_snippet_reproduces_on_the_defective_engine_and_passes_on_the_reference(case: Case):
    engine = _defective(case)
    violation = _violation(case, engine)
    law_ = law(case.clause)
    snippet = law_.snippet(engine, case.example, violation, False)
    assert snippet.splitlines()[2] == f"# finding [{violation.signature}]: {violation.message}".splitlines()[0]
    printed, stopped = _exec(snippet)
    assert stopped.startswith(f"VIOLATION of {case.clause}: "), (snippet, printed, stopped)
    if case.expect is expectations.Invalid:
        return  # an invalid result is judged by the kit's reading of it: the snippet shows it and reports
    printed, stopped = _exec(law_.snippet(ReferenceEngine(), case.example, violation, False))
    assert stopped == "" and "no violation" in printed, (printed, stopped)


@pytest.mark.parametrize("clause", ["ERROR-DETECT-1", "DISPATCH-CAUSAL-1"])
def test_a_snippet_runs_standalone_under_python_O(clause: str, tmp_path: Path):
    (case,) = [c for c in CASES if c.clause == clause]
    engine = _defective(case)
    script = tmp_path / "repro.py"
    script.write_text(law(clause).snippet(engine, case.example, _violation(case, engine), True))
    done = subprocess.run([sys.executable, "-O", str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"VIOLATION of {clause}: "), done.stderr


@pytest.fixture(scope="module")
def vllm_engine() -> Engine:
    pytest.importorskip("vllm.v1.kv_cache_interface", reason="vLLM is not installed here; scripts/setup.sh installs it")
    return load_engine("vllm")


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("case", [c for c in CASES if c.defect != "cover"], ids=_id)
def test_every_expectation_renders_a_running_vllm_snippet(case: Case, vllm_engine: Engine):
    """Rendered with vLLM's classes and calls, each check runs to its verdict: ``no violation``,
    or ``VIOLATION of`` its clause where the release has that defect (never a crash)."""
    violation = _violation(case, _defective(case))
    with contextlib.suppress(Violation):  # the adapter learns, as in a run, what grouping reads
        law(case.clause).check(vllm_engine, copy.deepcopy(case.example))
    printed, stopped = _exec(law(case.clause).snippet(vllm_engine, case.example, violation, False))
    assert stopped.startswith(f"VIOLATION of {case.clause}: ") or (stopped == "" and "no violation" in printed), \
        (printed, stopped)
