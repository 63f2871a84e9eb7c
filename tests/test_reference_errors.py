"""Chapter ERROR (spec/SPEC.md §5): the incompatibility error contract."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given

from kvcontract.conformance.contract.strategies import near_misses, specs
from kvcontract.reference import (
    FullAttentionSpec,
    IncompatibleSpecs,
    KVDtype,
    MLAAttentionSpec,
    SlidingWindowSpec,
    merge,
)


@given(near_misses())
def test_disagreement_always_raises_incompatible_specs(case):
    """ERROR-DETECT-1, ERROR-TYPE-1, ERROR-MESSAGE-1: never another type; the
    message names the field and both values."""
    members, field = case
    with pytest.raises(IncompatibleSpecs) as info:
        merge(members)
    assert isinstance(info.value, AssertionError)
    assert field in info.value.fields
    disagreement = next(d for d in info.value.disagreements if d.field == field)
    assert len(disagreement.values) == 2
    assert field in str(info.value)


@given(specs(), specs())
def test_mixed_kinds_raise(a, b):
    """ERROR-KIND-1."""
    if type(a) is type(b):
        return
    with pytest.raises(IncompatibleSpecs) as info:
        merge([a, b])
    assert info.value.fields == ("kind",)
    assert type(a).__name__ in str(info.value) and type(b).__name__ in str(info.value)


def test_empty_list_raises():
    """ERROR-EMPTY-1."""
    with pytest.raises(IncompatibleSpecs, match="at least one"):
        merge([])


def test_mutually_exclusive_annotations_raise():
    """ERROR-DETECT-1: a window and a chunk cannot share one full-attention group."""
    full = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.FLOAT16)
    with pytest.raises(IncompatibleSpecs, match="sliding_window"):
        merge([dataclasses.replace(full, sliding_window=128),
               dataclasses.replace(full, attention_chunk_size=256)])


OPTIMIZED_PROGRAM = textwrap.dedent(
    """
    import sys
    assert False, "assert statements must be stripped in this interpreter"
    from kvcontract.reference import (FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec,
        KVDtype, IncompatibleSpecs, merge, is_uniform)
    full = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.FLOAT16)
    cases = {
        "block_size": [full, FullAttentionSpec(block_size=32, num_kv_heads=2, head_size=64,
                                               dtype=KVDtype.FLOAT16)],
        "kind": [full, SlidingWindowSpec(block_size=16, num_kv_heads=2, head_size=64,
                                         dtype=KVDtype.FLOAT16, sliding_window=128)],
        "empty": [],
    }
    for name, members in cases.items():
        try:
            merge(members)
        except AssertionError as exc:
            assert_type = type(exc).__name__
            print(name, assert_type, isinstance(exc, IncompatibleSpecs))
        else:
            print(name, "MERGED")
    print("uniform", is_uniform({"a": cases["block_size"][0], "b": cases["block_size"][1]}))
    print("optimize", sys.flags.optimize)
    """
)


def test_model_raises_under_python_O():
    """ERROR-OPTIMIZE-1, UNIFORM-NORAISE-1: the same errors in a python -O subprocess."""
    result = subprocess.run(
        [sys.executable, "-O", "-c", OPTIMIZED_PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert "optimize 1" in lines
    for case in ("block_size", "kind", "empty"):
        assert f"{case} IncompatibleSpecs True" in lines, result.stdout
    assert "uniform False" in lines


def test_incompatible_specs_is_an_assertion_error():
    """ERROR-TYPE-1: engines' `except AssertionError` callers keep working."""
    assert issubclass(IncompatibleSpecs, AssertionError)
    mla = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16)
    try:
        merge([mla, dataclasses.replace(mla, model_version="deepseek_v4")])
    except AssertionError as exc:
        assert "model_version" in str(exc)
    else:
        pytest.fail("merge accepted disagreeing model_version")


def test_uniformity_never_raises_for_incompatibility():
    from kvcontract.reference import is_uniform

    full = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.FLOAT16)
    swa = SlidingWindowSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=KVDtype.FLOAT16,
                            sliding_window=64)
    assert is_uniform({"a": full, "b": swa}) is False
    assert is_uniform({}) is True
    assert is_uniform({"a": full, "b": full}) is True
