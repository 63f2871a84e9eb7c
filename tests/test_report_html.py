"""``kvcontract report``: the page's structure (every section, anchors that resolve, nothing
fetched at view time), a section per defect with its engine line, a drawing per corpus table
with the differences marked, the history said for what it is, clear usage errors, and the plan
workers surviving an engine that crashes or hangs.

The fixture ``tests/data/report/check-mutant.json`` is ``kvcontract check --engine
mutant:hybrid-flag-ignored --profile quick --json`` (kit 0.2.0) cut to eight corpus tables
(records' witnesses and snippets dropped; the defects' repros kept).
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kvcontract import cli
from kvcontract.conformance.reports.html import drawing, history, plans, source
from kvcontract.conformance.reports.html.render import SECTIONS, NotACheckReport, load_check

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "report" / "check-mutant.json"
HISTORY = ROOT / "docs" / "vllm-history" / "findings.json"
pytest.importorskip("jinja2", reason="the report extra (jinja2, matplotlib) is not installed")
pytest.importorskip("matplotlib", reason="the report extra (jinja2, matplotlib) is not installed")


class Page(HTMLParser):
    """What the tests look at: ids, links, resources, plan drawings and the defects' articles."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.resources: list[tuple[str, str]] = []
        self.tags: dict[str, int] = {}
        self.drawings: list[dict[str, str]] = []
        self.plans: list[str] = []
        self.articles: list[str] = []
        self.hit_lines: list[str] = []
        self._in_hit = 0
        self._hit_text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if "id" in a and tag != "clippath":
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        for attr in ("src", "srcset"):
            if attr in a:
                self.resources.append((tag, a[attr]))
        if tag == "link" or (tag == "use" and not a.get("href", "#").startswith("#")):
            self.resources.append((tag, a.get("href", "")))
        if tag == "svg" and "plan-drawing" in a.get("class", ""):
            self.drawings.append(a)
        if tag == "details" and "plan" in a.get("class", "").split():
            self.plans.append(a["id"])
        if tag == "article" and "defect" in a.get("class", ""):
            self.articles.append(a["id"])
        if tag == "span" and "hit" in a.get("class", "").split():
            self._in_hit = 1
            self._hit_text = []
        elif self._in_hit:
            self._in_hit += 1

    def handle_endtag(self, tag: str) -> None:
        if self._in_hit and tag == "span":
            self._in_hit -= 1
            if not self._in_hit:
                self.hit_lines.append("".join(self._hit_text))

    def handle_data(self, data: str) -> None:
        if self._in_hit:
            self._hit_text.append(data)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """The fixture rendered with its engine's plans (the mutant plans in a worker) and kept plans."""
    folder = tmp_path_factory.mktemp("report")
    out, kept = folder / "report.html", folder / "plans.json"
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--engine", "mutant:hybrid-flag-ignored",
                     "--save-plans", str(kept)]) == 0
    return out, out.read_text(encoding="utf-8"), kept


def test_every_section_is_there_and_every_link_resolves(rendered: tuple[Path, str, Path]) -> None:
    _, text, _ = rendered
    page = Page(text)
    assert set(SECTIONS) <= set(page.ids)
    assert len(page.ids) == len(set(page.ids)), [i for i in page.ids if page.ids.count(i) > 1][:5]
    assert page.hrefs, "the page links its sections"
    unresolved = [h for h in page.hrefs if not h.startswith("#") or h[1:] not in page.ids]
    assert unresolved == []
    for section in SECTIONS:
        assert f"#{section}" in page.hrefs


def test_the_page_fetches_nothing_at_view_time(rendered: tuple[Path, str, Path]) -> None:
    _, text, _ = rendered
    page = Page(text)
    assert page.resources == []
    assert page.tags.get("script", 0) == 0 and page.tags.get("iframe", 0) == 0
    assert not re.search(r"url\((?!#)", text), "a style that loads something"
    assert "@import" not in text


def test_one_section_per_defect_linked_from_the_summary(rendered: tuple[Path, str, Path]) -> None:
    _, text, _ = rendered
    report = load_check(FIXTURE)
    page = Page(text)
    assert len(page.articles) == len(report.defects) == 4
    for anchor in page.articles:
        assert f"#{anchor}" in page.hrefs
    for number, d in enumerate(report.defects, 1):
        assert f"D{number:02d} {d.summary}" in text
    assert "reachable (hybrid manager off)" in text


