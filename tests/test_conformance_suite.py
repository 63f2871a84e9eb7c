"""Meta-tests of the conformance suite: every clause has a law, the reference passes,
vLLM 0.34.0's reviewed expectations hold and a known failure never hides a new one,
findings are keyed by signature and stable, snippets reproduce, reports are
well-formed, misbehaving engines cannot take the kit down, and the CLI fails cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvcontract.conformance.contract.expectations import Accepted
from kvcontract.conformance.contract.laws import DERIVED, LAWS, law
from kvcontract.conformance.contract.model import Example, Violation
from kvcontract.conformance.contract.repro import MergeOf, render_snippet
from kvcontract.conformance.contract.strategies import FULL_DOMAIN
from kvcontract.conformance.contract.systematic import all_pairs
from kvcontract.conformance.engines.registry import resolve_engine
from kvcontract.conformance.reports.check import Report, write_json, write_junit
from kvcontract.conformance.reports.expectations import default_xfails, load_xfails, toml_value
from kvcontract.conformance.run import session as runner
from kvcontract.conformance.run.session import AFTER_HANG_EXAMPLE_TIMEOUT_S
from kvcontract.spec import load_catalogue

ROOT = Path(__file__).resolve().parent.parent


def _vllm_available() -> bool:
    try:
        import vllm.v1.kv_cache_interface  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure: not here
        return False
    return True


needs_vllm = pytest.mark.skipif(not _vllm_available(),
                                reason="vLLM is not installed here; scripts/setup.sh installs it")


def _cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvcontract", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _failing(report: Report) -> list[tuple[str, str, str, str]]:
    return [(r.clause, r.mode, r.status, r.signature) for r in report.records
            if r.status in ("fail", "xpass", "error")]


# -- the suite's shape ------------------------------------------------------------------------


def test_every_engine_checkable_clause_has_a_law():
    covered = {law_.clause for law_ in LAWS} | set(DERIVED)
    # Every clause of a chapter the suite checks; of chapter ROLE (the role table, which the
    # reference's own tests check) only the engine's drift guard.
    chapters = {law_.chapter for law_ in LAWS} - {"ROLE"}
    wanted = {c.id for c in load_catalogue() if c.prefix in chapters} | {"ROLE-COVER-1"}
    assert wanted == covered


def test_every_law_has_a_systematic_phase():
    for law_ in LAWS:
        assert law_.systematic is not None or law_.engine_examples is not None, law_.clause


# -- the reference --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference_report() -> Report:
    return runner.run_check("reference", profile="quick")


def test_reference_passes_every_clause_in_both_modes(reference_report):
    assert _failing(reference_report) == []
    assert reference_report.ok and set(reference_report.modes) == {"normal", "optimized"}


def test_systematic_phase_exercises_every_kind_and_field(reference_report):
    """Issue 10: no (kind, field) pair of the contract is left unexercised."""
    exercised = {tuple(k.split(".", 1)) for k in reference_report.coverage}
    assert all_pairs(FULL_DOMAIN) - exercised == set()
    runs = {(r.clause, r.mode): r for r in reference_report.clauses}
    assert runs[("ERROR-DETECT-1", "normal")].covered_pairs > 0
    assert runs[("ERROR-DETECT-1", "normal")].total_pairs == len(all_pairs(FULL_DOMAIN))


def test_systematic_phase_enumerates_what_only_random_draws_found_before():
    """What a random draw found on some seeds only (vLLM 0.29.0/0.30.0) is enumerated, so
    that a release's findings do not depend on the seed."""
    from kvcontract.conformance.contract import systematic as sysm
    from kvcontract.conformance.contract.strategies import grouping_domain

    equal_pages = list(sysm.page_equal_near_misses(FULL_DOMAIN))
    assert equal_pages and all(a.page_size_bytes == b.page_size_bytes and getattr(a, f) != getattr(b, f)
                               for (a, b), f in equal_pages)
    assert any(f == "alignment" for _, f in equal_pages)
    annotated = list(sysm.annotated_kind_pairs(FULL_DOMAIN))
    assert annotated and all(type(a) is not type(b) for a, b in annotated)
    assert any(a.attention_chunk_size and b.attention_chunk_size and a.attention_chunk_size != b.attention_chunk_size
               for a, b in annotated if hasattr(a, "attention_chunk_size") and hasattr(b, "attention_chunk_size"))
    exclusive = list(sysm.exclusive_pairs(FULL_DOMAIN))
    assert any(a.sliding_window and b.attention_chunk_size for a, b in exclusive)
    flagged = list(sysm.near_misses_beside_flags(FULL_DOMAIN))
    assert flagged and all(len(specs) == 3 for specs, _ in flagged)
    tables = list(sysm.aligned_edge_tables(grouping_domain(FULL_DOMAIN)))
    assert tables and all(t["layers.0"].alignment and t["layers.1"].alignment is None for t in tables)
    assert any(t["layers.0"].tokens_per_state != 1 for t in tables if hasattr(t["layers.0"], "tokens_per_state"))


