"""scripts/plan_agreement.py's work (kvcontract.conformance.reports.plan_agreement): the reviews
file, the plans through a worker's JSON, the report's JSON and markdown, and the agreement of
the reference with vLLM 0.34.0 on the shipped tables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.conformance.reports import plan_agreement as pa
from kvcontract.usage import UsageError

ROOT = Path(__file__).resolve().parent.parent
REVIEWS = ROOT / "docs" / "plan-agreement-reviews.toml"


def test_the_committed_reviews_name_reviewed_defects_of_the_release() -> None:
    reviews = pa.load_reviews(REVIEWS, "vllm", "0.34.0")
    assert reviews and all(r.reason and r.interpreter in ("any", "normal", "optimized") for r in reviews)


@pytest.mark.parametrize(("text", "says"), [
    ('[[review]]\nsignature = "plan-differs-*"\ndefect = "NoSuch.merge:x"\nreason = "r"\n', "is not reviewed"),
    ('[[review]]\nsignature = "plan-differs-*"\nreason = "r"\n', "needs signature, defect, reason"),
    ('[[review]]\nsignature = "x"\ndefect = "FullAttentionSpec.merge:assert"\nreason = "r"\n'
     'interpreter = "sometimes"\n', "interpreter must be"),
    ("[[review]\n", "plan_agreement"),
])
def test_a_bad_reviews_file_is_a_usage_error_naming_the_entry(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "reviews.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=says):
        pa.load_reviews(path, "vllm", "0.34.0")


def test_a_plan_survives_the_workers_json() -> None:
    engine = ReferenceEngine()
    for item in pa.peer_inputs()[:40]:
        for hybrid, block_outermost in pa.SETTINGS:
            answer = pa.engine_answer(engine, item.table, hybrid, block_outermost)
            back = pa.plan_from_json(json.loads(json.dumps(pa.plan_to_json(answer))))
            if isinstance(answer, BaseException):
                assert isinstance(back, pa.EngineError) and type(answer).__name__ in back.described
            else:
                assert back == answer


def test_the_reference_agrees_with_itself_and_the_report_says_so() -> None:
    inputs = pa.peer_inputs()[::7]
    cases = pa.compare_inputs(inputs, ReferenceEngine(), [])
    summary = pa.summary(cases)
    assert summary["cases"] == len(inputs) * len(pa.SETTINGS) == summary["agree"] and summary["differ"] == 0
    data = json.loads(pa.dump_json(pa.to_json(cases, "reference", "0")))
    assert data["summary"] == summary and data["differences"] == []
    text = pa.render_markdown(cases, "reference", "0", "some peer tables")
    assert f"**{summary['cases']} cases" in text and "## Cases that differ" not in text


def test_a_difference_is_reviewed_by_the_first_matching_entry() -> None:
    class Splits(ReferenceEngine):
        def plan_layers(self, objs_by_layer, memory_bytes, *, hybrid=True, block_outermost=False):  # type: ignore[no-untyped-def]
            from kvcontract.conformance.engines.mutants import load_mutant

            return load_mutant("contiguous-split").plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid,
                                                               block_outermost=block_outermost)

    (item,) = [i for i in pa.peer_inputs() if i.name == "one-worker/2full+4sliding"]
    review = pa.Review("plan-differs-group-split:*", "FullAttentionSpec.merge:assert", "a test", "normal")
    cases = pa.compare_inputs([item], Splits(), [review])
    assert [c.signature for c in cases if c.differences] == ["plan-differs-group-split:SlidingWindowSpec"] * 2  # hybrid on; off: one group
    assert all(c.review is review for c in cases if c.differences)
    text = pa.render_markdown(cases, "engine", "1", "one table")
    assert "2 reviewed engine defects, 0 unreviewed" in text and "| one-worker/2full+4sliding | peer |" in text


def test_the_committed_report_is_what_its_json_says() -> None:
    data = json.loads((ROOT / "docs" / "plan-agreement.json").read_text())
    text = (ROOT / "docs" / "plan-agreement.md").read_text()
    s = data["summary"]
    assert f"{s['cases']} cases ({s['tables']} tables" in text
    assert f"{s['agree']} agree, {s['differ']} differ ({s['reviewed']} reviewed engine defects, " \
           f"{s['unreviewed']} unreviewed)" in text
    assert s["unreviewed"] == 0 and len(data["differences"]) == s["differ"]
    normal_rows = [line for line in text.splitlines() if re.match(r"\| \S.* \| (peer|shipped|corpus) \|", line)]
    assert len(normal_rows) == sum(1 for d in data["differences"] if d["interpreter"] == "normal")


@pytest.mark.vllm
def test_the_reference_and_vllm_agree_on_every_shipped_table_and_setting() -> None:
    from kvcontract.conformance.engines.protocol import EngineUnavailable, load_engine

    try:
        engine = load_engine("vllm")
    except EngineUnavailable as exc:
        pytest.skip(f"vLLM is not installed here ({exc})")
    inputs = pa.shipped_inputs(engine.version)
    cases = pa.compare_inputs(inputs, engine, pa.load_reviews(REVIEWS, "vllm", engine.version))
    assert len(cases) == len(inputs) * 4 >= 40
    assert [(c.input.name, pa.setting_name(c.hybrid, c.block_outermost), [str(d) for d in c.differences])
            for c in cases if c.differences] == []
