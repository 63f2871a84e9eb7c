"""scripts/vllm_history.py: first bad / fixed in per finding, pins, and the committed document."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("vllm_history", REPO / "scripts" / "vllm_history.py")
assert spec is not None and spec.loader is not None
history_mod = importlib.util.module_from_spec(spec)
sys.modules["vllm_history"] = history_mod
spec.loader.exec_module(history_mod)


def report(version: str, *records: tuple[str, str, str]) -> dict[str, Any]:
    return {"engine_version": version, "summary": {"counts": {}},
            "records": [{"clause": c, "mode": "normal", "status": st, "signature": sig, "message": ""}
                        for c, st, sig in records]}


def test_first_bad_and_fixed_in() -> None:
    versions = ["0.1.0", "0.2.0", "0.3.0", "0.4.0"]
    reports = {
        "0.1.0": report("0.1.0", ("MERGE-UNION-1", "pass", ""), ("GROUP-PAGE-1", "skip", "")),
        "0.2.0": report("0.2.0", ("MERGE-UNION-1", "fail", "capability-not-unioned:MLAAttentionSpec:non_causal"),
                        ("GROUP-PAGE-1", "skip", "")),
        "0.3.0": report("0.3.0", ("MERGE-UNION-1", "fail", "capability-not-unioned:MLAAttentionSpec:non_causal"),
                        ("GROUP-PAGE-1", "fail", "unequal-pages:SlidingWindowMLASpec")),
        "0.4.0": report("0.4.0", ("MERGE-UNION-1", "pass", ""),
                        ("GROUP-PAGE-1", "fail", "unequal-pages:SlidingWindowMLASpec")),
    }
    rows = {(r["clause"], r["signature"]): r for r in history_mod.history(versions, reports)}
    union = rows[("MERGE-UNION-1", "capability-not-unioned:MLAAttentionSpec:non_causal")]
    assert (union["first_bad"], union["fixed_in"], union["releases"]) == ("0.2.0", "0.4.0", ["0.2.0", "0.3.0"])
    assert union["subject"] == "field non_causal"
    page = rows[("GROUP-PAGE-1", "unequal-pages:SlidingWindowMLASpec")]
    assert (page["first_bad"], page["fixed_in"]) == ("0.3.0", None)  # still present in the newest
    assert history_mod._span(["0.2.0", "0.3.0"], versions) == "0.2.0–0.3.0"


def test_a_release_that_skipped_the_clause_does_not_fix_it() -> None:
    versions = ["0.1.0", "0.2.0"]
    reports = {"0.1.0": report("0.1.0", ("DISPATCH-CAUSAL-1", "fail", "routed:x")),
               "0.2.0": report("0.2.0", ("DISPATCH-CAUSAL-1", "skip", ""))}
    (row,) = history_mod.history(versions, reports)
    assert row["fixed_in"] is None


def test_requirements_of_a_wheel_and_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    wheel = tmp_path / "vllm-9.9.9-cp38-abi3-any.whl"
    with zipfile.ZipFile(wheel, "w") as whl:
        whl.writestr("vllm-9.9.9.dist-info/METADATA", "Name: vllm\nRequires-Dist: openai>=1.99.1\n"
                     "Requires-Dist: fastapi[standard]<0.137,>=0.133\nRequires-Dist: pandas; extra == \"bench\"\n")
        whl.writestr("vllm/__init__.py", "")
        whl.writestr("vllm/_C.abi3.so", "binary")
    assert history_mod.requirements_of(wheel) == {"openai": "openai>=1.99.1", "fastapi": "fastapi<0.137,>=0.133"}
    history_mod.unpack_tree(wheel, tmp_path / "tree")
    assert (tmp_path / "tree" / "vllm" / "__init__.py").exists()
    assert not (tmp_path / "tree" / "vllm" / "_C.abi3.so").exists()


def test_committed_history_renders_from_its_reports() -> None:
    reports = REPO / "docs" / "vllm-history" / "reports"
    if not (reports / "index.json").exists():
        pytest.skip("no generated history")
    index, loaded = history_mod._load(reports)
    assert history_mod.render(index, loaded) == (REPO / "docs" / "vllm-history.md").read_text()
    assert json.loads((REPO / "docs" / "vllm-history" / "findings.json").read_text()) == \
        history_mod.history(list(index["checked"]), loaded)
