"""Symbolic mode: CrossHair's behaviour diff finds what the seed describes, and
finds nothing on the reference (chapters MERGE, ERROR)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvcontract.conformance.engine import EngineUnavailable, load_engine
from kvcontract.conformance.symbolic import run_symbolic


def test_reference_has_no_difference():
    report = run_symbolic("reference", 12, "off", ["merge2", "uniform2", "page_size"],
                          ["FullAttentionSpec", "MLAAttentionSpec"])
    assert report.findings == []
    assert all(s["paths"] > 0 for s in report.searched)


def test_vllm_full_attention_block_size_merges_silently_under_O(tmp_path):
    """ERROR-DETECT-1 under -O: the seed's FullAttentionSpec.merge case, found symbolically."""
    try:
        load_engine("vllm")
    except EngineUnavailable as exc:
        pytest.skip(f"vLLM is not installed here ({exc}); scripts/setup.sh installs it")
    report = run_symbolic("vllm", 30, "on", ["merge2"], ["FullAttentionSpec"])
    assert report.optimized
    hits = [f for f in report.findings if f.clause == "ERROR-DETECT-1" and f.field == "block_size"]
    assert hits, [(f.clause, f.field) for f in report.findings]
    script = tmp_path / "repro.py"
    script.write_text(hits[0].snippet)
    result = subprocess.run([sys.executable, "-O", str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "VIOLATION of ERROR-DETECT-1" in result.stderr, result.stderr
    normal = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert normal.returncode == 0, "without -O vLLM rejects this pair"


def test_symbolic_cli_usage_errors():
    for args in (["--ops", "frobnicate"], ["--budget", "0"]):
        result = subprocess.run([sys.executable, "-m", "kvcontract.cli", "symbolic",
                                 "--engine", "reference", *args], capture_output=True, text=True)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
