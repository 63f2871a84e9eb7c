"""The corpus as data (kvcontract.conformance.contract.corpus), where an input comes from
(kvcontract.conformance.contract.inputs), and `kvcontract tables` / `--tables` on the command line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvcontract.conformance.contract.corpus import (
    Corpus,
    CorpusFileError,
    CorpusTable,
    Settings,
    Skipped,
    corpus_from_json,
    corpus_to_json,
    distinct_tables,
    read_corpus,
    read_table_file,
    table_from_file_json,
    table_to_file_json,
    write_corpus,
)
from kvcontract.conformance.contract.inputs import CORPUS, SYNTHETIC, VARIATION, CorpusIndex
from kvcontract.conformance.engines.vllm.corpus import PINNED_RELEASE, shipped_path
from kvcontract.reference import FullAttentionSpec, KVDtype, MLAAttentionSpec, SlidingWindowSpec

FULL = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
SWA = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16, sliding_window=4096)
MLA = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16)


def _table(name: str, specs: list[object], **settings: object) -> CorpusTable:
    layers = tuple((f"model.layers.{i}.self_attn.attn", s) for i, s in enumerate(specs))
    return CorpusTable(name=name, architecture=name.split("+")[0], layers=layers,  # type: ignore[arg-type]
                       settings=Settings(block_size=16, layout="LBNHC", **settings))  # type: ignore[arg-type]


def _corpus() -> Corpus:
    return Corpus(engine="toy", release="1", tables=[
        _table("Gemma", [SWA] * 5 + [FULL]), _table("Gemma+kv-fp8", [SWA] * 5 + [FULL], cache_dtype="fp8"),
        _table("Llama", [FULL] * 4), _table("Llama2", [FULL] * 4), _table("DeepSeek", [MLA] * 3),
        _table("Llama+wide", [dataclasses.replace(FULL, num_kv_heads=32)] * 4)],
        skipped=[Skipped("Bert", "Bert", "ValueError: no KV cache")], digest="d")


def test_a_corpus_round_trips_through_its_file_with_each_distinct_spec_stored_once(tmp_path: Path) -> None:
    corpus = _corpus()
    data = corpus_to_json(corpus)
    assert len(data["specs"]) == 4  # FULL, SWA, MLA, the wide FULL
    for path in (tmp_path / "c.json", tmp_path / "c.json.gz"):
        write_corpus(corpus, path)
        back = read_corpus(path)
        assert [(t.name, t.layers, t.settings) for t in back.tables] == \
            [(t.name, t.layers, t.settings) for t in corpus.tables]
        assert back.skipped == corpus.skipped and back.digest == "d"
    with pytest.raises(CorpusFileError, match="not a corpus file"):
        corpus_from_json({"corpus": 99}, "x.json")


def test_tables_a_planner_cannot_tell_apart_are_one_representative() -> None:
    reps = {t.name: names for t, names in distinct_tables(_corpus())}
    assert reps["Llama"] == ["Llama", "Llama2"]  # the same specs in the same order, other names
    assert reps["Gemma"] == ["Gemma", "Gemma+kv-fp8"]  # the fp8 variant keeps the specs here (toy)
    assert len(reps) == 4


def test_a_table_file_round_trips_with_its_settings_and_ranges(tmp_path: Path) -> None:
    table = _table("Gemma", [SWA] * 5 + [FULL], hybrid=False)
    data = table_to_file_json(table)
    assert data["layers"][0]["names"] == ["model.layers.{0..4}.self_attn.attn"]
    path = tmp_path / "gemma.json"
    path.write_text(json.dumps(data))
    back = read_table_file(path)
    assert back.layers == table.layers and back.settings == table.settings and back.built_by.startswith("file:")


@pytest.mark.parametrize(("data", "message"), [
    ({"model": "m", "layers": [{"names": ["a"], "spec": {"kind": "FullAttentionSpec", "block_size": "x"}}]},
     r"layers\.0\.spec"),
    ({"model": "m", "layers": [], "settings": {"hybrid": "yes"}}, r"settings\.hybrid: 'yes' is not true or false"),
    ({"model": "m", "layers": [], "settings": {"blocksize": 16}}, r"unknown setting 'blocksize'"),
    ({"model": "m", "layers": [], "settings": {"block_size": True}}, r"settings\.block_size: True is not an integer"),
    ([1, 2], "a JSON object"),
])
def test_a_malformed_table_file_names_the_entry_and_the_field(data: object, message: str) -> None:
    with pytest.raises(CorpusFileError, match=message):
        table_from_file_json(data, "mine.json")


def test_a_user_table_named_like_a_corpus_table_is_refused() -> None:
    with pytest.raises(CorpusFileError, match="in the corpus already"):
        _corpus().with_tables([_table("Llama", [FULL])])


def test_inputs_are_corpus_one_field_variations_or_synthetic() -> None:
    index = CorpusIndex.of(_corpus())
    assert index.classify_specs([FULL, FULL]) == CORPUS
    wide = dataclasses.replace(FULL, num_kv_heads=32)  # a value another corpus table's layer has
    assert index.classify_specs([FULL, wide]) == VARIATION
    odd = dataclasses.replace(FULL, num_kv_heads=3)  # a value no corpus layer has
    assert index.classify_specs([FULL, odd]) == SYNTHETIC
    assert index.classify_specs([FULL, dataclasses.replace(wide, block_size=64)]) == SYNTHETIC  # two fields
    assert index.classify_specs([FULL, MLA]) == SYNTHETIC
    llama = _corpus().by_name()["Llama"].layers
    assert index.classify_table(llama) == CORPUS
    assert index.classify_table((*llama[:3], (llama[3][0], wide))) == VARIATION
    assert index.classify_table((*llama[:3], (llama[3][0], odd))) == SYNTHETIC


def _kvcontract(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvcontract", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)


def test_tables_lists_the_shipped_corpus_and_shows_and_exports_a_table(tmp_path: Path) -> None:
    if not shipped_path(PINNED_RELEASE).is_file():
        pytest.skip("no shipped corpus")
    listing = _kvcontract("tables", "--engine", "reference", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert f"corpus of vllm {PINNED_RELEASE}" in listing.stdout and "architectures built" in listing.stdout
    assert "  LlamaForCausalLM " in listing.stdout and "not built (" in listing.stdout
    shown = _kvcontract("tables", "LlamaForCausalLM", "--engine", "reference", cwd=tmp_path)
    assert shown.returncode == 0 and "FullAttentionSpec(" in shown.stdout
    out = tmp_path / "llama.json"
    exported = _kvcontract("tables", "LlamaForCausalLM", "--engine", "reference", "--export", str(out), cwd=tmp_path)
    assert exported.returncode == 0 and read_table_file(out).layers == \
        read_corpus(shipped_path(PINNED_RELEASE)).by_name()["LlamaForCausalLM"].layers
    unknown = _kvcontract("tables", "LlamaForCausalLMX", "--engine", "reference", cwd=tmp_path)
    assert unknown.returncode == 2 and "did you mean LlamaForCausalLM" in unknown.stderr


def test_a_malformed_tables_file_is_a_usage_error_before_any_engine_loads(tmp_path: Path) -> None:
    bad = tmp_path / "mine.json"
    bad.write_text(json.dumps({"model": "mine", "layers": [{"names": ["a"], "spec": {"kind": "FullAttentionSpec",
                                                                                        "block_size": 16}}]}))
    done = _kvcontract("check", "--engine", "no-such-engine-here", "--tables", str(bad), cwd=tmp_path)
    assert done.returncode == 2
    done = _kvcontract("check", "--engine", "reference", "--tables", str(bad), "--corpus", "none", cwd=tmp_path)
    assert done.returncode == 2 and "mine.json: layers.0.spec" in done.stderr and "loading" not in done.stderr