def test_signatures_name_the_defect_not_the_draw():
    """An invalid result names its kind and the fields at fault, not the example's kinds; a
    group of mixed kinds under one member's spec pairs that kind with each other one."""
    from kvcontract.conformance.contract.laws.common import invalid_signature
    from kvcontract.conformance.contract.laws.group import incompatible_signatures
    from kvcontract.reference import FullAttentionSpec, InvalidSpec, KVDtype

    with pytest.raises(InvalidSpec) as info:
        FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64, dtype=KVDtype.FLOAT32,
                          sliding_window=128, attention_chunk_size=256)
    ex = Example(table=(("a", None), ("b", None)))
    assert invalid_signature(info.value, ex) == "invalid-result:FullAttentionSpec:attention_chunk_size,sliding_window"
    kinds = ["CrossAttentionSpec", "RSWASpec", "SlidingWindowMLASpec"]
    assert incompatible_signatures(kinds, ["kind"], "CrossAttentionSpec") == [
        "incompatible-group:CrossAttentionSpec+RSWASpec:kind",
        "incompatible-group:CrossAttentionSpec+SlidingWindowMLASpec:kind"]
    assert len(incompatible_signatures(kinds, ["kind"], "FullAttentionSpec")) == 3  # a spec of no member's kind


def test_unequal_pages_name_the_layer_that_missed_the_largest_page():
    """GROUP-PAGE-1: when one layer's page overshoots the largest page (vLLM 0.30-0.34 under -O:
    a SinkFullAttentionSpec whose tokens_per_state the merge drops), the finding names that
    layer's kind, whatever other kinds sit beside it, so a third layer is not a new finding."""
    import dataclasses

    from kvcontract.conformance.contract.laws.group import check_group_page
    from kvcontract.conformance.engines import reference as reference_engine
    from kvcontract.conformance.engines.protocol import EngineGroup
    from kvcontract.reference import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        KVDtype,
        SlidingWindowSpec,
        group_layers,
    )

    class Overshoots(reference_engine.ReferenceEngine):
        def group_layers(self, objs_by_layer):  # type: ignore[no-untyped-def]
            return [EngineGroup(g.layer_names, dataclasses.replace(g.spec, block_size=g.spec.block_size * 4)
                                if isinstance(g.spec, FullAttentionSpec) else g.spec)
                    for g in group_layers(dict(objs_by_layer))]

    shape = {"block_size": 16, "num_kv_heads": 1, "dtype": KVDtype.FLOAT32}
    small = FullAttentionSpec(head_size=32, **shape)
    window = SlidingWindowSpec(head_size=64, sliding_window=128, **shape)
    chunk = ChunkedLocalAttentionSpec(head_size=64, attention_chunk_size=256, **shape)
    signatures = set()
    for table in ({"a": window, "b": small}, {"a": window, "b": chunk, "c": small}):
        with pytest.raises(Violation) as info:
            check_group_page(Overshoots(), Example(table=tuple(table.items())))
        signatures.add(info.value.signature)
        assert "the largest layer page is 8192, missed by FullAttentionSpec" in info.value.message
    assert signatures == {"unequal-pages:FullAttentionSpec"}


