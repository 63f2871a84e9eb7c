"""Real models' layer tables shipped for vLLM 0.34.0 (conformance/engines/vllm/tables).

The loader and codec tests need no vLLM; the rebuild test rebuilds families from the
installed vLLM and compares them with the shipped JSON (skipped without vLLM).
"""

from __future__ import annotations

import pytest

from kvcontract.conformance.contract.codec import spec_from_json, spec_to_json
from kvcontract.conformance.engines.vllm.tables import (
    ModelTable,
    TablesNotFound,
    load_skipped,
    load_tables,
)

VERSION = "0.34.0"


@pytest.fixture(scope="module")
def tables() -> list[ModelTable]:
    return load_tables(VERSION)


def test_loader_reads_the_shipped_tables(tables: list[ModelTable]) -> None:
    names = [t.name for t in tables]
    assert len(names) == len(set(names))
    assert {"llama-3.1-8b", "deepseek-v3", "deepseek-v4"} <= set(names)
    for table in tables:
        assert table.layers, table.name
        assert table.source["release"] == f"vllm-{VERSION}"
        assert table.source["modules"] and table.source["builder"]
        for entry in table.source["config"].values():
            assert set(entry) == {"value", "source"} and entry["source"]
        assert len({name for name, _ in table.layers}) == len(table.layers)


def test_unknown_version_is_refused() -> None:
    with pytest.raises(TablesNotFound):
        load_tables("0.0.0")


def test_skipped_families_have_reasons() -> None:
    skipped = load_skipped(VERSION)
    assert skipped
    for entry in skipped:
        assert entry["name"] and len(entry["reason"]) > 20


def test_specs_round_trip_through_the_codec(tables: list[ModelTable]) -> None:
    for table in tables:
        for name, spec in table.layers:
            assert spec_from_json(spec_to_json(spec)) == spec, (table.name, name)
            assert spec_from_json(spec_to_json(spec, full=True)) == spec, (table.name, name)


def test_layer_counts_follow_the_config(tables: list[ModelTable]) -> None:
    by_name = {t.name: t for t in tables}
    for table in tables:
        assert len(table.layers) == table.source["expected_layers"], table.name
    config = by_name["deepseek-v3"].source["config"]
    assert len(by_name["deepseek-v3"].layers) == config["num_hidden_layers"]["value"]
    v4 = by_name["deepseek-v4"]
    layer_types = v4.source["config"]["layer_types"]["value"]
    rates = v4.source["config"]["compress_rates"]["value"]
    attn = [n for n, _ in v4.layers if n.endswith(".attn")]
    assert len(attn) == len(layer_types)
    c4 = sum(1 for t in layer_types if rates.get(t, 0) == 4)
    assert sum(1 for n, _ in v4.layers if n.endswith(".indexer.k_cache")) == c4
    gemma = by_name["gemma-3"]
    sliding = sum(1 for t in gemma.source["config"]["layer_types"]["value"]
                  if t == "sliding_attention")
    assert sum(1 for _, s in gemma.layers if type(s).__name__ == "SlidingWindowSpec") == sliding
    if "qwen3-next" in by_name:
        qwen = by_name["qwen3-next"]
        linear = sum(1 for t in qwen.source["config"]["layer_types"]["value"]
                     if t == "linear_attention")
        assert sum(1 for _, s in qwen.layers if type(s).__name__ == "MambaSpec") == linear


def test_grouping_outcomes_are_recorded(tables: list[ModelTable]) -> None:
    for table in tables:
        assert set(table.grouping) == {"normal", "optimized"}, table.name
        for outcome in table.grouping.values():
            assert ("groups" in outcome) or ("error" in outcome) or ("config_gap" in outcome)
            for group in outcome.get("groups", []):
                assert set(group["layers"]) <= {n for n, _ in table.layers}


def test_dspark_table_has_target_and_non_causal_draft_layers(tables: list[ModelTable]) -> None:
    """DeepSeek-V3 + DSpark: MLA target layers and draft MLA layers that differ only in
    ``non_causal_multi_token_decode`` (and ``is_draft``), grouped together in both modes."""
    table = next(t for t in tables if t.name == "deepseek-v3+dspark")
    layers = table.specs()
    target_count = table.source["config"]["num_hidden_layers"]["value"]
    draft_count = table.source["config"]["draft_num_hidden_layers"]["value"]
    assert len(layers) == target_count + draft_count
    draft = {n: s for n, s in layers.items() if getattr(s, "is_draft", False)}
    target = {n: s for n, s in layers.items() if n not in draft}
    assert len(target) == target_count and len(draft) == draft_count
    assert set(draft) == {f"model.layers.{target_count + i}.self_attn"
                          for i in range(draft_count)}
    for spec in draft.values():
        assert type(spec).__name__ == "MLAAttentionSpec"
        assert spec.non_causal_multi_token_decode is True and spec.is_draft is True
    for spec in target.values():
        assert type(spec).__name__ == "MLAAttentionSpec"
        assert spec.non_causal_multi_token_decode is False and spec.is_draft is False
    assert table.source["notes"] and any("assumption" in n for n in table.source["notes"])
    for mode, outcome in table.grouping.items():
        groups = outcome["groups"]
        assert len(groups) == 1, mode
        assert set(groups[0]["layers"]) == set(layers), mode
        assert groups[0]["spec"]["non_causal_multi_token_decode"] is True, mode
