"""Equal values that are other objects (issue 26): the systematic phase merges specs with their
equal whose strings and large ints are new objects, as values read back from JSON or a config
are; an engine comparing them with ``is`` is found by the quick profile, and the repro rebuilds
the values at run time (equal literals in one script would be one object)."""

from __future__ import annotations

import subprocess
import sys

from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.model import Example, Violation
from kvcontract.conformance.contract.repro import render_snippet
from kvcontract.conformance.contract.shapes import _sys_compatible
from kvcontract.conformance.contract.strategies import FULL_DOMAIN
from kvcontract.conformance.contract.values import fresh_value, rebuilt
from kvcontract.conformance.engines.mutants import load_mutant
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.run.execution import run_law
from kvcontract.reference import KVDtype, MLAAttentionSpec


def test_a_rebuilt_spec_is_equal_and_holds_other_objects():
    spec = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16,
                            cache_dtype_str="fp8_ds_mla")
    copy = rebuilt(spec)
    assert copy == spec and copy is not spec
    assert copy.cache_dtype_str == spec.cache_dtype_str and copy.cache_dtype_str is not spec.cache_dtype_str
    assert copy.head_size is not spec.head_size  # 576: beyond the small-int cache
    assert copy.dtype is spec.dtype and fresh_value(True) is True  # enum members and bools stay


def test_the_systematic_phase_has_rebuilt_pairs_that_survive_json():
    pairs = [ex for ex in _sys_compatible(FULL_DOMAIN) if ex.rebuilt]
    kinds = {type(ex.specs[0]).__name__ for ex in pairs}
    assert {"MLAAttentionSpec", "MambaSpec"} <= kinds, kinds
    assert all(a == b and a is not b for a, b in (ex.specs for ex in pairs))
    again = Example.from_json(pairs[0].to_json())
    assert again.rebuilt and again == pairs[0]


def test_identity_compare_is_killed_by_the_quick_profile_with_a_repro_that_tells_the_engines_apart(tmp_path):
    mutant = load_mutant("identity-compare")
    records, _ = run_law(mutant, law("MERGE-AGREE-1"), "quick", 0, None)
    found = [r for r in records if r.status == "fail" and r.signature == "raised-IncompatibleSpecs:MLAAttentionSpec"]
    assert found, [r.signature for r in records]
    example = Example.from_json(found[0].witness)
    assert example.rebuilt
    script = tmp_path / "repro.py"
    script.write_text(found[0].snippet)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "VIOLATION of MERGE-AGREE-1" in run.stderr, run.stderr
    # the same program on the reference (which compares with ==) reports no violation
    try:
        law("MERGE-AGREE-1").check(mutant, example)
    except Violation as violation:
        snippet = render_snippet(ReferenceEngine(), law("MERGE-AGREE-1"), example, violation, False)
    else:
        raise AssertionError("the witness no longer fails on the mutant")
    script.write_text(snippet)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "no violation" in run.stdout, run.stderr


def test_the_symbolic_mode_finds_identity_compare_with_a_running_repro(tmp_path):
    from kvcontract.conformance.run.symbolic.search import Search

    search = Search(load_mutant("identity-compare"), operations=["merge"])
    search.run(None, 400, stop_on_finding=True)
    found = [r for r in search.records.values() if r.status == "fail"]
    assert found and Example.from_json(found[0].witness).rebuilt
    script = tmp_path / "repro.py"
    script.write_text(found[0].snippet)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "VIOLATION" in run.stderr, run.stderr
