"""One verdict module (kvcontract.conformance.run.verdicts) for check, the symbolic search and
the pytest plugin: the status ranking, expectations judged by their pinned witness (xfail,
xpass, fail), ERROR-OPTIMIZE-1 derived from -O findings and judged by its pinned witnesses."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.model import Example, Violation
from kvcontract.conformance.engines.registry import resolve_engine
from kvcontract.conformance.reports import check
from kvcontract.conformance.reports.check import Record
from kvcontract.conformance.reports.expectations import (
    Expectation,
    Expectations,
    load_xfails,
    toml_value,
)
from kvcontract.conformance.run import verdicts
from kvcontract.conformance.run.symbolic.search import Search
from kvcontract.conformance.run.verdicts import Replay
from kvcontract.conformance.run.worker import TaskResult

ROOT = Path(__file__).resolve().parent.parent
BLOCK_SIZES = {"specs": [
    {"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"},
    {"kind": "FullAttentionSpec", "block_size": 32, "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"}],
    "field": "block_size"}
SIG = "accepted:FullAttentionSpec:block_size"
DERIVED_SIG = f"optimized-only:ERROR-DETECT-1:{SIG}"


def test_the_status_ranking_is_defined_once():
    assert verdicts.STATUS_RANK is check.STATUS_RANK
    assert set(check.STATUS_RANK) == set(check.Status.__args__)  # type: ignore[attr-defined]
    assert verdicts.worst(["pass", "xfail", "skip"]) == "xfail"
    assert verdicts.worst(["xpass", "fail"]) == "fail" and verdicts.worst([]) == "pass"


def _entry(clause: str = "ERROR-DETECT-1", mode: str = "normal", signature: str = SIG) -> Expectation:
    return Expectation(clause, mode, signature, "known", BLOCK_SIZES)


def test_an_expectation_is_judged_by_its_pinned_witness():
    entry = _entry()
    xfail = verdicts.expectation_verdict(entry, Replay(signatures=(SIG,), message="merged them"))
    assert (xfail.status, xfail.message) == ("xfail", "known [witness: merged them]")
    assert verdicts.finding_status(SIG, {SIG: xfail}) == "xfail"
    assert verdicts.finding_status("other:sig", {SIG: xfail}) == "fail"
    for replay, now in ((Replay(), "passes"), (Replay(signatures=("x:y",)), "fails differently now (x:y)"),
                        (Replay(problem="KeyError: kind"), "cannot be judged (KeyError: kind)")):
        xpass = verdicts.expectation_verdict(entry, replay)
        assert xpass.status == "xpass" and xpass.message.endswith(f"but the pinned witness {now}")
        assert verdicts.finding_status(SIG, {SIG: xpass}) == "fail"  # a stale expectation hides nothing


def test_a_derived_witness_must_fail_under_o_only():
    failing = Replay(signatures=(SIG,), message="m")
    held = Replay()
    assert verdicts.source_of(DERIVED_SIG) == ("ERROR-DETECT-1", SIG)
    assert verdicts.derived_signature("ERROR-DETECT-1", SIG) == DERIVED_SIG
    assert verdicts.optimize_only_replay(DERIVED_SIG, failing, held).fails_with(DERIVED_SIG)
    assert verdicts.optimize_only_replay(DERIVED_SIG, held, held).now() == "holds under python -O now"
    assert verdicts.optimize_only_replay(DERIVED_SIG, failing, failing).now() == \
        "fails in the normal interpreter too now"
    assert "cannot be judged" in verdicts.optimize_only_replay("no-prefix", failing, held).now()


def _record(mode: str, status: str, **kw: Any) -> Record:
    return Record(clause="ERROR-DETECT-1", title="t", level="MUST", mode=mode, status=status, **kw)  # type: ignore[arg-type]


def _replayer(fails: bool) -> verdicts.Replayer:
    def replay(items: Any) -> list[TaskResult]:
        return [TaskResult("done", value={"violation": fails, "signatures": [SIG] if fails else [], "message": "m"})
                for _ in items]
    return replay


def _expect(signature: str = DERIVED_SIG) -> Expectations:
    return Expectations("x.toml", "test", "0", (_entry("ERROR-OPTIMIZE-1", "optimized", signature),))


def _derive(records: list[Record], expectations: Expectations | None, *, normal_fails: bool = False,
            complete: bool = True, **kw: Any) -> list[tuple[str, str, str]]:
    out = verdicts.derive_optimize_only(records, normal=_replayer(normal_fails), optimized=_replayer(True),
                                        expectations=expectations, complete=complete, **kw)
    return [(r.mode, r.status, r.signature) for r in out]


def test_optimize_only_findings_and_their_expectations():
    finding = _record("optimized", "fail", signature=SIG, witness=BLOCK_SIZES, message="merged")
    normal = _record("normal", "pass")
    # check: a finding under -O only; a skip in the normal mode
    assert _derive([normal, finding], None) == [("normal", "skip", ""), ("optimized", "fail", DERIVED_SIG)]
    # expected, and its pinned witness still fails under -O only: xfail (the finding's record)
    assert _derive([finding], _expect()) == [("optimized", "xfail", DERIVED_SIG)]
    # the normal interpreter fails too now: no finding, and the expectation is an xpass
    assert _derive([finding], _expect(), normal_fails=True) == [("optimized", "xpass", DERIVED_SIG)]
    # nothing differs and nothing is expected: a pass (check), nothing (symbolic)
    assert _derive([_record("optimized", "pass")], None) == [("optimized", "pass", "")]
    assert _derive([], None, complete=False, sources_run=["ERROR-DETECT-1"]) == []


def test_an_expected_witness_the_search_did_not_reach_is_judged_all_the_same():
    """check reports it (xfail by its pinned witness); symbolic does not (not found again),
    unless the witness no longer fails only under -O (xpass)."""
    source_ran = [_record("optimized", "pass")]
    assert _derive(source_ran, _expect()) == [("optimized", "xfail", DERIVED_SIG)]
    assert _derive([], _expect(), complete=False, sources_run=["ERROR-DETECT-1"]) == []
    assert _derive([], _expect(), complete=False, normal_fails=True, sources_run=["ERROR-DETECT-1"]) == \
        [("optimized", "xpass", DERIVED_SIG)]
    # an expectation of a source that did not run is not judged
    assert _derive([], _expect(), complete=False, normal_fails=True, sources_run=["ERROR-TYPE-1"]) == []


# -- the symbolic search uses the same verdicts ----------------------------------------------------


def _xfails_file(tmp_path: Path, entries: list[tuple[str, str, dict[str, Any]]]) -> str:
    path = tmp_path / "x.toml"
    text = 'engine = "test"\nversion = "0"\n'
    for clause, signature, witness in entries:
        text += (f'[[xfail]]\nclause = "{clause}"\nmode = "normal"\nreason = "pretend"\n'
                 f'signature = "{signature}"\nwitness = {toml_value(witness)}\n')
    path.write_text(text)
    return str(path)


def test_symbolic_reports_an_expectation_whose_pinned_witness_passes_as_xpass(tmp_path):
    path = _xfails_file(tmp_path, [("ERROR-DETECT-1", SIG, BLOCK_SIZES)])
    search = Search(resolve_engine("reference"), operations=["merge"], kinds=["FullAttentionSpec"],
                    expectations=load_xfails(path))
    (record,) = search.xpasses
    assert (record.clause, record.status, record.signature, record.phase) == ("ERROR-DETECT-1", "xpass", SIG,
                                                                              "witness")
    assert record.message.endswith("but the pinned witness passes")
    emitted: list[Record] = []
    search.on_finding = emitted.append
    search.run(None, 0)
    assert [r.status for r in emitted] == ["xpass"]  # announced when the search starts


def test_symbolic_findings_are_xfail_only_when_the_pinned_witness_still_fails(tmp_path):
    engine = resolve_engine("mutant:value-error")
    example = Example.from_json(BLOCK_SIZES)
    with pytest.raises(Violation) as info:
        law("ERROR-TYPE-1").check(engine, example)
    sig = info.value.signature
    compatible = {"specs": BLOCK_SIZES["specs"][:1] * 2}
    for witness, status in ((BLOCK_SIZES, "xfail"), (compatible, "fail")):
        path = _xfails_file(tmp_path, [("ERROR-TYPE-1", sig, witness)])
        search = Search(engine, operations=["merge"], kinds=["FullAttentionSpec"], expectations=load_xfails(path))
        assert [r.status for r in search.xpasses] == ([] if status == "xfail" else ["xpass"])
        search._check(search.groups[0], "ERROR-TYPE-1", Example.from_json(BLOCK_SIZES))
        assert search.records[("ERROR-TYPE-1", sig)].status == status


# -- the pytest plugin judges ERROR-OPTIMIZE-1 where it can ------------------------------------------


def _pytest(*flags: str, engine: str) -> subprocess.CompletedProcess[str]:
    # from an empty project: no tests of its own to collect beside the conformance items
    with tempfile.TemporaryDirectory() as empty:
        return subprocess.run([sys.executable, *flags, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rsx",
                               "--kvcontract-engine", engine, "--kvcontract-only", "-k", "ERROR-OPTIMIZE-1"],
                              capture_output=True, text=True, timeout=600, cwd=empty)


def test_plugin_skips_the_derived_clause_in_the_normal_interpreter():
    result = _pytest(engine="reference")
    assert result.returncode == 0, result.stdout[-2000:]
    assert "1 skipped" in result.stdout and "run python -O -m pytest" in result.stdout, result.stdout[-2000:]


def test_plugin_judges_the_derived_clause_under_o():
    """The sources run under -O in-process, their findings are replayed in a normal worker."""
    result = _pytest("-O", engine="mutant:bare-assert")
    assert result.returncode == 1, result.stdout[-3000:]
    assert "FAIL ERROR-OPTIMIZE-1 [optimized-only:ERROR-DETECT-1:" in result.stdout, result.stdout[-3000:]
    control = _pytest("-O", engine="reference")
    assert control.returncode == 0 and "1 passed" in control.stdout, control.stdout[-2000:]


def test_the_derived_clause_replays_in_both_interpreters_at_once():
    """ERROR-OPTIMIZE-1's -O replays of its pinned witnesses run while the normal ones do (each
    interpreter is its own worker): the normal replayer here sees the -O one start."""
    import threading

    started = threading.Event()

    def normal(items: Any) -> list[TaskResult]:
        seen = started.wait(timeout=5)
        # had the -O replays waited for these, the normal interpreter would "fail too" here
        return [TaskResult("done", value={"violation": not seen, "signatures": [] if seen else [SIG], "message": ""})
                for _ in items]

    def optimized(items: Any) -> list[TaskResult]:
        started.set()
        return _replayer(True)(items)

    finding = _record("optimized", "fail", signature=SIG, witness=BLOCK_SIZES, message="merged")
    out = verdicts.derive_optimize_only([finding], normal=normal, optimized=optimized, expectations=_expect(),
                                        complete=True)
    assert started.is_set() and [(r.status, r.signature) for r in out] == [("xfail", DERIVED_SIG)]


def test_an_expectations_files_data_is_parsed_once_per_machine_and_kept_by_its_content(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    from kvcontract.conformance.reports import expectations

    cache = tmp_path / "cache"
    monkeypatch.setenv("KVCONTRACT_CACHE_DIR", str(cache))
    witness = {"specs": [{"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 1, "head_size": 64,
                          "dtype": "bfloat16"}] * 2}
    path = Path(_xfails_file(tmp_path, [("MERGE-UNION-1", "accepted:FullAttentionSpec", witness)]))
    first = load_xfails(path)
    kept = list((cache / "expectations").glob("*.json"))
    assert len(kept) == 1
    expectations._LOADED.clear()
    parsed: list[str] = []
    real = tomllib.loads
    monkeypatch.setattr(tomllib, "loads", lambda text: parsed.append(text) or real(text))
    assert load_xfails(path).entries == first.entries and not parsed  # read from the cache
    path.write_text(path.read_text().replace("accepted:FullAttentionSpec", "accepted:FullAttentionSpec:block_size"))
    expectations._LOADED.clear()
    assert load_xfails(path).entries[0].signature.endswith(":block_size") and len(parsed) == 1  # another file
    kept[0].write_text("{not json")  # a broken cache entry: parsed again
    path.write_text(path.read_text().replace(":block_size", ""))
    expectations._LOADED.clear()
    assert load_xfails(path).entries == first.entries and len(parsed) == 2


def test_an_expectations_file_json_cannot_hold_or_a_cache_turned_off_is_parsed_each_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvcontract.conformance.reports import expectations

    cache = tmp_path / "cache"
    monkeypatch.setenv("KVCONTRACT_CACHE_DIR", "off")
    path = Path(_xfails_file(tmp_path, []))
    load_xfails(path)
    assert not cache.exists() and not (tmp_path / "off").exists()
    monkeypatch.setenv("KVCONTRACT_CACHE_DIR", str(cache))
    path.write_text(path.read_text() + "\nreviewed = 2026-12-07\n")  # a TOML date: not JSON
    expectations._LOADED.clear()
    assert expectations._toml_data(path)["reviewed"].isoformat() == "2026-12-07"
    assert not list(cache.rglob("*.json"))
