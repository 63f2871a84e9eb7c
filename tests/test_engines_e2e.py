"""A fork and a plugin checked end to end (issue 41): ``kvcontract check --engine aphrodite`` and
``--engine vllm-ascend`` exit 0 with their bundled expectations, their fork- or plugin-only defects
are located in the fork's or plugin's own files, and those defects' repros run and end in a
violation.

Slow lane, marker ``releases``: each needs its engine environment, installed by
``bash scripts/install-engine.sh NAME`` (the test skips, naming that step, where it is not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvcontract.conformance.engines import environments
from kvcontract.conformance.engines.declared import declaration_of

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR")

pytestmark = [pytest.mark.slow, pytest.mark.releases]

OWN = {
    "aphrodite": ("aphrodite/", {"_get_kv_cache_groups_glm5_next:assert"}),
    "vllm-ascend": ("vllm_ascend/", {"AscendMLAAttentionSpec.merge:mishandles",
                                     "AscendSlidingWindowMLASpec.merge:mishandles",
                                     "_get_kv_cache_groups_uniform_groups:raises-IndexError"}),
}
"""Per engine: where its own files are, and defects only it has (the fork's grouping path; the
plugin's MLA merges and its patched grouping)."""


def _installed(name: str) -> None:
    declaration = declaration_of(name)
    assert declaration is not None and declaration.environment is not None
    if environments.state(declaration.environment) is None:
        pytest.skip(f"the {name} engine environment is not installed here ({declaration.install})")


@pytest.fixture(scope="module", params=sorted(OWN))
def checked(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    name = request.param
    _installed(name)
    target = tmp_path_factory.mktemp(name) / "r.json"
    out = subprocess.run([sys.executable, "-m", "kvcontract", "check", "--engine", name, "--json", str(target),
                          "--quiet"], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    return name, json.loads(target.read_text())


def test_the_check_passes_with_the_bundled_expectations(checked: tuple[str, dict]) -> None:
    name, report = checked
    distribution = declaration_of(name).distribution  # type: ignore[union-attr]
    assert report["expectations"].endswith(f"{distribution}-{report['engine_version']}.toml")
    assert report["summary"]["counts"].get("xfail", 0) > 0
    assert not [r for r in report["records"] if r["status"] == "error"]


def test_its_own_defects_are_located_in_its_own_files(checked: tuple[str, dict]) -> None:
    name, report = checked
    prefix, own = OWN[name]
    located = {d["id"]: d["location"] for d in report["defects"]}
    assert own <= set(located), sorted(located)
    assert all(located[d].startswith(prefix) for d in own), {d: located[d] for d in own}


def test_its_own_defects_repros_run_and_end_in_a_violation(checked: tuple[str, dict], tmp_path: Path) -> None:
    name, report = checked
    _prefix, own = OWN[name]
    failed = []
    for defect in sorted(own):
        record = next(r for r in report["records"] if r.get("defect") == defect and r.get("snippet"))
        script = tmp_path / f"{defect.replace(':', '_').replace('<', '').replace('>', '')}.py"
        script.write_text(record["snippet"])
        flags = ["-O"] if record["mode"] == "optimized" else []
        out = subprocess.run([sys.executable, *flags, str(script)], capture_output=True, text=True, cwd=tmp_path,
                             env=ENV, timeout=600)
        last = (out.stderr.strip().splitlines() or [""])[-1]
        if out.returncode == 0 or "VIOLATION" not in last:
            failed.append((defect, last[-300:]))
    assert failed == []