def test_the_engine_line_is_shown_in_its_source(rendered: tuple[Path, str, Path]) -> None:
    _, text, _ = rendered
    page = Page(text)
    # D01 is HybridFlagIgnored.plan_layers at mutants/planning.py:79, its def line; D04 is line 81
    assert any(line.lstrip("0123456789").strip().startswith("def plan_layers") for line in page.hit_lines)
    assert any("return super().plan_layers" in line and "hybrid=True" in line for line in page.hit_lines)
    assert "no engine line: the finding was not traced to one" in text  # the unlocated defects say so


def test_a_drawing_per_corpus_table_with_the_differences_marked(rendered: tuple[Path, str, Path]) -> None:
    _, text, _ = rendered
    page = Page(text)
    report = load_check(FIXTURE)
    # eight tables, two of which a planner cannot tell apart from another (Llama's two heads)
    assert 1 <= len(page.plans) <= len(report.tables)
    named = {name for name in report.tables if name in text}
    assert named == set(report.tables), "every table is drawn or listed under its representative"
    differing = [d for d in page.drawings if d["data-differs"] == "true"]
    assert differing, "the mutant's hybrid-off plans differ"
    assert all(d["data-differs"] in ("true", "false") for d in page.drawings)
    # the differing drawings carry the mark colour; the page opens those first
    first = text.index('data-differs="true"')
    assert drawing.DIFF in text[first:text.index("</svg>", first)]
    assert text.index('class="plan differs"') < text.index('class="plan"') if 'class="plan"' in text else True
    assert "D01 needs hybrid manager off" in text


def test_kept_plans_render_the_same_drawings(rendered: tuple[Path, str, Path], tmp_path: Path) -> None:
    _, text, kept = rendered
    out = tmp_path / "again.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--plans", str(kept)]) == 0
    again = Page(out.read_text(encoding="utf-8"))
    first = Page(text)
    assert [d["data-differs"] for d in again.drawings] == [d["data-differs"] for d in first.drawings]


def test_without_an_engine_only_the_reference_is_planned(tmp_path: Path) -> None:
    out = tmp_path / "ref.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--no-history"]) == 0
    page = Page(out.read_text(encoding="utf-8"))
    assert page.drawings and all(d["data-differs"] == "false" for d in page.drawings)
    assert "--engine NAME plans it too" in out.read_text(encoding="utf-8")


def test_the_history_says_what_it_is(tmp_path: Path) -> None:
    out = tmp_path / "history.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--history", str(HISTORY)]) == 0
    text = out.read_text(encoding="utf-8")
    data = history.read_history(HISTORY)
    assert f"{data.releases[0]} to {data.releases[-1]}" in text
    assert f"made on {data.date}" in text and "not this report's defects" in text
    assert 'class="history-chart"' in text
    section = text[text.index('id="history"'):text.index('id="reading"')]
    for row in history.per_release(data):
        assert f"<td>{row['release']}</td>" in section
    # a mutant's report gets no vLLM history unless asked
    out2 = tmp_path / "none.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(out2)]) == 0
    assert "the kit's history data is of vLLM releases" in html.unescape(out2.read_text(encoding="utf-8"))


@pytest.mark.parametrize("content, words", [
    ("not json at all", "not JSON"),
    ('{"kind": "mutants", "schema_version": "1"}', "not a check report (kind 'mutants'"),
    ('[1, 2]', "not a check report"),
    ('{"kind": "check", "engine": "x"}', "a malformed check report"),
])
def test_a_file_that_is_not_a_check_report_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             content: str, words: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert cli.main(["report", str(bad), "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert not (tmp_path / "x.html").exists()


def test_other_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(tmp_path / "missing.json")]) == 2
    assert "cannot be read" in capsys.readouterr().err
    plans_file = tmp_path / "p.json"
    plans_file.write_text('{"cases": []}')
    assert cli.main(["report", str(FIXTURE), "--out", str(tmp_path / "x.html"), "--plans", str(plans_file)]) == 2
    assert "not a plans file" in capsys.readouterr().err
    assert cli.main(["report", str(FIXTURE), "--plans", str(plans_file), "--engine", "reference"]) == 2
    assert cli.main(["report", str(FIXTURE), "--history", str(FIXTURE), "--out", str(tmp_path / "x.html")]) == 2
    assert "not history data" in capsys.readouterr().err
    with pytest.raises(NotACheckReport):
        load_check(plans_file)


# -- the parts ------------------------------------------------------------------------------


def _group(layers: list[str], form: str = "merged", block: int = 16, pages: tuple[int, ...] = (4096,)) -> dict:
    return {"layers": layers, "form": form, "block_size": block, "pages": list(pages), "kinds": ["FullAttentionSpec"]}


