"""``kvcontract kernels``: the per-mode table, the JSON report and the exit codes (NUM-DISPATCH-1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvcontract.cli import main
from kvcontract.kernels import MODES


@pytest.mark.slow
def test_reference_backend_prints_a_passing_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NUM-TOL-1: the reference passes every mode; the JSON holds per-mode records and a summary."""
    report = tmp_path / "out" / "kernels.json"
    code = main(["kernels", "--backend", "reference", "--cases", "2", "--dtype", "float16",
                 "--max-seq-len", "64", "--json", str(report)])
    printed = capsys.readouterr().out
    assert code == 0
    for mode in MODES:
        assert mode in printed
    assert "result: pass" in printed
    data = json.loads(report.read_text())
    assert data["summary"]["status"] == "pass"
    assert data["dtype"] == "float16"
    assert [m["mode"] for m in data["modes"]] == list(MODES)
    assert all(m["status"] == "pass" and m["cases"] >= 1 for m in data["modes"])
    assert list(report.parent.iterdir()) == [report]  # no temporary file left behind


@pytest.mark.slow
def test_misrouted_backend_fails_with_exit_1_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NUM-DISPATCH-1: a misrouted backend exits 1; the table and JSON say misrouted."""
    report = tmp_path / "kernels.json"
    code = main(["kernels", "--backend", "reference-misrouted-noncausal-as-causal", "--cases", "2",
                 "--max-seq-len", "40", "--json", str(report)])
    printed = capsys.readouterr().out
    assert code == 1
    assert "FAIL" in printed and "misrouted" in printed
    data = json.loads(report.read_text())
    assert data["summary"]["status"] == "fail"
    assert "draft" in data["summary"]["failed_modes"]
    assert data["failing_cases"] and data["failing_cases"][0]["spec"]["requests"]


@pytest.mark.slow
def test_same_seed_gives_the_same_report(tmp_path: Path) -> None:
    """The drawn cases are reproducible from --seed."""
    reports = []
    for name in ("a.json", "b.json"):
        assert main(["kernels", "--backend", "reference", "--cases", "1", "--seed", "7",
                     "--max-seq-len", "32", "--json", str(tmp_path / name)]) == 0
        reports.append(json.loads((tmp_path / name).read_text())["modes"])
    assert reports[0] == reports[1]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["kernels", "--backend", "no-such-backend"], "unknown backend 'no-such-backend'"),
        (["kernels", "--cases", "0"], "--cases"),
        (["kernels", "--heads", "two"], "--heads"),
        (["kernels", "--dtype", "float64"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2_in_one_line(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Usage errors exit 2 with one line on stderr."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


def test_list_backends_names_the_built_in_ones(capsys: pytest.CaptureFixture[str]) -> None:
    """NUM-DISPATCH-1: the registry offers the reference, vLLM's kernels and the misrouted variants."""
    assert main(["kernels", "--list-backends"]) == 0
    printed = capsys.readouterr().out
    for name in ("reference", "reference-float32", "vllm-triton",
                 "vllm-triton-misrouted-causal-as-noncausal",
                 "vllm-triton-misrouted-noncausal-as-causal"):
        assert f"\n{name} " in f"\n{printed}"


class _Unavailable:
    name = "unavailable"
    description = "a backend whose engine is missing"
    modes = frozenset(MODES)

    def unavailable_reason(self, dtype: str) -> str | None:
        return "engine not installed"

    def run(self, batch: object, out: object, lse: object) -> None:
        raise AssertionError("never called")


def test_unavailable_backend_exits_1_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backend that cannot run here fails the run (exit 1) and says why."""
    from kvcontract.kernels import backends

    monkeypatch.setitem(backends._REGISTRY, "unavailable", _Unavailable)
    assert main(["kernels", "--backend", "unavailable", "--cases", "1"]) == 1
    printed = capsys.readouterr().out
    assert "unavailable: engine not installed" in printed and "result: FAIL" in printed


def _vllm_importable() -> bool:
    probe = "import vllm.v1.attention.ops.triton_decode_attention"
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
           "VLLM_LOGGING_LEVEL": "WARNING"}
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          timeout=300).returncode == 0


@pytest.mark.slow
def test_vllm_triton_backend_prints_its_table(tmp_path: Path) -> None:
    """NUM-DISPATCH-1: ``kvcontract kernels --backend vllm-triton`` runs vLLM's kernels (interpreted without a GPU)."""
    if not _vllm_importable():
        pytest.skip("vLLM's Triton MLA kernels are not importable here")
    report = tmp_path / "vllm.json"
    command = [sys.executable, "-m", "kvcontract.cli", "kernels",
               "--backend", "vllm-triton", "--cases", "1", "--heads", "2,4",
               "--max-seq-len", "48", "--json", str(report)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "window-noncausal" in done.stdout and "not served" in done.stdout
    data = json.loads(report.read_text())
    checked = set(data["summary"]["modes_checked"])
    assert checked == {"decode", "verify", "draft", "window-causal", "window-noncausal", "padding"}
