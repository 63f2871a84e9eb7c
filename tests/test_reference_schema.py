"""SPEC-VALID-1 at the JSON boundary: layer tables load, bad input is pointed at."""

from __future__ import annotations

import json

import pytest

from kvcontract.reference import KVDtype, MLAAttentionSpec
from kvcontract.reference.schema import (
    LayerTableError,
    example_tables,
    expand_names,
    load_layer_table,
    parse_layer_table,
)

FULL = {"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 1, "head_size": 64,
        "dtype": "bfloat16"}


def table(spec, names=("a",)):
    return {"model": "m", "layers": [{"names": list(names), "spec": spec}]}


def test_examples_load():
    tables = example_tables()
    assert {"deepseek-v3-dspark", "gemma-style-sliding-hybrid", "jamba-style-mamba-hybrid"} <= set(tables)
    for path in tables.values():
        assert load_layer_table(path).specs_by_layer


def test_values_are_converted_to_reference_types():
    spec = {"kind": "MLAAttentionSpec", "block_size": 64, "num_kv_heads": 1, "head_size": 576,
            "dtype": "bfloat16", "cache_role": "indexer", "non_causal_multi_token_decode": True}
    loaded = parse_layer_table(table(spec)).specs_by_layer["a"]
    assert isinstance(loaded, MLAAttentionSpec)
    assert loaded.dtype is KVDtype.BFLOAT16
    assert loaded.cache_role.value == "indexer"
    assert loaded.non_causal_multi_token_decode is True


@pytest.mark.parametrize(
    ("spec", "points_at"),
    [
        ({**FULL, "kind": "LinearAttentionSpec"}, "layers.0.spec"),
        ({**FULL, "block_size": -16}, "block_size must be >= 1"),
        ({**FULL, "block_size": 0}, "block_size must be >= 1"),
        ({**FULL, "dtype": "bf16"}, "layers.0.spec.FullAttentionSpec.dtype"),
        ({**FULL, "head_sz": 64}, "layers.0.spec.FullAttentionSpec.head_sz"),
        ({**FULL, "block_size": "16"}, "layers.0.spec.FullAttentionSpec.block_size"),
        ({k: v for k, v in FULL.items() if k != "head_size"}, "FullAttentionSpec.head_size"),
        ({**FULL, "sliding_window": 64, "attention_chunk_size": 64}, "at most one of"),
    ],
)
def test_bad_input_is_pointed_at(spec, points_at):
    with pytest.raises(LayerTableError, match=points_at.replace(".", r"\.")):
        parse_layer_table(table(spec))


def test_duplicate_layer_and_bad_files(tmp_path):
    with pytest.raises(LayerTableError, match="listed twice"):
        parse_layer_table(table(FULL, names=["l.{0..2}", "l.1"]))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(LayerTableError, match="not JSON"):
        load_layer_table(bad)
    with pytest.raises(LayerTableError, match="cannot read"):
        load_layer_table(tmp_path / "missing.json")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(table(FULL, names=["l.{0..3}"])))
    assert list(load_layer_table(good).specs_by_layer) == ["l.0", "l.1", "l.2", "l.3"]


def test_expand_names():
    assert expand_names("x.{2..4}.y") == ["x.2.y", "x.3.y", "x.4.y"]
    assert expand_names("plain") == ["plain"]
    with pytest.raises(ValueError, match="empty range"):
        expand_names("x.{4..2}")
