"""``kvcontract coverage`` (ROLE-COVER-1): the table, the report's clauses, exit codes."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from kvcontract import cli
from kvcontract.conformance.engines import protocol as engine_module
from kvcontract.conformance.engines.reference import ReferenceEngine


def test_reference_is_fully_classified(capsys):
    assert cli.main(["coverage", "--engine", "reference"]) == 0
    out = capsys.readouterr().out
    assert "MambaSpec" in out and "num_prefill_checkpoint_blocks" in out and "allocation" in out
    assert "UNCLASSIFIED" not in out
    line = next(x for x in out.splitlines() if x.startswith("HiSparseHotSpec") and "page_size" in x)
    assert line.split()[2:] == ["layout", "-"]


def test_clauses_come_from_the_check_report(tmp_path, capsys):
    report = tmp_path / "check.json"
    report.write_text(json.dumps({"coverage": {"MambaSpec.num_heads": ["MERGE-AGREE-1", "ERROR-DETECT-1"]}}))
    out_json = tmp_path / "cov.json"
    assert cli.main(["coverage", "--engine", "reference", "--report", str(report),
                     "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("MambaSpec") and " num_heads " in x)
    assert line.endswith("MERGE-AGREE-1, ERROR-DETECT-1")
    other = next(x for x in out.splitlines() if x.startswith("MambaSpec") and " shapes " in x)
    assert other.endswith("none")
    data = json.loads(out_json.read_text())
    row = next(r for r in data["rows"] if r["kind"] == "MambaSpec" and r["field"] == "num_heads")
    assert row == {"kind": "MambaSpec", "field": "num_heads", "role": "layout", "status": "kind",
                   "clauses": ["MERGE-AGREE-1", "ERROR-DETECT-1"]}
    assert data["unclassified"] == []


@pytest.mark.parametrize("content", ["not json", "[1]", '{"coverage": {"A.b": "MERGE-AGREE-1"}}'])
def test_a_bad_report_is_a_usage_error(tmp_path, capsys, content):
    report = tmp_path / "check.json"
    report.write_text(content)
    assert cli.main(["coverage", "--engine", "reference", "--report", str(report)]) == 2
    assert "--report" in capsys.readouterr().err


def test_unknown_engine_is_a_usage_error(capsys):
    assert cli.main(["coverage", "--engine", "no-such-engine"]) == 2
    assert cli.main(["coverage"]) == 2


def test_an_unclassified_field_fails_naming_it(monkeypatch, capsys):
    from kvcontract import reference

    extended = dataclasses.make_dataclass(
        "MambaSpec", [("conv_kernel_width", int, dataclasses.field(default=4))],
        bases=(reference.MambaSpec,), frozen=True, kw_only=True)

    class Drifted(ReferenceEngine):
        name = "drifted"

        def spec_classes(self):
            return [*reference.BASE_KINDS, extended]

    monkeypatch.setattr(engine_module, "load_engine", lambda _name: Drifted())
    assert cli.main(["coverage", "--engine", "drifted"]) == 1
    out = capsys.readouterr().out
    assert "UNCLASSIFIED MambaSpec.conv_kernel_width" in out
    assert "reference/specs.py" in out


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_034_is_fully_classified_and_a_patched_field_fails(monkeypatch, capsys):
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    try:
        vllm = engine_module.load_engine("vllm")
    except engine_module.EngineUnavailable as exc:
        pytest.skip(f"vLLM is not importable here ({exc})")
    if vllm.version == "0.34.0":
        assert cli.main(["coverage", "--engine", "vllm"]) == 0
        assert "nothing unclassified" in capsys.readouterr().out
    interface = vllm.interface
    patched = dataclasses.make_dataclass(
        "SlidingWindowSpec", [("window_stride", int, dataclasses.field(default=1))],
        bases=(interface.SlidingWindowSpec,), frozen=True, kw_only=True)
    patched.__module__ = interface.__name__
    monkeypatch.setattr(interface, "SlidingWindowSpec", patched)
    assert cli.main(["coverage", "--engine", "vllm"]) == 1
    assert "UNCLASSIFIED SlidingWindowSpec.window_stride" in capsys.readouterr().out