def test_normal_and_optimized_passes_draw_the_same_examples(reference_report):
    by_mode: dict[str, dict[str, int]] = {}
    for run in reference_report.clauses:
        by_mode.setdefault(run.mode, {})[run.clause] = run.examples
    assert by_mode["normal"] == by_mode["optimized"]


# -- findings keyed by signature, expectations -------------------------------------------------------


def test_mutant_findings_carry_signatures_that_name_kind_and_field():
    report = runner.run_check("mutant:drops-capability", profile="quick", optimize="off",
                              clauses=["MERGE-UNION-1"])
    sigs = {r.signature for r in report.records if r.status == "fail"}
    assert sigs == {"capability-not-unioned:MLAAttentionSpec:non_causal",
                    "capability-not-unioned:HiddenStateCacheSpec:non_causal"}


def _xfails_file(tmp_path: Path, clause: str, signature: str, witness: dict) -> Path:
    path = tmp_path / "x.toml"
    path.write_text(f'engine = "test"\nversion = "0"\n[[xfail]]\nclause = "{clause}"\nmode = "normal"\n'
                    f'reason = "pretend"\nsignature = "{signature}"\nwitness = {toml_value(witness)}\n')
    return path


def test_xfail_whose_witness_passes_is_xpass(tmp_path):
    witness = Example(specs=()).to_json() | {"specs": [
        {"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"},
        {"kind": "FullAttentionSpec", "block_size": 32, "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"}],
        "field": "block_size"}
    path = _xfails_file(tmp_path, "ERROR-DETECT-1", "accepted:FullAttentionSpec:block_size", witness)
    report = runner.run_check("reference", profile="quick", xfails=str(path), clauses=["ERROR-DETECT-1"],
                              optimize="off")
    assert [r.status for r in report.records if r.clause == "ERROR-DETECT-1"] == ["xpass"]
    assert not report.ok


def test_a_known_failure_never_hides_a_new_one(tmp_path):
    """An xfail for one signature of a clause; a second defect in the same clause still fails."""
    first = runner.run_check("mutant:drops-capability", profile="quick", optimize="off",
                             clauses=["MERGE-UNION-1"], xfails=None)
    found = sorted((r for r in first.records if r.status == "fail"), key=lambda r: r.signature)
    assert len(found) >= 2
    path = _xfails_file(tmp_path, "MERGE-UNION-1", found[0].signature, found[0].witness or {})
    second = runner.run_check("mutant:drops-capability", profile="quick", optimize="off",
                              clauses=["MERGE-UNION-1"], xfails=str(path))
    statuses = {r.signature: r.status for r in second.records}
    assert statuses[found[0].signature] == "xfail"
    assert statuses[found[1].signature] == "fail" and not second.ok


def test_kit_errors_are_error_records_not_findings():
    report = runner.run_check("tests.engines.misbehaving:broken_adapter", profile="quick", optimize="off",
                              clauses=["MERGE-IDENTITY-1"])
    statuses = {r.status for r in report.records}
    assert statuses == {"error"}
    (record,) = report.records
    assert "cannot build a MambaSpec" in record.message and record.signature.startswith("kit-error:")


# -- supervised workers -------------------------------------------------------------------------------


