"""The corpus build's worker tasks (run in supervised workers, :mod:`.pool`).

A worker installs the stand-ins once (:mod:`.standin`), then builds one architecture and
variant per task (:mod:`.drive`) and hands back its table as the contract's specs (the vLLM
adapter's conversion), or the precise reason it cannot be built.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from kvcontract.conformance.run.worker import Emit

PLAN_TASK = "kvcontract.conformance.engines.vllm.corpus.tasks:plan_task"
BUILD_TASK = "kvcontract.conformance.engines.vllm.corpus.tasks:build_task"

_ENGINE: list[Any] = []


def _engine() -> Any:
    if not _ENGINE:
        from kvcontract.conformance.engines.vllm.engine import VllmEngine

        _ENGINE.append(VllmEngine())
    return _ENGINE[0]


def _quiet() -> None:
    """The worker's environment, before vLLM is imported: quiet and offline, and
    ``CUDA_VISIBLE_DEVICES`` empty: vLLM uses the real Triton only where it sees a GPU driver
    or that variable set to the empty string (``vllm/triton_utils``), and some model modules
    build Triton autotune configs at import (the Mamba kernels)."""
    for name, value in (("VLLM_LOGGING_LEVEL", "ERROR"), ("HF_HUB_OFFLINE", "1"),
                        ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(name, value)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def plan_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """What the release registers: the architectures to build, the draft-only ones, the cache
    dtypes users choose (``auto`` and the release's ``fp8`` names), the stand-ins."""
    _quiet()
    from kvcontract.conformance.engines.vllm.corpus import standin

    installed = standin.install()
    import typing

    import vllm
    from vllm.config.cache import CacheDType
    from vllm.model_executor.models import registry

    archs = sorted(registry.ModelRegistry.get_supported_archs())
    drafts = sorted(getattr(registry, "_SPECULATIVE_DECODING_MODELS", {}))
    dtypes = [str(v) for v in typing.get_args(CacheDType) if str(v).startswith("fp8")]
    return {"release": str(vllm.__version__), "architectures": archs, "drafts": drafts,
            "cache_dtypes": dtypes, "standins": installed}


def reference_entry(spec: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The contract's spec (as JSON) for one engine spec, and the engine-only values.

    ``block_stride_alignment=MultipleOf(n)`` (whole kernel blocks) has no contract counterpart:
    the contract's spec gets the byte alignment vLLM resolves it to (``get_block_stride_alignment()``;
    None where that is 1) and the engine value is kept as engine-only."""
    from vllm.v1.attention.backend import MultipleOf

    from kvcontract.conformance.contract.codec import spec_to_json

    engine_only: dict[str, str] = {}
    alignment = getattr(spec, "block_stride_alignment", None)
    if isinstance(alignment, MultipleOf):
        engine_only["block_stride_alignment"] = repr(alignment)
        resolved = int(spec.get_block_stride_alignment())
        spec = copy.copy(spec)
        object.__setattr__(spec, "block_stride_alignment", None if resolved == 1 else resolved)
    return spec_to_json(_engine().from_engine(spec)), engine_only


def build_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """One architecture at one cache dtype: ``{"table": ...}`` or ``{"skipped": reason}``."""
    _quiet()
    from kvcontract.conformance.engines.vllm.corpus import drive

    arch, cache_dtype = str(args["architecture"]), str(args.get("cache_dtype", "auto"))
    pair = None
    if args.get("draft"):
        from kvcontract.conformance.engines.vllm.corpus.drafts import pair_named

        pair = pair_named(str(args["draft"]))
    try:
        built = drive.build(arch, cache_dtype=cache_dtype, draft=pair,
                            tensor_parallel_size=int(args.get("tensor_parallel_size", 1)))
        if pair is not None:
            built["config"]["draft"] = pair.describe()
    except Exception as exc:  # noqa: BLE001 - the engine's own failure is the reason it is not built
        return {"skipped": drive.reason(exc)}
    specs = built.pop("engine_specs")
    layers, engine_only = [], {}
    try:
        for name, spec in specs.items():
            data, extra = reference_entry(spec)
            layers.append([name, data])
            if extra:
                engine_only[name] = extra
    except Exception as exc:  # noqa: BLE001 - a spec the contract cannot hold
        return {"skipped": f"its specs cannot be read as the contract's: {drive.reason(exc)}"}
    return {"table": {**built, "layers": layers, "engine_only": engine_only}}
