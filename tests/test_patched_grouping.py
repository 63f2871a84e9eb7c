"""A regression of vLLM's grouping arithmetic that only shows where two kinds' layer counts are close
but unequal (issue 39, item 5): patched into a copy of the installed vLLM 0.34.0, the default check
with the bundled expectations must report it as new. No real model table has such counts; the
tables the corpus's kinds are moved to (``inputs.count_examples``) do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_source_tree import _installed_vllm, _shipped_corpus, _tree

REPO = Path(__file__).resolve().parent.parent
HEURISTIC = "        group_size = max_num_layers\n"
REGRESSION = "        group_size = (max_num_layers + min_num_layers) // 2\n"


@pytest.mark.vllm
@pytest.mark.slow
def test_the_default_check_reports_a_close_count_grouping_regression_as_new(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", _installed_vllm(), regression=False)
    planning = tree / "vllm" / "v1" / "core" / "kv_cache_planning.py"
    text = planning.read_text()
    if text.count(HEURISTIC) != 1:
        pytest.skip("this vLLM has no padding heuristic of that form in _get_kv_cache_groups_uniform_page_size")
    planning.write_text(text.replace(HEURISTIC, REGRESSION))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, "-m", "kvcontract", "check", "--engine", "vllm", "--engine-path", str(tree),
                           "--corpus", _shipped_corpus(tree), "--quiet", "--json", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    new = [r for r in report["records"] if r["status"] == "fail"]
    assert new and {r["clause"] for r in new} == {"PLAN-MATCH-1"}, [(r["clause"], r["signature"]) for r in new]
    assert all(r["signature"].startswith("plan-differs-") for r in new)
    assert all(r["input"] == "synthetic" for r in new)  # no real model has the counts
    # traced to the split arithmetic: a group-split difference is decided where the planner splits
    assert {r["defect"] for r in new} == {"_get_kv_cache_groups_uniform_page_size:wrong-plan"}, \
        [(r.get("defect"), r["signature"]) for r in new]
    assert all(r["signature"].startswith("plan-differs-group-split") for r in new)
    assert "verdict: FAIL" in proc.stdout.splitlines()[-1]
