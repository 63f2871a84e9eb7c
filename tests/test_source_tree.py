"""Checking a vLLM source checkout (``check --engine-path DIR``) and gating a change on it.

The slow test builds two source trees from the installed vLLM's Python files
(compiled extensions left out: the KV-cache code does not need them on the
CPU), puts the seed's regression into one — ``MLAAttentionSpec.merge`` takes
``non_causal_multi_token_decode`` from ``specs[0]`` instead of ``any(...)`` —
and gates it with ``check --baseline`` against the unmodified tree's report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from kvcontract.conformance.engines.protocol import (
    EngineUnavailable,
    UnknownEngine,
    load_engine,
    split_source,
)
from kvcontract.conformance.engines.vllm.source import git_state, use_source_tree

REPO = Path(__file__).resolve().parent.parent
NOT_NEEDED = ("*.so", "__pycache__", "*.h", "*.hpp", "*.cuh", "*.cu", "*.inl", "*.cpp", "*.js", "vllm-rs")
"""What a source tree built from the wheel leaves out: compiled code and C++/CUDA sources."""
UNION = """            non_causal_multi_token_decode=any(
                spec.non_causal_multi_token_decode for spec in specs
            ),"""
REGRESSION = "            non_causal_multi_token_decode=specs[0].non_causal_multi_token_decode,"


def test_split_source() -> None:
    assert split_source("vllm@/src/vllm") == ("vllm", "/src/vllm")
    assert split_source("vllm") == ("vllm", None)
    assert split_source("pkg.mod:factory") == ("pkg.mod:factory", None)


def test_a_directory_without_a_vllm_package_is_not_a_tree(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailable, match="not a vLLM source tree"):
        use_source_tree(tmp_path)


def test_an_engine_without_source_path_refuses_a_tree(tmp_path: Path) -> None:
    with pytest.raises(UnknownEngine, match="cannot be loaded from a source tree"):
        load_engine(f"reference@{tmp_path}")


def test_git_state_of_a_plain_directory_and_of_a_dirty_checkout(tmp_path: Path) -> None:
    assert git_state(tmp_path) == {"path": str(tmp_path), "describe": "not a git tree", "dirty": "unknown"}
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    (tmp_path / "f.py").write_text("x = 1\n")
    for cmd in (["init", "-q"], ["add", "f.py"], ["commit", "-qm", "one"], ["tag", "v0.1"]):
        subprocess.run(["git", "-C", str(tmp_path), *cmd], check=True, env=env)
    assert git_state(tmp_path) == {"path": str(tmp_path), "describe": "v0.1", "dirty": "no"}
    (tmp_path / "f.py").write_text("x = 2\n")
    assert git_state(tmp_path)["dirty"] == "yes"


def _installed_vllm() -> Path:
    proc = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('vllm').origin)"],
                          capture_output=True, text=True, cwd="/")
    if proc.returncode != 0 or not proc.stdout.strip() or proc.stdout.strip() == "None":
        pytest.skip("vLLM is not installed in this environment")
    return Path(proc.stdout.strip()).parent


def _tree(root: Path, installed: Path, regression: bool) -> Path:
    shutil.copytree(installed, root / "vllm", ignore=shutil.ignore_patterns(*NOT_NEEDED))
    if regression:
        path = root / "vllm" / "v1" / "kv_cache_interface.py"
        text = path.read_text()
        start = text.index("class MLAAttentionSpec(")
        at = text.index(UNION, start)
        end = text.index("\nclass ", start + 1)
        if at > end:
            pytest.skip("this vLLM's MLAAttentionSpec.merge does not union non_causal_multi_token_decode")
        path.write_text(text[:at] + REGRESSION + text[at + len(UNION):])
    return root


def _shipped_corpus(tree: Path) -> str:
    """The corpus shipped for the tree's release (both trees are copies of the installed vLLM, the
    head one with a merge regression: what its own model code builds would be rebuilt for each
    tree, minutes each, and the gate compares findings, not corpora); none where none ships."""
    from kvcontract.conformance.engines.vllm.corpus import SHIPPED_DIR, _tree_release

    shipped = SHIPPED_DIR / f"vllm-{_tree_release(tree / 'vllm')}.json.gz"
    return str(shipped) if shipped.is_file() else "none"


def _check(tree: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "kvcontract", "check", "--engine", "vllm", "--engine-path", str(tree),
           "--corpus", _shipped_corpus(tree),
           "--profile", "quick", "--optimize", "off", "--no-xfails", "--quiet", "--json", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree, timeout=900)


def _run_repro(flags: list[str], snippet: str, path: Path) -> subprocess.CompletedProcess[str]:
    path.write_text(snippet)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *flags, str(path)], capture_output=True, text=True, env=env,
                          cwd=path.parent, timeout=300)


@pytest.mark.vllm
@pytest.mark.slow
def test_check_baseline_names_the_one_new_finding_of_a_regression(tmp_path: Path) -> None:
    installed = _installed_vllm()
    base_tree = _tree(tmp_path / "base", installed, regression=False)
    head_tree = _tree(tmp_path / "head", installed, regression=True)
    base_json = tmp_path / "base.json"
    first = _check(base_tree, base_json)
    assert first.returncode in (0, 1), first.stderr[-3000:]
    base = json.loads(base_json.read_text())
    assert base["engine_source"] == {"path": str(base_tree.resolve()), "describe": "not a git tree",
                                     "dirty": "unknown"}

    head = _check(head_tree, tmp_path / "head.json", "--baseline", str(base_json), "--junit",
                  str(tmp_path / "head.xml"))
    assert head.returncode == 1, head.stdout[-3000:] + head.stderr[-3000:]
    assert len(head.stdout.splitlines()) <= 70, head.stdout  # a screenful: the clause table and what is new
    # JUnit tells the gate's story: the cells (clause x mode) with a new finding fail, no other
    head_report = json.loads((tmp_path / "head.json").read_text())
    base_keys = {(r["clause"], r["mode"], r.get("signature")) for r in base["records"]
                 if r["status"] in ("fail", "xfail", "error")}
    new_cells = {(r["clause"], r["mode"]) for r in head_report["records"]
                 if r["status"] in ("fail", "xfail", "error") and (r["clause"], r["mode"], r.get("signature"))
                 not in base_keys}
    cases = ElementTree.parse(tmp_path / "head.xml").getroot().iter("testcase")
    failed = {(c.get("name"), c.get("classname")) for c in cases if c.find("failure") is not None}
    assert new_cells and len(failed) == len(new_cells), (failed, new_cells)
    assert {name for name, _ in failed} == {clause for clause, _ in new_cells}
    assert "new findings by subject (1):" in head.stdout
    assert "  field non_causal_multi_token_decode:" in head.stdout
    # one line per new finding, each naming its repro file; the repro imports the checked tree
    new = [line for line in head.stdout.splitlines() if line.startswith("  NEW ")]
    assert new and all("non_causal_multi_token_decode" in line for line in new), new
    repros = sorted((tmp_path / "head-repros").glob("*.py"))
    assert repros and str(head_tree.resolve()) in repros[0].read_text()
    last = head.stdout.rstrip().splitlines()[-1]
    assert last.startswith("verdict: FAIL") and "of 1 defect (D" in last and "MLAAttentionSpec.merge" in last, last
    assert sum(" NEW " in line and "MLAAttentionSpec.merge" in line for line in head.stdout.splitlines()) == 1
    # the new findings are one defect, traced to the regressed merge (advice: vLLM 0.34.0 reads no
    # group's merged non_causal_multi_token_decode; the MTP draft table reaches the merge, no harm)
    defects = json.loads((tmp_path / "head.json").read_text())["defects"]
    regressed_defects = [d for d in defects if any("non_causal_multi_token_decode" in s for s in d["signatures"])]
    assert len(regressed_defects) == 1, [d["id"] for d in regressed_defects]
    (regressed,) = regressed_defects
    assert regressed["function"] == "MLAAttentionSpec.merge", regressed
    assert regressed["location"].startswith("vllm/v1/kv_cache_interface.py:")
    assert regressed["category"] == "advice" and regressed["tier"] in ("reached", "latent"), regressed

    # each new finding's repro fails on the head and passes on the base tree (its witness avoids
    # the baseline's known findings): the developer who fixes the regression sees it pass
    index = (tmp_path / "head-repros" / "INDEX.txt").read_text().splitlines()
    rows = [line.split("\t") for line in index if not line.startswith("#")]
    assert rows and all(len(row) == 5 and row[4].endswith(".py") for row in rows), index
    for _status, clause, mode, signature, path in rows:
        snippet = Path(path).read_text()
        flags = ["-O"] if mode == "optimized" else []
        on_head = _run_repro(flags, snippet, tmp_path / "on-head.py")
        assert on_head.returncode != 0 and f"VIOLATION of {clause}" in on_head.stderr, (signature, on_head.stderr)
        on_base = _run_repro(flags, snippet.replace(str(head_tree.resolve()), str(base_tree.resolve())),
                             tmp_path / "on-base.py")
        assert on_base.returncode == 0, (signature, on_base.stdout[-2000:], on_base.stderr[-2000:])

    same = _check(base_tree, tmp_path / "again.json", "--baseline", str(base_json))
    assert same.returncode == 0, same.stdout[-3000:]
    assert same.stdout.rstrip().splitlines()[-1].startswith("verdict: PASS")