def test_marks_name_what_differs() -> None:
    ref = {"num_blocks": 7, "groups": [_group(["a", "b"]), _group(["c"])]}
    same = json.loads(json.dumps(ref))
    assert not drawing.differs(drawing.marks(ref, same))
    assert not drawing.differs(drawing.marks(ref, None))
    split = {"num_blocks": 7, "groups": [_group(["a"]), _group(["b"]), _group(["c"])]}
    m = drawing.marks(ref, split)
    assert m["ref"] == [True, False] and m["eng"] == [True, True, False]
    form = {"num_blocks": 9, "groups": [_group(["a", "b"], form="per-member"), _group(["c"], block=32)]}
    m = drawing.marks(ref, form)
    assert m["fields"] == [["form"], ["block_size"]] and m["blocks"]
    refused = drawing.marks(ref, {"error": "ValueError: no"})
    assert refused["refusal"] and drawing.differs(refused)
    both = drawing.marks({"error": "a"}, {"error": "b"})
    assert not drawing.differs(both)


def test_a_drawing_marks_a_split_group_in_red() -> None:
    ref = {"num_blocks": 7, "groups": [_group(["a", "b"])]}
    eng = {"num_blocks": 7, "groups": [_group(["a"]), _group(["b"])]}
    layers = [("a", "FullAttentionSpec"), ("b", "SlidingWindowSpec")]
    svg = drawing.draw_pair(ref, eng, layers, "t1")
    assert svg.startswith("<svg") and 'data-differs="true"' in svg and drawing.DIFF in svg
    assert drawing.kind_colour("SlidingWindowSpec") in svg
    calm = drawing.draw_pair(ref, ref, layers, "t2")
    assert 'data-differs="false"' in calm and drawing.DIFF not in calm
    # matplotlib's own group ids (figure_1, axes_1, ...) would repeat across the page: gone
    assert not re.search(r'id="(figure|axes|patch|text|matplotlib)', svg)


def test_settings_take_a_defects_option() -> None:
    base = plans.Setting(hybrid=True, block_outermost=False)
    assert base.with_option("hybrid manager off") == plans.Setting(False, False, False)
    assert base.with_option("python -O, block-outermost layout") == plans.Setting(True, True, True)
    assert base.with_option("") == base
    assert plans.Setting(False, True, True).label == "hybrid off, block-outermost, python -O"


def _corpus_table(kind: str, only: bool = True) -> dict:
    from kvcontract.conformance.contract.corpus import read_corpus
    from kvcontract.conformance.engines.vllm.corpus import PINNED_RELEASE, shipped_path

    corpus = read_corpus(shipped_path(PINNED_RELEASE))
    return next(t.specs() for t in corpus.tables if (set(t.kinds()) == {kind} if only else kind in t.kinds()))


def test_a_worker_that_crashes_or_hangs_costs_one_case() -> None:
    full, mla, mamba = (_corpus_table(k) for k in ("FullAttentionSpec", "MLAAttentionSpec", "MambaSpec"))
    setting = {"hybrid": True, "block_outermost": False}
    items = [("a", full, 1 << 30, setting), ("b", mla, 1 << 30, setting), ("c", full, 1 << 30, setting)]
    said: list[str] = []
    answers = plans.run_workers("tests.engines.plan_misbehaving:plan_aborting", items, False, said.append)
    assert "error" not in answers["a"] and "error" not in answers["c"]
    assert "worker failed" in answers["b"]["error"]
    items = [("a", full, 1 << 30, setting), ("m", mamba, 1 << 30, setting), ("c", full, 1 << 30, setting)]
    answers = plans.run_workers("tests.engines.plan_misbehaving:plan_hanging", items, False, said.append, timeout=8)
    assert "did not answer within 8 s" in answers["m"]["error"]
    assert "error" not in answers["a"] and "error" not in answers["c"]
    sliding = _corpus_table("SlidingWindowSpec", only=False)
    items = [("s", sliding, 1 << 30, setting), ("c", full, 1 << 30, setting)]
    answers = plans.run_workers("tests.engines.plan_misbehaving:plan_exiting", items, False, said.append)
    assert "ended without answering" in answers["s"]["error"] and "error" not in answers["c"]
    unknown = plans.run_workers("no.such.module:factory", items[:1], False, said.append)
    assert "could not be loaded" in unknown["s"]["error"]


