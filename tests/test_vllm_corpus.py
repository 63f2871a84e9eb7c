"""The vLLM corpus: every architecture built by the release's own model code.

Fast: the shipped corpus (its identity, its figures, its skip reasons), the config rules,
the published values' sources, the TP rule. Slow (``vllm``): the stand-ins installed and
undone in a fresh process, and a handful of architectures (one per kind) rebuilt in
workers equal to the shipped corpus's entries.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kvcontract.conformance.contract.codec import spec_to_json
from kvcontract.conformance.contract.corpus import read_corpus
from kvcontract.conformance.engines.vllm import corpus as vllm_corpus
from kvcontract.conformance.engines.vllm.corpus import configs, drafts, parallel

SHIPPED = vllm_corpus.shipped_path(vllm_corpus.PINNED_RELEASE)
HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed here; scripts/setup.sh installs it")

# one architecture per kind of layer table, and a draft pair
KINDS = {
    "LlamaForCausalLM": "FullAttentionSpec",
    "Gemma3ForCausalLM": "SlidingWindowSpec",
    "DeepseekV3ForCausalLM": "MLAAttentionSpec",
    "Qwen3NextForCausalLM": "MambaSpec",
    "Llama4ForCausalLM": "ChunkedLocalAttentionSpec",
    "LlamaForCausalLM+eagle3": "FullAttentionSpec",
}


@pytest.fixture(scope="module")
def shipped():
    return read_corpus(SHIPPED)


def test_shipped_corpus_figures(shipped) -> None:
    base = [t for t in shipped.tables if t.name == t.architecture]
    with_kv = {t.architecture for t in base if t.layers}
    assert len(with_kv) >= 150, f"only {len(with_kv)} architectures built with KV-cache layers"
    for arch, kind in KINDS.items():
        table = shipped.by_name()[arch]
        assert kind in table.kinds(), (arch, table.kinds())
    for name in ("DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM", "Qwen3NextForCausalLM",
                 "Qwen3_5ForCausalLM", "Llama4ForCausalLM", "GptOssForCausalLM"):
        assert shipped.by_name()[name].layers, name


def test_draft_pairs_mark_their_draft_layers(shipped) -> None:
    built = [p for p in drafts.PAIRS if p.name in shipped.by_name()]
    assert {"eagle", "eagle3", "mtp", "extract_hidden_states"} <= {p.method for p in built}
    for pair in built:
        table, target = shipped.by_name()[pair.name], shipped.by_name()[pair.target]
        assert table.settings.draft == pair.method
        drafted = [n for n, s in table.layers if s.is_draft]
        assert drafted and len(table.layers) == len(target.layers) + len(drafted), pair.name
        assert all(not s.is_draft for n, s in table.layers if n in target.specs())


def test_every_skip_names_an_exception_or_a_rule(shipped) -> None:
    rule = re.compile(r"^(\w+(Error|Exception|Exit|NoConfig)\b|NoConfig:|its model module |"
                      r"a speculative-decoding draft|the target cannot be built|not in the release|"
                      r"\S+\(\) with its published values fails|timeout|crashed|the kit's build task)")
    assert shipped.skipped
    for entry in shipped.skipped:
        assert entry.reason.strip(), entry.name
        assert rule.search(entry.reason), (entry.name, entry.reason)


def test_not_offered_cache_dtypes_are_not_skips(shipped) -> None:
    offered = shipped.meta["not_offered_by_backend"]
    assert offered, "no cache dtype is refused by any backend: the classification did not run"
    skipped = {s.name for s in shipped.skipped}
    for dtype, entry in offered.items():
        assert entry["architectures"]
        assert not {f"{a}+kv-{dtype}" for a in entry["architectures"]} & skipped


def test_tp_variants_record_their_size(shipped) -> None:
    tp = [t for t in shipped.tables if re.search(r"\+tp\d+$", t.name)]
    assert tp, "no TP variant built"
    for table in tp:
        assert table.settings.tensor_parallel_size == int(table.name.rsplit("tp", 1)[1])
        base = shipped.by_name()[table.architecture]
        assert parallel.depends_on_tp([(n, spec_to_json(s)) for n, s in base.layers])


@needs_vllm
def test_shipped_digest_is_the_pinned_wheel(shipped) -> None:
    ident = vllm_corpus.identity()
    assert ident is not None
    if ident.release != vllm_corpus.PINNED_RELEASE:
        pytest.skip(f"vLLM {ident.release} installed, the corpus is {vllm_corpus.PINNED_RELEASE}'s")
    assert shipped.digest == ident.key
    assert vllm_corpus.find(ident) == SHIPPED


def test_published_values_each_have_a_source() -> None:
    data = tomllib.loads(configs.PUBLISHED_FILE.read_text(encoding="utf-8"))
    assert data["architecture"]
    for arch, entry in data["architecture"].items():
        assert ":" in entry["config"], arch
        values, sources = entry.get("values", {}), entry.get("sources", {})
        assert set(values) == set(sources), (arch, set(values) ^ set(sources))
        assert all(str(s).strip() for s in sources.values()), arch


def test_depends_on_tp_rule() -> None:
    mla = [("a", {"kind": "MLAAttentionSpec", "num_kv_heads": 1})]
    few = [("a", {"kind": "FullAttentionSpec", "num_kv_heads": 4})]
    many = [("a", {"kind": "FullAttentionSpec", "num_kv_heads": 8})]
    assert "MLA" in (parallel.depends_on_tp(mla) or "")
    assert "replicated" in (parallel.depends_on_tp(few) or "")
    assert parallel.depends_on_tp(many) is None
    assert parallel.depends_on_tp([]) is None


def test_pairs_are_named_by_target_and_method() -> None:
    for pair in drafts.PAIRS:
        assert pair.name == f"{pair.target}+{pair.method}"
        assert drafts.pair_named(pair.name) is pair
        assert set(pair.draft_config or {}) <= set(pair.sources), pair.name
    with pytest.raises(KeyError):
        drafts.pair_named("NoSuchModel+eagle")


@needs_vllm
@pytest.mark.vllm
@pytest.mark.parametrize(("arch", "rule"), [
    ("LlamaForCausalLM", "published"),
    ("Gemma3ForCausalLM", "transformers-auto"),
    ("Step5ForCausalLM", "architecture-name"),
    ("PhiMoEForCausalLM", "architecture-name"),
])
def test_config_rules(arch: str, rule: str) -> None:
    choice = configs.choose(arch, "")
    assert choice.how == rule, (arch, choice)
    if rule == "published":
        assert choice.values and set(choice.values) == set(choice.sources)


@needs_vllm
@pytest.mark.vllm
def test_config_rule_by_model_module_and_none() -> None:
    source = "from vllm.transformers_utils.configs.ovis import OvisConfig\nx: OvisConfig\n"
    assert configs.choose("SomethingNotNamedAfterATypeXyz", source).how == "model-module"
    with pytest.raises(configs.NoConfig, match="no config class available offline"):
        configs.choose("SomethingNotNamedAfterATypeXyz", "")


STANDIN_SCRIPT = r"""
import os, json
os.environ.update(CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR")
import torch
from kvcontract.conformance.engines.vllm.corpus import standin
first = standin.install(); again = standin.install()
from vllm.platforms import current_platform
before = {n: getattr(torch.accelerator, n) for n in standin.ACCELERATOR_ANSWERS}
with standin.model_init():
    inside = isinstance(torch.ops._C, standin.UnavailableOp), torch.empty(2, device="cuda").device.type
after = {n: getattr(torch.accelerator, n) is before[n] for n in before}
print(json.dumps({"same": first is again, "platform": type(current_platform).__name__,
                  "sm": current_platform.get_device_capability().to_int(), "inside": inside,
                  "ops_restored": not isinstance(getattr(torch.ops, "_C", None), standin.UnavailableOp),
                  "accelerator_restored": all(after.values()), "import_only": first["import_only"],
                  "availability": sorted(first["availability"])}))
"""


@needs_vllm
@pytest.mark.vllm
@pytest.mark.slow
def test_standins_install_once_and_undo_what_they_say() -> None:
    done = subprocess.run([sys.executable, "-c", STANDIN_SCRIPT], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["same"] and result["platform"] == "StandInCudaPlatform" and result["sm"] == 90
    assert result["inside"] == [True, "meta"]
    assert result["ops_restored"] and result["accelerator_restored"]
    assert result["availability"] == ["vllm.model_executor.layers.sparse_attn_indexer.has_deep_gemm"]


@needs_vllm
@pytest.mark.vllm
@pytest.mark.slow
def test_rebuilt_tables_equal_the_shipped_corpus(shipped) -> None:
    from kvcontract.conformance.engines.vllm.corpus.pool import Item
    from kvcontract.conformance.engines.vllm.corpus.tasks import BUILD_TASK
    from kvcontract.conformance.run.worker import Worker

    ident = vllm_corpus.identity()
    if ident is None or ident.key != shipped.digest:
        pytest.skip("the installed vLLM is not the one the shipped corpus was built from")
    for name in KINDS:  # each in a fresh worker: the result must not depend on what came before
        arch, _, method = name.partition("+")
        item = Item(name, arch, draft=name if method else None)
        with Worker() as worker:
            result = worker.run(BUILD_TASK, item.args(), timeout=600)
        assert result.ok and "table" in result.value, (name, result.error, result.value)
        built = result.value["table"]
        table = shipped.by_name()[name]
        assert [[n, s] for n, s in built["layers"]] == \
            [[n, spec_to_json(s)] for n, s in table.layers], name
        assert built["settings"] == table.settings.to_json(), name


def test_shipped_file_is_where_find_looks() -> None:
    assert SHIPPED.is_file() and SHIPPED.parent == Path(vllm_corpus.__file__).parent