def test_a_hanging_engine_becomes_an_error_and_the_run_goes_on(tmp_path):
    result = _cli("check", "--engine", "tests.engines.misbehaving:hanging", "--profile", "quick", "--quiet",
                  "--clauses", "MERGE-ORDER-1,MERGE-ASSOC-1,ERROR-KIND-1", "--example-timeout", "8",
                  "--json", str(tmp_path / "r.json"), timeout=300)
    assert result.returncode == 1, result.stderr
    report = Report.model_validate_json((tmp_path / "r.json").read_text())
    order = [r for r in report.records if r.clause == "MERGE-ORDER-1"]
    assert {r.status for r in order} == {"error"} and len(order) == 2
    assert all("no progress for 8s" in r.message and '"specs"' in r.message for r in order)
    # once it has hung, the engine gets the short limit for the rest of the pass
    assoc = [r for r in report.records if r.clause == "MERGE-ASSOC-1"]
    assert {r.status for r in assoc} == {"error"} and len(assoc) == 2
    assert all(f"no progress for {AFTER_HANG_EXAMPLE_TIMEOUT_S:g}s" in r.message for r in assoc)
    assert {r.status for r in report.records if r.clause == "ERROR-KIND-1"} == {"pass"}  # pairs only


def test_an_aborting_engine_becomes_an_error_and_the_run_goes_on(tmp_path):
    result = _cli("check", "--engine", "tests.engines.misbehaving:aborting", "--profile", "quick", "--quiet",
                  "--clauses", "MERGE-KIND-1,UNIFORM-EMPTY-1", "--optimize", "off",
                  "--json", str(tmp_path / "r.json"), timeout=300)
    assert result.returncode == 1, result.stderr
    report = Report.model_validate_json((tmp_path / "r.json").read_text())
    kind = [r for r in report.records if r.clause == "MERGE-KIND-1"]
    assert [r.status for r in kind] == ["error"] and "SIGABRT" in kind[0].message
    assert "MLAAttentionSpec" in kind[0].message  # the example being run
    assert [r.status for r in report.records if r.clause == "UNIFORM-EMPTY-1"] == ["pass"]


# -- reports ---------------------------------------------------------------------------------------------


def test_reports_are_well_formed_and_readable(tmp_path):
    report = runner.run_check("mutant:drops-capability", profile="quick", optimize="off",
                              clauses=["MERGE-UNION-1"])
    write_json(report, tmp_path / "r.json")
    assert (tmp_path / "r.json").stat().st_mode & 0o044  # readable like any output
    loaded = Report.model_validate_json((tmp_path / "r.json").read_text())
    assert loaded.schema_version == "2" and loaded.kind == "check"
    assert {r.clause for r in loaded.records} == {"MERGE-UNION-1"}
    write_junit(report, tmp_path / "r.xml")
    suites = ET.parse(tmp_path / "r.xml").getroot()
    assert int(suites[0].get("failures")) == len({(r.clause, r.mode) for r in report.records if r.status == "fail"})
    assert [c.get("name") for c in suites[0]] == ["MERGE-UNION-1"]


def test_reference_snippet_machinery_passes_for_the_reference(tmp_path):
    engine = resolve_engine("reference")
    example = Example.from_json({"specs": [
        {"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"},
        {"kind": "FullAttentionSpec", "block_size": 32, "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"}],
        "field": "block_size"})
    snippet = render_snippet(engine, law("ERROR-DETECT-1"), example,
                             Violation("probe", Accepted(MergeOf(), "specs that differ in block_size")), True)
    script = tmp_path / "repro.py"
    script.write_text(snippet)
    result = subprocess.run([sys.executable, "-O", str(script)], capture_output=True, text=True)
    assert result.returncode == 0 and "no violation: rejected" in result.stdout, result.stderr


# -- vLLM 0.34.0 --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_report() -> Report:
    if not _vllm_available():
        pytest.skip("vLLM is not installed here; scripts/setup.sh installs it")
    from kvcontract.conformance.engines.corpora import resolve

    chosen = resolve("vllm")  # what `check` feeds: the corpus built by the release's model code
    return runner.run_check("vllm", profile="quick", use_default_xfails=True,
                            corpus=str(chosen.path) if chosen.path else None)


