"""The docs say what the committed defects data says (counts are generated, never typed):
README's account of vLLM 0.34.0 and docs/vllm-defects.md are renders of
docs/vllm-defects/vllm-0.34.0.json (scripts/defects_doc.py), which matches the bundled
expectations (every reviewed defect)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from kvcontract.conformance.reports.defects_text import (
    README_BEGIN,
    README_END,
    render_document,
    render_readme_block,
)

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "vllm-defects" / "vllm-0.34.0.json"


def test_readme_and_document_are_renders_of_the_committed_defects() -> None:
    summary = json.loads(DATA.read_text())
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index(README_BEGIN):readme.index(README_END) + len(README_END)]
    assert block == render_readme_block(summary)
    assert (ROOT / "docs" / "vllm-defects.md").read_text() == render_document(summary)


def test_committed_defects_are_the_reviewed_ones_and_every_one_has_its_review() -> None:
    summary = json.loads(DATA.read_text())
    reviews = tomllib.loads((ROOT / "conformance" / "xfails" / "reviews" / "vllm-0.34.0.toml").read_text())
    reviewed = {r["id"]: r for r in reviews["defect"]}
    ids = [d["id"] for d in summary["defects"]]
    assert sorted(ids) == sorted(reviewed)
    for d in summary["defects"]:
        assert d["review"] == reviewed[d["id"]]["reason"]
        file, _, line = reviewed[d["id"]]["location"].rpartition(":")
        assert d["location"].startswith(file + ":") and int(line) in d["lines"]
        # reachable: a corpus table's plan shows the harm; reached: corpus tables run the code, no harm
        assert (d["tier"] == "reachable") == bool(d["harm_models"])
        assert (d["tier"] in ("reachable", "reached")) == bool(d["models"])
    expectations = tomllib.loads((ROOT / "conformance" / "xfails" / "vllm-0.34.0.toml").read_text())
    assert {e["defect"] for e in expectations["xfail"]} == set(ids)
    assert sum(len(e["finding"]) for e in expectations["xfail"]) == summary["findings"]