def test_source_excerpts_say_why_when_they_cannot_show() -> None:
    shown = source.excerpt("mutants/planning.py:79", [79], engine="mutant:x", version=_kit_version())
    assert shown.lines and 79 in shown.marked and shown.first == 74
    assert any("def plan_layers" in text for _, text, hit in shown.numbered() if hit)
    old = source.excerpt("mutants/planning.py:79", [79], engine="mutant:x", version="0.0.1")
    assert not old.lines and "the report's mutant is 0.0.1" in old.note
    missing = source.excerpt("nosuchpackage_xyz/a.py:3", [3], engine="x", version="1")
    assert not missing.lines and "give --source DIR" in missing.note
    assert "not traced" in source.excerpt("", [], engine="x", version="1").note
    given = source.excerpt("mutants/planning.py:2", [2], engine="x", version="1",
                           given=str(ROOT / "conformance" / "engines"))
    assert given.first == 1 and "--source" in given.note


def _kit_version() -> str:
    from kvcontract import __version__

    return __version__


def test_history_rows_of_a_defect() -> None:
    data = history.read_history(HISTORY)
    row = data.rows[0]
    found = history.for_defect(data, [row["clause"]], [row["signature"]])
    assert found["rows"] >= 1 and found["first"] == row["first_bad"]
    assert history.for_defect(data, ["X"], ["y"]) == {"rows": 0, "defect": None}
    assert data.date and data.releases == sorted(data.releases, key=history.version_key)


def test_the_history_told_in_defects(tmp_path: Path) -> None:
    """Issue 40 item 3: beside the findings, the history in defects: each defect of the report finds
    its own row (first bad, gone in, reachable in) and the section lists the MUST defects."""
    data = history.read_history(HISTORY)
    if not data.defects:
        pytest.skip("the committed history has no defects.json")
    must = [d for d in data.defects if d["ever_must"]]
    assert must, "no MUST defect in the committed history"
    found = history.for_defect(data, [], [], must[0]["id"])
    assert found["defect"]["first_bad"] == must[0]["first_bad"]
    out = tmp_path / "h.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--history", str(HISTORY)]) == 0
    section = html.unescape(out.read_text(encoding="utf-8"))
    section = section[section.index('id="history"'):section.index('id="reading"')]
    assert "MUST defects, release by release" in section
    assert all(f'<td class="mono">{d["id"]}</td>' in section for d in must)


def test_kept_plans_draw_without_the_corpus(rendered: tuple[Path, str, Path], tmp_path: Path) -> None:
    _, text, kept = rendered
    out = tmp_path / "nocorpus.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--plans", str(kept), "--corpus", "none"]) == 0
    assert len(Page(out.read_text(encoding="utf-8")).drawings) == len(Page(text).drawings)


def test_the_plan_agreement_is_listed_under_its_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = load_check(FIXTURE)
    agreement = tmp_path / "agreement.json"
    agreement.write_text(json.dumps({
        "engine": report.engine, "engine_version": report.engine_version, "settings": ["hybrid on, layer-outermost"],
        "summary": {"cases": 8, "differ": 1},
        "differences": [{"table": "LlamaForCausalLM", "origin": "corpus", "setting": "hybrid off, block-outermost",
                         "interpreter": "optimized", "signature": "plan-differs-groups:FullAttentionSpec",
                         "defect": "Some.function:wrong-plan", "first": "groups: reference 1, engine 2"},
                        {"table": "elsewhere", "origin": "peer", "setting": "x", "interpreter": "normal",
                         "signature": "s", "defect": None, "first": "f"}]}))
    out = tmp_path / "agreed.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--agreement", str(agreement)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "agreement: 1 differ" in text and "Some.function:wrong-plan" in text
    assert "groups: reference 1, engine 2" in text and "elsewhere" not in text
    # the kit's own agreement is vLLM's: given for a mutant's report, a usage error
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--agreement",
                     str(ROOT / "docs" / "plan-agreement.json")]) == 2
    assert "the report of mutant:hybrid-flag-ignored" in capsys.readouterr().err
    # and given as --plans, it is named for what it is
    assert cli.main(["report", str(FIXTURE), "--out", str(out), "--plans", str(agreement)]) == 2
    assert "give it as --agreement" in capsys.readouterr().err


def test_compact_svg_rounds_coordinates_not_text() -> None:
    svg = ('<?xml version="1.0"?>\n<svg width="10.123456pt" viewBox="0 0 10.987654 5">\n<metadata>m</metadata>\n'
           '<g id="axes_1">\n<path d="M 1.23456 2.34567 \nL 3.45678 4.5 \nz"/>\n<text x="1.55555">0.10.2</text>\n</g></svg>')
    out = drawing.compact_svg(svg, "c")
    assert out.startswith('<svg class="c" role="img" width="10.1pt"') and "metadata" not in out
    assert 'd="M 1.2 2.3 L 3.4 4.5 z"' in out and ">0.10.2</text>" in out and 'id="axes_1"' not in out
