"""The tables JSON: each family built from the installed vLLM, converted with the adapter,
with grouping's outcome in both interpreter modes (needs vLLM)."""

from __future__ import annotations

import copy
import time
from typing import Any

from kvcontract.conformance.engines.vllm.tables.build import Built, FamilySkipped, collect
from kvcontract.conformance.engines.vllm.tables.catalogue import families, skipped_families


def reference_entry(engine: Any, spec: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The reference spec's JSON for one engine spec, and the engine-only values.

    ``block_stride_alignment=MultipleOf(n)`` (whole kernel blocks) has no reference
    counterpart: the reference gets the byte alignment vLLM resolves it to
    (``get_block_stride_alignment()``; None where that is 1) and the engine value is kept
    in the engine-only record."""
    from vllm.v1.attention.backend import MultipleOf

    from kvcontract.conformance.contract.codec import spec_to_json

    engine_only: dict[str, str] = {}
    alignment = getattr(spec, "block_stride_alignment", None)
    if isinstance(alignment, MultipleOf):
        engine_only["block_stride_alignment"] = repr(alignment)
        resolved = int(spec.get_block_stride_alignment())
        spec = copy.copy(spec)
        object.__setattr__(spec, "block_stride_alignment", None if resolved == 1 else resolved)
    return spec_to_json(engine.from_engine(spec)), engine_only


def table_entry(name: str, built: Built, specs: dict[str, Any], engine: Any,
                release: str) -> dict[str, Any]:
    layers = []
    engine_only: dict[str, dict[str, str]] = {}
    for layer_name, spec in specs.items():
        data, extra = reference_entry(engine, spec)
        layers.append([layer_name, data])
        if extra:
            engine_only[layer_name] = extra
    source = {
        "release": release,
        "modules": built.modules,
        "builder": f"kvcontract.conformance.engines.vllm.tables.{built.builder}",
        "config": built.config,
        "notes": built.notes,
        "block_size": built.block_size,
        "cache_dtype": built.cache_dtype if built.cache is None else built.cache.cache_dtype,
        "expected_layers": built.expected_layers,
        "model_grouping": built.grouping,
        "spec_loop": "vllm/v1/worker/gpu/attn_utils.py get_kv_cache_spec",
    }
    return {"name": name, "source": source, "layers": layers, "engine_only": engine_only}


def build_document(*, with_grouping: bool = True) -> dict[str, Any]:
    """Every family's table from the installed vLLM (and grouping's outcome per mode)."""
    import vllm

    from kvcontract.conformance.engines.vllm.engine import VllmEngine
    from kvcontract.conformance.engines.vllm.tables.run import run_modes

    engine = VllmEngine()
    release = f"vllm-{vllm.__version__}"
    started = time.monotonic()
    tables, skipped = [], list(skipped_families())
    for family in families():
        try:
            built = family.build()
            specs = collect(built)
        except FamilySkipped as why:
            skipped.append({"name": family.name, "reason": str(why)})
            continue
        tables.append(table_entry(family.name, built, specs, engine, release))
    build_seconds = round(time.monotonic() - started, 1)
    if with_grouping:
        outcomes = run_modes([t["name"] for t in tables])
        for table in tables:
            table["grouping"] = {mode: outcomes[mode].get(table["name"]) for mode in outcomes}
    return {
        "release": release,
        "generated_by": "scripts/vllm_model_tables.py",
        "notes": [
            "Layers are built by vLLM's own classes (bare instances carrying the attributes "
            "their __init__ sets, or their own __init__ for the small cache layers) and "
            "collected by the model runner's spec loop, on the CPU platform: GPU-capability "
            "dependent choices take their non-GPU branch.",
            "Config values: where a source says 'transformers X ClassName() defaults', the "
            "values are that config class's defaults and the checkpoint named is the one its "
            "docstring documents; the defaults were not checked against that checkpoint's "
            "config.json (no hub access) and may differ in places (e.g. layer count, "
            "max_position_embeddings). A layer table depends only on the values recorded.",
            "grouping: the model's SupportsKVCacheGrouping where it has one, else "
            "kv_cache_planning.get_kv_cache_groups, with the adapter's neutral config; "
            "'optimized' runs under python -O (asserts stripped).",
        ],
        "build_seconds": build_seconds,
        "tables": tables,
        "skipped": skipped,
    }