@pytest.mark.slow
@needs_vllm
@pytest.mark.vllm
def test_vllm_expectations_hold_in_both_modes(vllm_report):
    assert vllm_report.ok, _failing(vllm_report)[:20]
    sigs = {(r.clause, r.mode, r.signature): r.status for r in vllm_report.records}
    # The seed's case: FullAttentionSpec.merge under -O merges disagreeing block sizes.
    assert sigs[("ERROR-DETECT-1", "optimized", "accepted:FullAttentionSpec:block_size")] == "xfail"
    assert sigs[("ERROR-OPTIMIZE-1", "optimized",
                  "optimized-only:ERROR-DETECT-1:accepted:FullAttentionSpec:block_size")] == "xfail"
    assert sigs[("ERROR-DETECT-1", "normal", "accepted:SlidingWindowMLASpec:block_size")] == "xfail"
    # non_causal on an MLA spec is no input vLLM builds (issue 23): the producible domain never draws it
    assert not [k for k in sigs if k[2].endswith("MLAAttentionSpec:non_causal")]
    # every known finding is traced to its defect; MLA merge's bare asserts are reached by real models
    assert all(r.defect and r.location for r in vllm_report.records if r.status == "xfail")
    defects = {d.id: d for d in vllm_report.defects}
    mla_asserts = defects["MLAAttentionSpec.merge:assert"]  # one root: the -O vanishing and the raise
    assert mla_asserts.tier == "reachable" and mla_asserts.option == "python -O"
    assert {"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"} <= set(mla_asserts.models)
    assert "DeepseekV32ForCausalLM" in mla_asserts.harm_models  # a corpus table's plan differs


@pytest.mark.slow
@needs_vllm
@pytest.mark.vllm
def test_a_clause_covers_at_most_the_pairs_its_domain_can_vary(vllm_report):
    """A real model's table moves fields the producible domain fixes: exercised, not covered."""
    for run in vllm_report.clauses:
        assert run.covered_pairs <= run.total_pairs, (run.clause, run.mode)
    plan = next(r for r in vllm_report.clauses if r.clause == "PLAN-TYPE-1")
    assert len(plan.exercised) > plan.covered_pairs > 0


@pytest.mark.slow
@needs_vllm
@pytest.mark.vllm
def test_the_seeds_regression_is_found_despite_the_bundled_expectations(tmp_path):
    """Issue 10: the regression the project was born from, patched back into 0.34.0."""
    result = _cli("check", "--engine", "tests.engines.seed_regression:factory", "--profile", "quick",
                  "--quiet", "--clauses", "MERGE-UNION-1,GROUP-UNION-1", "--xfails",
                  str(default_xfails("vllm", "0.34.0")), "--json", str(tmp_path / "r.json"))
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    report = Report.model_validate_json((tmp_path / "r.json").read_text())
    new = [r for r in report.records if r.status == "fail"]
    assert new and all("non_causal_multi_token_decode" in r.signature for r in new)
    # one defect, in the regressed merge; advice: vLLM 0.34.0 reads no group's merged
    # non_causal_multi_token_decode (runtime metadata picks per invocation); no harm on a corpus table
    assert len({r.defect for r in new}) == 1
    (regressed,) = [d for d in report.defects if d.id == new[0].defect]
    assert regressed.function == "MLAAttentionSpec.merge" and regressed.status == "fail"
    assert regressed.category == "advice" and regressed.tier in ("reached", "latent")
    assert regressed.latent_reason


@pytest.mark.slow
@needs_vllm
@pytest.mark.vllm
def test_a_field_the_engine_adds_fails_the_drift_guard(tmp_path):
    """Issue 11: a field added to a vLLM spec class is named by ROLE-COVER-1."""
    result = _cli("check", "--engine", "tests.engines.added_field:factory", "--profile", "quick", "--quiet",
                  "--clauses", "ROLE-COVER-1", "--optimize", "off", "--json", str(tmp_path / "r.json"))
    assert result.returncode == 1
    report = Report.model_validate_json((tmp_path / "r.json").read_text())
    sigs = {r.signature for r in report.records if r.status == "fail"}
    assert "unclassified:FullAttentionSpec:lookahead_tokens" in sigs
    assert "role-free-changed:FullAttentionSpec:lookahead_tokens" in sigs  # the merge drops it


