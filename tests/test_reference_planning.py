"""Chapter PLAN's reference (``kvcontract.reference.planning``) and ``kvcontract plan``.

The reference plans every real model table of the catalogue as vLLM 0.34.0 does (the
groups its planner made are recorded in the tables' JSON, so no vLLM is needed here), and
its plans keep the chapter's invariants at any budget."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kvcontract import reference
from kvcontract.cli import main
from kvcontract.conformance.engines.vllm.tables import load_tables
from kvcontract.reference import (
    FullAttentionSpec,
    KVDtype,
    MambaSpec,
    RSWASpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    planning,
    sizing,
)

TABLES = {t.name: t for t in load_tables("0.34.0")}


def _attn(kind: type, **kw: object) -> object:
    args: dict[str, object] = {"block_size": 16, "num_kv_heads": 1, "head_size": 64, "dtype": KVDtype.BFLOAT16}
    return kind(**{**args, **kw})


@pytest.mark.parametrize("name", list(TABLES))
def test_the_reference_plans_every_real_table_as_vllm_does(name):
    table = TABLES[name]
    recorded = table.grouping["normal"]["groups"]
    groups = planning.plan_groups(table.specs())
    assert sorted(sorted(g.layer_names) for g in groups) == sorted(sorted(r["layers"]) for r in recorded)
    by_layers = {frozenset(r["layers"]): r for r in recorded}
    for g in groups:
        r = by_layers[frozenset(g.layer_names)]
        assert (g.spec is None) == (r["spec"]["kind"] == "UniformTypeKVCacheSpecs"), g.describe()
        assert g.block_size == r["spec"]["block_size"], g.describe()
        page = g.spec.page_size_bytes if g.spec is not None else sum(s.page_size_bytes for _, s in g.layer_specs)
        assert page == r["spec"]["page_size_bytes"], g.describe()


@pytest.mark.parametrize("name", list(TABLES))
@pytest.mark.parametrize("memory", [1 << 20, (8 << 30) + 13, 80 << 30])
def test_plans_keep_the_chapters_invariants(name, memory):
    p = sizing.plan(TABLES[name].specs(), memory)
    assert p.used_bytes <= memory  # PLAN-SIZE-1
    assert memory - p.used_bytes < p.bytes_per_block  # PLAN-SIZE-2
    held = [n for t in p.tensors for n in t.layer_names]
    assert sorted(held) == sorted(TABLES[name].specs())  # PLAN-TENSOR-1: each layer once
    specs = {n: s for g in p.groups for n, s in g.layer_specs}
    for t in p.tensors:
        assert len({specs[n].page_size_bytes for n in t.layer_names}) == 1
        assert t.size_bytes == p.used_bytes and t.end(p.num_blocks) <= t.size_bytes


def test_the_per_member_type_is_symmetric_and_role_driven():
    sliding = _attn(SlidingWindowSpec, sliding_window=128)
    sliding_mla = _attn(SlidingWindowMLASpec, head_size=576, sliding_window=128)
    replaying = _attn(SlidingWindowMLASpec, head_size=576, sliding_window=128, bounded_replay=True)
    assert planning.is_uniform_type({"a": sliding, "b": sliding_mla})  # one manager, same window
    for pair in ((sliding, replaying), (replaying, sliding)):  # the replay bound is read by the manager
        assert not planning.is_uniform_type(dict(zip("ab", pair, strict=True)))
    assert planning.type_mismatch(sliding, replaying) == "bounded_replay"
    retaining = _attn(SlidingWindowSpec, sliding_window=128, extra_retained_tokens=4)
    assert planning.type_mismatch(sliding, retaining) == "extra_retained_tokens"
    plain, rswa = _attn(FullAttentionSpec), _attn(RSWASpec, rswa_window=64)
    assert planning.type_mismatch(plain, rswa) == "manager" == planning.type_mismatch(rswa, plain)
    assert planning.type_mismatch(plain, _attn(FullAttentionSpec, block_size=32)) == "block_size"
    small = MambaSpec(block_size=16, shapes=((4, 256),), dtypes=(KVDtype.BFLOAT16,))
    large = MambaSpec(block_size=16, shapes=((8, 256),), dtypes=(KVDtype.BFLOAT16,))
    assert planning.type_mismatch(small, large) == "page_size_bytes"


def test_a_request_holds_its_window_not_its_length():
    sliding = _attn(SlidingWindowSpec, sliding_window=128)
    assert sizing.blocks_per_request(sliding, 8192, 256) == -(-(127 + 256) // 16) + 1
    assert sizing.blocks_per_request(sliding, 64, 256) == 4 + 1  # never more than the request
    assert sizing.blocks_per_request(_attn(FullAttentionSpec), 8192, 256) == 512
    mamba = MambaSpec(block_size=16, shapes=((4, 256),), dtypes=(KVDtype.BFLOAT16,), num_speculative_blocks=2)
    assert sizing.blocks_per_request(mamba, 8192, 256) == 3


def test_a_budget_below_one_block_plans_no_block_and_a_negative_budget_is_refused():
    p = sizing.plan(TABLES["llama-3.1-8b"].specs(), 1000)
    assert p.num_blocks == 0 and p.used_bytes == 0
    with pytest.raises(reference.GroupingError, match="budget"):
        sizing.plan(TABLES["llama-3.1-8b"].specs(), -1)


# -- kvcontract plan --------------------------------------------------------------------------


def test_plan_prints_the_reference_plan_of_a_corpus_table(capsys):
    assert main(["plan", "DeepseekV3ForCausalLM", "--memory", "80GiB"]) == 0
    out = capsys.readouterr().out
    assert "DeepseekV3ForCausalLM (61 layers" in out and "1 group, 19099 blocks" in out and "merged" in out
    assert "such requests fit at once" in out and len(out.splitlines()) <= 10


def test_plan_reads_a_layer_table_file_and_writes_json(tmp_path: Path, capsys):
    example = Path(reference.__file__).parent / "examples" / "jamba-style-mamba-hybrid.json"
    out_json = tmp_path / "plan.json"
    assert main(["plan", str(example), "--memory", "2GiB", "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text())
    assert data["reference"]["num_blocks"] > 0 and len(data["reference"]["groups"]) == 8
    assert " st" in capsys.readouterr().out  # a state-space group counts states, not tokens


@pytest.mark.parametrize(("argv", "says"), [
    (["plan", "DeepseekV3ForCausalM"], "did you mean DeepseekV3ForCausalLM"),
    (["plan", "Gemma3ForCausalLM", "--memory", "8XB"], "is not a size"),
    (["plan", "missing.json"], "no such file"),
    (["plan"], "give a table"),
    (["plan", "Gemma3ForCausalLM", "--engine", "nope"], "nope"),
    (["plan", "BertModel"], "no KV-cache layers"),
])
def test_plan_rejects_bad_input_before_planning(argv, says, capsys):
    assert main(argv) == 2
    assert says in capsys.readouterr().err


def test_plan_with_the_hybrid_manager_off_refuses_a_mamba_hybrid(capsys):
    assert main(["plan", "FalconH1ForCausalLM", "--hybrid-off"]) == 1
    assert "cannot plan" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here")
@pytest.mark.parametrize("layout", ["layer-outermost", "block-outermost"])
@pytest.mark.parametrize("name", ["DeepseekV4ForCausalLM", "DeepseekV3ForCausalLM+mtp", "Qwen3NextForCausalLM"])
def test_plan_with_vllm_shows_no_difference_on_real_tables(name, layout, capsys):
    assert main(["plan", name, "--engine", "vllm", "--memory", "16GiB", "--layout", layout]) == 0
    out = capsys.readouterr().out
    assert "engine (vllm 0.34.0)" in out and "differences: none" in out


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here")
@pytest.mark.parametrize("block_outermost", [False, True], ids=["layer-outermost", "block-outermost"])
@pytest.mark.parametrize("hybrid", [True, False], ids=["hybrid", "hybrid-off"])
def test_the_reference_plans_every_real_table_as_vllm_plans_it(hybrid, block_outermost):
    """Groups, blocks and tensor placement, equal on every real table, in both hybrid modes and
    both layouts (a table both refuse counts as equal)."""
    from kvcontract.conformance.engines.protocol import load_engine

    engine = load_engine("vllm")

    def shape(plan):
        return (plan.num_blocks, sorted(sorted(g.layer_names) for g in plan.groups),
                sorted((t.layer_names, t.size_bytes, t.offset, t.layer_stride, t.block_stride) for t in plan.tensors))

    for name, table in TABLES.items():
        specs = table.specs()
        try:
            want = shape(sizing.plan(specs, 8 << 30, hybrid=hybrid, block_outermost=block_outermost))
        except reference.GroupingError:
            want = None
        try:
            got = shape(engine.plan_layers({n: engine.to_engine(s) for n, s in specs.items()}, 8 << 30,
                                           hybrid=hybrid, block_outermost=block_outermost))
        except Exception:  # noqa: BLE001 - the engine refuses: equal when the reference refuses too
            got = None
        assert got == want, name
