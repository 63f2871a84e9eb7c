"""Rebuild the shipped vLLM corpus and write docs/corpus.md from it.

    python scripts/vllm_corpus.py [--jobs 2] [--from CORPUS] [--no-write-corpus]

Builds the installed release's corpus (every architecture by its own model code,
``kvcontract.conformance.engines.vllm.corpus``), stamps it with the installed wheel's
identity (its ``digest``: what :func:`~kvcontract.conformance.engines.vllm.corpus.find`
matches), writes it to ``conformance/engines/vllm/corpus/vllm-<release>.json.gz`` and
writes ``docs/corpus.md``: the figures (architectures built, skipped by reason class,
tables, build seconds on this machine) and, for each family of the hand-written tables the
corpus replaces (``conformance/engines/vllm/tables/vllm-<release>.json``), the comparison
with the corpus table built from the model code, every difference with its explanation.
``--from CORPUS`` writes the doc from a corpus file already built (no build).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "corpus.md"

FAMILIES: dict[str, tuple[str | None, str]] = {
    # hand-written family -> (corpus table, why any difference)
    "llama-3.1-8b": ("LlamaForCausalLM",
                     "published.toml gives LlamaForCausalLM the Llama-3.1-8B values the builder "
                     "used; the corpus also records the pick the builder did not: "
                     "max_model_len 131072."),
    "gemma-3": ("Gemma3ForCausalLM", "both from transformers' Gemma3TextConfig defaults."),
    "gpt-oss-20b": ("GptOssForCausalLM", "both from transformers' GptOssConfig defaults."),
    "llama-4-scout": ("Llama4ForCausalLM",
                      "both from transformers' Llama4TextConfig defaults; vLLM 0.34.0 keeps the "
                      "hybrid manager on for chunked local attention "
                      "(VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1; it is "
                      "turned off only with an EAGLE draft that reads the target's hidden states)."),
    "deepseek-v3": ("DeepseekV3ForCausalLM",
                    "both from transformers' DeepseekV3Config defaults; the builder fixed the "
                    "backend (FlashMLA), the model code gets the platform's pick for SM 9.0."),
    "deepseek-v3.2": ("DeepseekV32ForCausalLM",
                      "both from transformers' DeepseekV32Config defaults; the builder fixed "
                      "FlashMLASparse, the platform picks its sparse MLA backend for SM 9.0 "
                      "(recorded in the table's backends)."),
    "deepseek-v4": ("DeepseekV4ForCausalLM",
                    "both from transformers' DeepseekV4Config defaults, both resolving the cache "
                    "dtype auto to fp8_ds_mla."),
    "qwen3-next": ("Qwen3NextForCausalLM",
                   "both from transformers' Qwen3NextConfig defaults; the builder assumed prefix "
                   "caching off (mamba_cache_mode none, Mamba block = max_model_len); vLLM "
                   "0.34.0's config leaves prefix caching on, so its Gated DeltaNet layers "
                   "cache in 'align' mode with the attention block size (576) and one prefill "
                   "checkpoint block: the 36 linear-attention layers differ, the 12 attention "
                   "layers are equal."),
    "llama-3.1-8b+extract-hidden-states": (
        "LlamaForCausalLM+extract_hidden_states",
        "the builder made the cache-only layer by hand with the aux-layer rule; the corpus "
        "loads ExtractHiddenStatesModel through the runner's speculator with the same layer ids."),
    "deepseek-v3+dspark": (
        None,
        "not a pairing vLLM 0.34.0 serves: DSpark on a DeepSeek-V3 target resolves to "
        "DSparkDraftModel, which needs a DeepSeek-V4/V4.1 target config "
        "(DSparkSpeculatorConfig.adapt_draft_model_config); the builder paired V3 with "
        "Kimi-K3's DSpark layers by hand. The corpus serves DeepSeek-V3 with its own MTP draft "
        "(DeepseekV3ForCausalLM+mtp) and lists DeepSeek-V4's DSpark with the reason it is not "
        "built."),
}

def _spec_fields(spec: Any) -> dict[str, Any]:
    from kvcontract.conformance.contract.codec import spec_to_json

    return spec_to_json(spec)


def compare(family: dict[str, Any], table: Any) -> dict[str, Any]:
    """What differs between a hand-written family table and the corpus table."""
    from kvcontract.conformance.contract.codec import spec_from_json

    old = [(str(n), _spec_fields(spec_from_json(s))) for n, s in family["layers"]]
    new = [(n, _spec_fields(s)) for n, s in table.layers]
    old_names, new_names = [n for n, _ in old], [n for n, _ in new]
    fields: Counter[str] = Counter()
    olds, news = dict(old), dict(new)
    for name in set(old_names) & set(new_names):
        a, b = olds[name], news[name]
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                fields[f"{key}: {a.get(key)!r} -> {b.get(key)!r}"] += 1
    return {"layers": (len(old), len(new)),
            "names": "equal" if old_names == new_names else
            "same, other order (the model's registration order)"
            if sorted(old_names) == sorted(new_names) else
            f"{len(set(old_names) - set(new_names))} only hand-written, "
            f"{len(set(new_names) - set(old_names))} only corpus",
            "specs_equal": sum(1 for n in set(old_names) & set(new_names) if olds[n] == news[n]),
            "fields": fields,
            "block_size": (family["source"].get("block_size"), table.settings.block_size),
            "cache_dtype": (family["source"].get("cache_dtype"), table.settings.cache_dtype)}


def render(corpus: Any, families: list[dict[str, Any]], command: str) -> str:
    from kvcontract.conformance.engines.vllm.corpus import reason_class

    base = [t for t in corpus.tables if t.name == t.architecture]
    with_kv = [t for t in base if t.layers]
    archs_skipped = [s for s in corpus.skipped if s.name == s.architecture]
    variants_skipped = [s for s in corpus.skipped if s.name != s.architecture]
    classes = Counter(reason_class(s.reason) for s in archs_skipped)
    kinds: Counter[str] = Counter()
    for t in corpus.tables:
        if "+" in t.name:
            kinds[re.sub(r"^kv-.*", "kv-<fp8 dtype>", t.name.split("+", 1)[1]).rstrip("0123456789")
                  if not t.settings.draft else "draft pair"] += 1
    lines = ["# The vLLM corpus", "",
             "<!-- Generated by scripts/vllm_corpus.py; do not edit by hand. -->", "",
             f"vLLM {corpus.release}, built on this machine ({platform.machine()}, "
             f"{os.cpu_count()} cores, {corpus.meta.get('jobs')} workers) in "
             f"**{corpus.meta.get('build_seconds')} s** with:", "", "```sh", command, "```", "",
             f"- Architectures the release registers: **{len(base) + len(archs_skipped)}**; "
             f"built by their own model code: **{len(base)}**, of which **{len(with_kv)}** have "
             f"KV-cache layers (the others are encoders and poolers with none).",
             f"- Tables: **{len(corpus.tables)}** ({len(base)} architectures at cache dtype auto, "
             + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ").",
             f"- Variants not built: {len(variants_skipped)} (listed with the reason in the "
             "corpus's `skipped`); cache dtypes the platform's backend selection refuses for a "
             "model are not skips: " + ", ".join(
                 f"{d} for {len(v['architectures'])}" for d, v in
                 sorted(corpus.meta.get("not_offered_by_backend", {}).items())) + ".",
             f"- Identity: `{corpus.digest}`.", "",
             "## Architectures not built, by reason", "",
             "| reason | architectures |", "|:---|---:|"]
    lines += [f"| {name} | {count} |" for name, count in classes.most_common()]
    lines += ["", "Every entry of the corpus's `skipped` names the exception and the engine line "
              "it came from, or the rule that left it out.", "",
              "## The hand-written tables, rebuilt by the model code", "",
              "Each family of `conformance/engines/vllm/tables/vllm-" + corpus.release +
              ".json` against the corpus table built from the model code.", "",
              "| family | corpus table | layers (hand / corpus) | names | specs equal | block size "
              "(hand / corpus) | cache dtype | why |", "|:---|:---|---:|:---|---:|:---|:---|:---|"]
    by_name = corpus.by_name()
    details = []
    for family in families:
        target, why = FAMILIES.get(family["name"], (None, "not mapped"))
        table = by_name.get(target) if target else None
        if table is None:
            lines.append(f"| {family['name']} | none | {len(family['layers'])} / - | - | - | - | - | {why} |")
            continue
        diff = compare(family, table)
        lines.append(f"| {family['name']} | {target} | {diff['layers'][0]} / {diff['layers'][1]} | "
                     f"{diff['names']} | {diff['specs_equal']} | {diff['block_size'][0]} / "
                     f"{diff['block_size'][1]} | {diff['cache_dtype'][0]} / {diff['cache_dtype'][1]} | {why} |")
        if diff["fields"]:
            details.append(f"- **{family['name']}**: " + "; ".join(
                f"{field} ({count} layers)" for field, count in sorted(diff["fields"].items())))
    if details:
        lines += ["", "Spec fields that differ, layer by layer:", "", *details]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[1])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--from", dest="source", type=Path, help="a corpus file already built")
    parser.add_argument("--no-write-corpus", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    from kvcontract.conformance.contract.corpus import read_corpus, write_corpus
    from kvcontract.conformance.engines.vllm import corpus as vllm_corpus

    ident = vllm_corpus.identity()
    if ident is None:
        print("vllm_corpus: vLLM is not installed here", file=sys.stderr)
        return 2
    if args.source is not None:
        corpus = read_corpus(args.source)
    else:
        from kvcontract.conformance.engines.vllm.corpus.pool import build_corpus

        def progress(done: int, total: int, name: str, outcome: str) -> None:
            if done % 50 == 0 or done == total:
                print(f"  {done}/{total} {name}: {outcome[:80]}", file=sys.stderr, flush=True)

        corpus = build_corpus(jobs=args.jobs, progress=progress)
    corpus.digest = ident.key
    if not args.no_write_corpus:
        write_corpus(corpus, vllm_corpus.shipped_path(corpus.release))
    tables = ROOT / "conformance" / "engines" / "vllm" / "tables" / f"vllm-{corpus.release}.json"
    families = json.loads(tables.read_text(encoding="utf-8"))["tables"] if tables.is_file() else []
    command = f"python scripts/vllm_corpus.py --jobs {args.jobs}"
    from kvcontract.reports import write_atomic

    write_atomic(DOC, render(corpus, families, command))
    print(f"{DOC}: {len(corpus.tables)} tables, {len(corpus.skipped)} skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
