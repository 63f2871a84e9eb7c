"""scripts/vllm_matrix.py: rendering the release matrix (no vLLM needed), and the committed matrix."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "vllm-matrix.md"
REPORTS = REPO / "docs" / "vllm-matrix" / "reports"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_matrix", REPO / "scripts" / "vllm_matrix.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("vllm_matrix", module)
    spec.loader.exec_module(module)
    return module


vm = _load_script()


def _record(clause: str, mode: str, status: str, *, level: str = "MUST", message: str = "",
            snippet: str = "") -> dict[str, Any]:
    return {"clause": clause, "title": f"title of {clause}", "level": level, "mode": mode,
            "status": status, "examples": 3, "seconds": 0.25, "message": message,
            "snippet": snippet, "witness": None}


def _report(version: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"schema_version": "1", "kvcontract_version": "0.1.0", "engine": "vllm",
            "engine_version": version, "profile": "quick", "seed": 7, "modes": ["normal", "optimized"],
            "expectations": None, "records": records,
            "summary": {"counts": counts, "failed": [], "seconds": 1.0}}


SNIPPET_OLD = "# kvcontract repro: MERGE-UNION-1 on vllm 0.1.0\nprint('old | union')\n"


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[Path, Path]:
    reports = tmp_path / "docs" / "vllm-matrix" / "reports"
    reports.mkdir(parents=True)
    old = _report("0.1.0", [
        _record("MERGE-IDENTITY-1", "normal", "pass"),
        _record("MERGE-IDENTITY-1", "optimized", "pass"),
        _record("MERGE-UNION-1", "normal", "fail", message="merge raised AssertionError: agree on x",
                snippet=SNIPPET_OLD),
        _record("MERGE-UNION-1", "optimized", "error", message="python -O pass exited with 1"),
        _record("ERROR-EMPTY-1", "normal", "skip", message="no empty merge | here"),
        _record("ERROR-EMPTY-1", "optimized", "skip", message="no empty merge | here"),
    ])
    new = _report("0.2.0", [
        _record("MERGE-IDENTITY-1", "normal", "fail", message="changed is_draft",
                snippet="# run with: python repro.py\nprint('new')\n"),
        _record("MERGE-IDENTITY-1", "optimized", "fail", message="changed is_draft",
                snippet="# run with: python -O repro.py\nprint('new')\n"),
        _record("MERGE-UNION-1", "normal", "pass"),
        _record("MERGE-UNION-1", "optimized", "pass"),
        _record("GROUP-SHARE-1", "normal", "pass", level="SHOULD"),
    ])
    index = {"command": "python3 scripts/vllm_matrix.py --versions 0.1.0,0.2.0 --profile quick --seed 7",
             "date": "2031-01-02", "profile": "quick", "seed": 7, "versions": ["0.1.0", "0.2.0"],
             "timings_s": {"0.1.0": {"install_s": 1.0, "check_s": 2.0}},
             "adapter": {"0.1.0": {"grouping_module": "vllm.v1.core.kv_cache_utils",
                                   "missing_kinds": ["RSWASpec"],
                                   "missing_fields": {"FullAttentionSpec": ["dcp_sharded", "is_draft"]}},
                         "0.2.0": {"grouping_module": "vllm.v1.core.kv_cache_planning",
                                   "missing_kinds": [], "missing_fields": {}}}}
    for name, data in (("0.1.0.json", old), ("0.2.0.json", new), ("index.json", index)):
        (reports / name).write_text(json.dumps(data, indent=2))
    return tmp_path / "docs" / "vllm-matrix.md", reports


def _assert_links_resolve(text: str) -> None:
    anchors = re.findall(r'<a id="([a-z0-9-]+)"></a>', text)
    assert len(anchors) == len(set(anchors)), "duplicate anchors"
    missing = set(re.findall(r"\]\(#([a-z0-9-]+)\)", text)) - set(anchors)
    assert not missing, f"links without an anchor: {sorted(missing)}"


def _row(text: str, clause: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| `{clause}` |"))
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_renders_cells_links_and_snippets(synthetic: tuple[Path, Path]) -> None:
    doc, reports = synthetic
    vm.write_doc(doc, reports)
    text = doc.read_text()
    header = next(ln for ln in text.splitlines() if ln.startswith("| clause |"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "clause", "level", "0.1.0 normal", "0.1.0 -O", "0.2.0 normal", "0.2.0 -O"]
    assert _row(text, "MERGE-IDENTITY-1") == [
        "`MERGE-IDENTITY-1`", "MUST", "pass", "pass",
        "[**fail**](#vllm-0-2-0-merge-identity-1-normal)",
        "[**fail**](#vllm-0-2-0-merge-identity-1-optimized)"]
    assert _row(text, "MERGE-UNION-1") == [
        "`MERGE-UNION-1`", "MUST", "[**fail**](#vllm-0-1-0-merge-union-1-normal)",
        "[**error**](#vllm-0-1-0-merge-union-1-optimized)", "pass", "pass"]
    assert _row(text, "ERROR-EMPTY-1")[2:] == ["skip", "skip", "–", "–"]
    assert _row(text, "GROUP-SHARE-1") == ["`GROUP-SHARE-1`", "SHOULD", "–", "–", "pass", "–"]

    # every link points at an anchor that comes after the table, followed by its finding
    table_end = text.index("## Summary")
    links = re.findall(r"\]\(#([a-z0-9-]+)\)", text[:table_end])
    assert len(links) == 4
    for target in links:
        position = text.index(f'<a id="{target}"></a>')
        assert position > table_end
    _assert_links_resolve(text)
    section = text[text.index('<a id="vllm-0-1-0-merge-union-1-normal"></a>'):]
    section = section[: section.index("<a id=", 10)]
    assert "0.1.0 · MERGE-UNION-1 · normal — fail" in section
    assert "merge raised AssertionError: agree on x" in section
    assert "```python\n" + SNIPPET_OLD + "```" in section
    assert "### vLLM 0.2.0" in text and text.count("print('new')") == 1
    # an optimized finding identical to the normal one points at it instead of repeating it
    assert ("Repro: [the normal interpreter's](#vllm-0-2-0-merge-identity-1-normal), "
            "run with `python -O`.") in text

    # header: command, date, kvcontract version, profile, seed; summary links the reports
    assert "Generated on 2031-01-02 with:" in text
    assert "python3 scripts/vllm_matrix.py --versions 0.1.0,0.2.0 --profile quick --seed 7" in text
    assert "kvcontract 0.1.0; profile `quick`; seed 7" in text
    assert "[0.1.0.json](vllm-matrix/reports/0.1.0.json)" in text
    assert "| 0.1.0 | 1 fail, 1 pass, 1 skip | 1 error, 1 pass, 1 skip | MERGE-UNION-1 |" in text
    assert "| 0.2.0 | 1 fail, 2 pass | 1 fail, 1 pass | MERGE-IDENTITY-1 |" in text
    assert "| 0.1.0 | `ERROR-EMPTY-1` | normal | no empty merge \\| here |" in text
    # what each release lacks, as the adapter reports it
    assert "| `FullAttentionSpec` | dcp_sharded, is_draft | – |" in text
    assert "| `RSWASpec` | **no such kind** | – |" in text
    assert ("| grouping from | `vllm.v1.core.kv_cache_utils` | `vllm.v1.core.kv_cache_planning` |"
            in text)


def test_render_is_deterministic(synthetic: tuple[Path, Path]) -> None:
    doc, reports = synthetic
    vm.write_doc(doc, reports)
    first = doc.read_bytes()
    index, loaded = vm.load(reports)
    assert vm.render(index, loaded).encode() == first
    vm.write_doc(doc, reports)
    assert doc.read_bytes() == first


def test_fence_survives_backticks_in_messages() -> None:
    block = vm._text_block("a ``` b")
    assert block[0] == "````text" and block[-1] == "````"


def test_committed_matrix_matches_its_reports() -> None:
    index, loaded = vm.load(REPORTS)
    assert vm.render(index, loaded) == DOC.read_text()
    _assert_links_resolve(DOC.read_text())
    for version, report in loaded.items():
        assert report["engine"] == "vllm" and report["engine_version"] == version
        assert report["profile"] == index["profile"] and report["seed"] == index["seed"]
        assert report["expectations"] is None  # --no-xfails: raw results


def test_committed_matrix_shows_the_0_29_0_union_failure() -> None:
    """vLLM 0.29.0 predates the capability-union fix: MLAAttentionSpec.merge asserts that
    members agree on non_causal_multi_token_decode (under -O the assert is gone and the
    merged flag is an arbitrary member's)."""
    index, loaded = vm.load(REPORTS)
    assert "0.29.0" in index["versions"]
    union = {r["mode"]: r for r in loaded["0.29.0"]["records"] if r["clause"] == "MERGE-UNION-1"}
    assert union["normal"]["status"] == "fail" and union["optimized"]["status"] == "fail"
    witnessed = [r for r in union.values() if "non_causal_multi_token_decode" in r["message"]]
    assert witnessed, "no 0.29.0 MERGE-UNION-1 finding names non_causal_multi_token_decode"
    assert all("MLAAttentionSpec(" in r["snippet"] for r in witnessed)
    text = DOC.read_text()
    row = _row(text, "MERGE-UNION-1")
    for mode in ("normal", "optimized"):
        assert f"[**fail**](#vllm-0-29-0-merge-union-1-{mode})" in row
        assert f'<a id="vllm-0-29-0-merge-union-1-{mode}"></a>' in text
    for r in witnessed:
        assert r["snippet"].rstrip("\n") in text