@pytest.mark.slow
@needs_vllm
@pytest.mark.vllm
def test_quiet_check_prints_only_the_kits_own_lines():
    result = _cli("check", "--engine", "vllm", "--profile", "quick", "--quiet", "--clauses",
                  "UNIFORM-EMPTY-1,GROUP-SHARE-1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("kvcontract check: vllm")
    for noise in ("INFO", "WARNING", "padding layers", "vllm._C"):
        assert noise not in result.stdout


@needs_vllm
@pytest.mark.vllm
@pytest.mark.slow
def test_every_snippet_of_a_vllm_run_runs_standalone_and_ends_in_violation(vllm_report, tmp_path):
    """Issue 10: each snippet compiles; one per clause x mode x outcome runs in its own
    interpreter (the mode's) and ends in a VIOLATION line."""
    failing = [r for r in vllm_report.records if r.status in ("fail", "xfail") and r.snippet]
    for r in failing:
        compile(r.snippet, f"{r.clause}-{r.signature}", "exec")
    chosen: dict[tuple[str, str, str], object] = {}
    for r in failing:
        chosen.setdefault((r.clause, r.mode, r.signature.split(":")[0]), r)
    procs = []
    for i, r in enumerate(chosen.values()):
        script = tmp_path / f"repro{i}.py"
        script.write_text(r.snippet)  # type: ignore[attr-defined]
        flags = ["-O"] if r.mode == "optimized" else []  # type: ignore[attr-defined]
        procs.append((r, [sys.executable, *flags, str(script)]))
    def run(item):  # type: ignore[no-untyped-def]
        r, cmd = item
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
        last = (out.stderr.strip().splitlines() or [""])[-1]
        return None if out.returncode != 0 and "VIOLATION" in last else (r.clause, r.mode, r.signature, last[-200:])

    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        bad = [b for b in pool.map(run, procs) if b is not None]  # each program imports vLLM: side by side
    assert bad == []


def test_bundled_expectations_name_only_signatures_a_run_can_produce():
    path = default_xfails("vllm", "0.34.0")
    assert path is not None
    expectations = load_xfails(path)
    assert expectations.entries
    assert all(e.signature and e.reason for e in expectations.entries)
    # only merge([]) needs no input: every other finding has a pinned example
    assert all(e.witness for e in expectations.entries if e.clause != "ERROR-EMPTY-1")


# -- command line -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("check", "--engine", "no-such-engine"),
    ("check", "--engine", "reference", "--profile", "huge"),
    ("check", "--engine", "reference", "--xfails", "/nonexistent.toml"),
    ("check", "--engine", "reference", "--clauses", "NOPE-1"),
    ("check", "--engine", "reference", "--clause-timeout", "0"),
    ("frobnicate",),
])
def test_cli_usage_errors_are_one_line_exit_2(args):
    result = _cli(*args)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_every_check_option_is_documented():
    result = _cli("check", "--help")
    options = [line.split()[0] for line in result.stdout.splitlines() if line.strip().startswith("--")]
    assert len(options) >= 12
    text = result.stdout
    for option in ("--profile", "--optimize", "--json", "--junit", "--seed", "--clause-timeout"):
        after = text.split(option, 1)[1].split("\n  --", 1)[0]
        assert len(after.strip()) > 10, option


@pytest.mark.slow
def test_cli_check_third_party_engine(tmp_path):
    result = _cli("check", "--engine", "kvcontract.conformance.engines.reference:ReferenceEngine",
                  "--profile", "quick", "--quiet", "--json", str(tmp_path / "r.json"),
                  "--junit", str(tmp_path / "r.xml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MERGE-UNION-1" in result.stdout
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["failed"] == []


@pytest.mark.slow
def test_cli_engines_lists_versions():
    result = _cli("engines")
    assert result.returncode == 0 and result.stdout.startswith("reference")
