"""Every release the kit claims is driven without kit errors (issue 41), and every bundled
expectations file still reproduces on its release's tree.

Slow lane, marker ``releases``: each builds (or reuses) the release's environment
(:mod:`kvcontract.conformance.reports.releases.environments`: the wheel's Python files over this
environment, ``~/.cache/kvcontract/envs``; the first build downloads the wheel) and runs
``kvcontract check`` on the release's tree in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvcontract.conformance.reports.releases.environments import ENV_ROOT, REPO, build_env, env_vars

XFAILS = REPO / "conformance" / "xfails"
BEFORE_0_29 = "0.28.0"
"""A release before 0.29 (no cache layout, grouping in kv_cache_utils, KVCacheTensor.shared_by):
the one that broke silently when the planner learned the layout."""

pytestmark = [pytest.mark.slow, pytest.mark.releases]


def _tree(version: str) -> tuple[Path, dict[str, str]]:
    state = build_env(version, sys.executable, ENV_ROOT)
    if not state.get("ok"):
        pytest.fail(f"vLLM {version}'s environment could not be built: {state.get('problems')}")
    env_dir = ENV_ROOT / f"vllm-{version}"
    return env_dir / "tree", env_vars(env_dir, [str(REPO)])


def _check(tree: Path, env: dict[str, str], target: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvcontract", "check", "--engine", "vllm", "--engine-path",
                           str(tree), "--json", str(target), "--quiet", *extra], capture_output=True, text=True,
                          env=env, cwd=str(REPO), timeout=1800)


def test_a_release_before_0_29_is_driven_without_kit_errors(tmp_path: Path) -> None:
    """Grouping, planning and routing of 0.28.0 run (or skip with their reason): no clause is an error."""
    tree, env = _tree(BEFORE_0_29)
    out = _check(tree, env, tmp_path / "r.json", "--no-xfails", "--profile", "quick")
    assert out.returncode in (0, 1), out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["engine_version"] == BEFORE_0_29
    errors = [f"{r['clause']} [{r['mode']}]: {r.get('message')}" for r in report["records"] if r["status"] == "error"]
    assert errors == []
    judged = {r["clause"] for r in report["records"] if r["status"] in ("pass", "fail")}
    assert {"MERGE-AGREE-1", "GROUP-PARTITION-1", "PLAN-SIZE-1", "PLAN-TENSOR-1"} <= judged


BUNDLED = sorted(p.stem.removeprefix("vllm-") for p in XFAILS.glob("vllm-[0-9]*.toml"))
"""vLLM releases with bundled expectations (a plugin's, ``vllm-ascend-*``, is checked by
``tests/test_engines_e2e.py``)."""


@pytest.mark.parametrize("version", BUNDLED)
def test_the_bundled_expectations_reproduce_on_their_releases_tree(version: str, tmp_path: Path) -> None:
    """The default check with the bundled expectations exits 0 on the release's own tree (the release
    matrix: a bundled file that no longer reproduces fails here, in CI's slow lane)."""
    tree, env = _tree(version)
    out = _check(tree, env, tmp_path / "r.json")
    assert out.returncode == 0, out.stdout[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["expectations"] and report["expectations"].endswith(f"vllm-{version}.toml")
