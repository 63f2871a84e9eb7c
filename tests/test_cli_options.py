"""The command line's frame (issue 22): ``--version``, bare ``kvcontract``, options declared once,
and the pydantic models of the expectations file and of a report's witness."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest

import kvcontract
from kvcontract.cli import VERB_MODULES, build_parser, main
from kvcontract.conformance.reports.check import Record, optimize_modes
from kvcontract.conformance.reports.expectations import XfailsError, load_xfails
from kvcontract.options import comma_list
from kvcontract.usage import UsageError

ROOT = Path(__file__).resolve().parent.parent
SHARED = ("--json", "--seed", "--quiet", "--engine", "--optimize", "--profile", "--xfails", "--no-xfails",
          "--corpus", "--tables", "--sarif")


def test_version_prints_the_kits_version():
    result = subprocess.run([sys.executable, "-m", "kvcontract", "--version"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == f"kvcontract {kvcontract.__version__}"


def test_bare_kvcontract_prints_the_usage_and_exits_2(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kvcontract") and "check" in err and "mutants" in err


def test_every_verb_has_its_module_and_is_registered():
    verbs = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(verbs) == {"check", "engines", "diff", "coverage", "plan", "tables", "report", "symbolic",
                          "mutants", "kernels"}
    assert all(m.rsplit(".", 1)[-1] in verbs or m.endswith("kernels.cli") for m in VERB_MODULES)


def _declared(path: Path) -> set[str]:
    """Option strings passed to ``add_argument`` in ``path``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            out |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return out


def test_shared_options_are_declared_once():
    homes = {ROOT / "options.py", ROOT / "conformance" / "cli" / "options.py"}
    verbs = [*sorted((ROOT / "conformance" / "cli").glob("*.py")), ROOT / "kernels" / "cli.py"]
    for path in verbs:
        if path in homes:
            continue
        assert not (_declared(path) & set(SHARED)), path
    assert set(SHARED) <= _declared(ROOT / "options.py") | _declared(ROOT / "conformance" / "cli" / "options.py")


def test_comma_lists_and_modes():
    assert comma_list(" a, b,,c ", "--x") == ["a", "b", "c"]
    assert comma_list(None, "--x") is None
    with pytest.raises(UsageError, match="--clauses names nothing"):
        comma_list(" , ", "--clauses")
    assert [optimize_modes(o) for o in ("off", "on", "both")] == [["normal"], ["optimized"], ["normal", "optimized"]]
    with pytest.raises(ValueError, match="optimize"):
        optimize_modes("sometimes")


BAD_WITNESS = """engine = "vllm"
version = "0"
[[xfail]]
clause = "ERROR-DETECT-1"
mode = "optimized"
reason = "r"
[[xfail.finding]]
signature = "a"
witness = { specs = [ { kind = "FullAttentionSpec" } ] }
[[xfail.finding]]
signature = "b"
witness = { specs = [ { kind = "NoSuchSpec" } ] }
"""


@pytest.mark.parametrize(("text", "fragments"), [
    (BAD_WITNESS, ["xfail #1 (ERROR-DETECT-1): finding #2: witness: specs[0].kind", "NoSuchSpec"]),
    ('[[xfail]]\nclause = "ERROR-DETECT-1"\nmode = "sometimes"\nreason = "r"\nsignature = "s"\nwitness = {}\n',
     ["xfail #1 (ERROR-DETECT-1): mode"]),
    ('[[xfail]]\nclause = "ERROR-DETECT-1"\nmode = "normal"\nreason = "r"\nsignature = "s"\n',
     ["xfail #1 (ERROR-DETECT-1): missing 'witness'"]),
    ('[[xfail]]\nclause = "ERROR-DETECT-1"\nmode = "normal"\nreason = "r"\nsignature = "s"\nwitness = {}\n'
     '[[xfail.finding]]\nsignature = "t"\nwitness = {}\n', ["not both"]),
    ('engine = "x"\ntypo = 1\n', ["typo"]),
    ('[[xfail]]\nclause = "NOPE-1"\nmode = "normal"\nreason = "r"\nsignature = "s"\nwitness = {}\n',
     ["xfail #1 (NOPE-1): unknown clause"]),
])
def test_a_bad_expectations_file_names_the_file_and_the_entry(tmp_path, capsys, text, fragments):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(XfailsError) as caught:
        load_xfails(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") or message.startswith(f"expectations file {path}: ")
    for fragment in fragments:
        assert fragment in message
    assert main(["check", "--engine", "reference", "--xfails", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_reports_witness_is_checked_and_kept_as_written():
    witness = {"specs": [{"kind": "FullAttentionSpec", "block_size": 32}], "field": "block_size"}
    record = Record(clause="A", title="t", level="MUST", mode="normal", status="fail", witness=witness)
    assert record.witness == witness and record.model_dump()["witness"] == witness
    dispatch = {"dispatch": {"query_lens": [1], "seq_lens": [3], "causal": True, "capability": False,
                             "backend_non_causal": False, "decode_threshold": 1, "query_len_support": "single_only"}}
    assert Record(clause="A", title="t", level="MUST", mode="normal", status="fail", witness=dispatch).witness
    for bad in ({"specs": [{"kind": "NoSuchSpec"}]}, {"spec": []}, {"dispatch": {"query_lens": [1]}},
                {"dispatch": {**dispatch["dispatch"], "query_len_support": "sometimes"}}):
        with pytest.raises(pydantic.ValidationError):
            Record(clause="A", title="t", level="MUST", mode="normal", status="fail", witness=bad)
