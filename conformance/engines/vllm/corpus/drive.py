"""One architecture's layer table, built by the release's own model code (in this process).

As vLLM's own model-initialisation test builds a model, less the weights: a config class's
values (:mod:`.configs`) saved as a checkpoint folder's ``config.json``; the release's
``ModelConfig`` and ``VllmConfig`` over it (which decide the runner, the model dtype and the
hybrid KV-cache manager); world size 1 over gloo; the release's ``initialize_model`` on the
meta device; the platform's block-size pick for the model's backends
(``update_block_size_for_backend``, as the executor calls it after loading); the model
runner's spec loop (``attn_utils.get_kv_cache_spec``); the layout the engine core resolves
from the backends' supported layouts. Each table records those settings.

:func:`build` needs :func:`.standin.install` to have run (the driver's worker does it).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kvcontract.conformance.engines.vllm.corpus import configs, standin
from kvcontract.conformance.engines.vllm.corpus.parallel import tensor_parallel

KERNEL_CONFIG: dict[str, Any] = {"enable_jit_warmup": False}
"""``KernelConfig`` values the build sets: JIT warmup registration imports CuteDSL kernels in
some layers' ``__init__`` (DeepSeek-V4's compressor); vLLM's own config hash ignores the
factor (``KernelConfig.compute_hash``), so it changes no layer and no spec."""
ENVIRONMENT = {"VLLM_KIMI_K3_GEMM_AR": "0"}
"""Environment the build sets: Kimi-K3's fused GEMM+all-reduce (on by default) imports
CuteDSL in ``__init__`` and is a multi-GPU kernel (nothing to fuse at one GPU)."""


class NotBuildable(Exception):
    """The architecture cannot be built here; the message says precisely why (and where)."""


def model_module(arch: str) -> tuple[str, str, Path | None]:
    """``(module, class, file)`` of the architecture's vLLM model class, without importing it."""
    registry = importlib.import_module("vllm.model_executor.models.registry")
    entry = registry._VLLM_MODELS.get(arch)
    if entry is None:
        raise NotBuildable("not in the release's vLLM model table (served only through the "
                           "Transformers backend)")
    module, cls = entry
    if not module.startswith("vllm."):
        module = f"vllm.model_executor.models.{module}"
    root = Path(importlib.import_module("vllm").__file__ or "").parent.parent
    base = root / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return module, cls, path
    return module, cls, None


def _innermost(exc: BaseException) -> str:
    """``file:line`` of the innermost frame in the engine's or transformers' package."""
    import traceback

    roots = [str(Path(importlib.import_module(name).__file__ or "").parent.parent) + os.sep
             for name in ("vllm", "transformers")]
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        for root in roots:
            if frame.filename.startswith(root):
                return f"{frame.filename[len(root):]}:{frame.lineno}"
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


def reason(exc: BaseException) -> str:
    """One line: the exception, its message's first line, and the engine line it came from."""
    text = str(exc).strip()
    if type(exc).__name__ == "ValidationError":  # pydantic: the error lines, not the title
        text = " ".join(line.strip() for line in text.splitlines()[1:3]) or text
    message = text.splitlines()[0] if text else ""
    if isinstance(exc, NotBuildable):
        return message
    return f"{type(exc).__name__}: {message[:240]} (at {_innermost(exc)})"


_DISTRIBUTED: dict[str, bool] = {}


def _distributed(vllm_config: Any) -> None:
    """World size 1 over gloo (once per process), and model parallel of size 1 for this
    model: its groups depend on the model (the expert-parallel group exists only for MoE
    models), so they are made anew for each build, as each engine process makes them."""
    from vllm.distributed import parallel_state

    if not _DISTRIBUTED:
        store = tempfile.mkdtemp(prefix="kvcontract-dist-")
        parallel_state.init_distributed_environment(
            world_size=1, rank=0, local_rank=0,
            distributed_init_method=f"file://{store}/store", backend="gloo")
        _DISTRIBUTED["done"] = True
    if parallel_state.model_parallel_is_initialized():  # type: ignore[no-untyped-call]
        parallel_state.destroy_model_parallel()  # type: ignore[no-untyped-call]
    parallel_state.initialize_model_parallel(1, 1)
    try:  # the GPU worker's next step before it makes the model runner (gpu_worker.py)
        from vllm.v1.worker.workspace import (
            init_workspace_manager,
            is_workspace_manager_initialized,
        )
    except ImportError:  # a release without a workspace manager
        return
    if not is_workspace_manager_initialized():
        import torch

        init_workspace_manager(torch.device("meta"))


@contextlib.contextmanager
def _checkpoint(config: Any) -> Iterator[str]:
    """A checkpoint folder holding only ``config.json`` (what ``ModelConfig`` reads)."""
    with tempfile.TemporaryDirectory(prefix="kvcontract-model-") as folder:
        config.save_pretrained(folder)
        yield folder


def _configs(folder: str, choice: configs.ConfigChoice, cache_dtype: str,
             speculative: dict[str, Any] | None = None, tensor_parallel_size: int = 1) -> Any:
    import vllm.config
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        LoadConfig,
        ModelConfig,
        ParallelConfig,
        SpeculativeConfig,
        VllmConfig,
    )

    model_kwargs: dict[str, Any] = {"skip_tokenizer_init": True}
    for key in ("runner", "convert", "max_model_len", "dtype"):
        if key in choice.build:
            model_kwargs[key] = choice.build[key]
    model_config = ModelConfig(model=folder, **model_kwargs)
    parallel_config = ParallelConfig(tensor_parallel_size=tensor_parallel_size)
    speculative_config = None
    if speculative is not None:  # as EngineArgs.create_speculative_config makes it
        speculative_config = SpeculativeConfig(**speculative, target_model_config=model_config,
                                               target_parallel_config=parallel_config)
    kernel = getattr(vllm.config, "KernelConfig", None)  # a release before it has no kernel settings
    extra = {"kernel_config": kernel(**KERNEL_CONFIG)} if kernel is not None else {}
    return VllmConfig(model_config=model_config, cache_config=CacheConfig(cache_dtype=cache_dtype),
                      parallel_config=parallel_config, speculative_config=speculative_config,
                      load_config=LoadConfig(load_format="dummy"),
                      device_config=DeviceConfig(device="cuda"), **extra)


def _load_speculator(vllm_config: Any, model: Any) -> None:
    """The model runner's speculator (``init_speculator``) loading its draft beside the target
    (``DraftModelSpeculator.load_model``: the draft's layers join the static forward context
    and are marked ``is_draft_layer``)."""
    import torch
    from vllm.v1.worker.gpu.spec_decode import init_speculator
    from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator

    # the request states go only to speculators without a draft model (suffix decoding)
    speculator = init_speculator(vllm_config, torch.device("meta"), None)  # type: ignore[arg-type]
    if isinstance(speculator, DraftModelSpeculator):
        speculator.load_model(model)


def _layout(vllm_config: Any, specs: dict[str, Any]) -> str | None:
    """The layout the engine core resolves from the backends' supported layouts (None: the
    release resolves none, as the planner adapter plans it: without one)."""
    try:
        from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            resolve_kv_cache_layout,
        )
    except ImportError:
        return None

    supported = [layout.name for layout in
                 get_supported_kv_cache_layouts(get_current_attn_backends(vllm_config))]
    return str(resolve_kv_cache_layout(vllm_config, [supported], list(specs.values())).name)


def _backends(vllm_config: Any, specs: dict[str, Any]) -> dict[str, str]:
    """Spec kind -> the attention backends its layers run with (``A/B`` where several)."""
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

    layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)  # type: ignore[type-abstract]
    out: dict[str, set[str]] = {}
    for name, spec in specs.items():
        layer = layers.get(name)
        try:
            backend = layer.get_attn_backend().get_name() if layer is not None else "?"
        except Exception as exc:  # noqa: BLE001 - recorded, not raised
            backend = f"? ({type(exc).__name__})"
        out.setdefault(type(spec).__name__, set()).add(str(backend))
    return {kind: "/".join(sorted(names)) for kind, names in sorted(out.items())}


def build(arch: str, *, cache_dtype: str = "auto", draft: Any = None,
          tensor_parallel_size: int = 1) -> dict[str, Any]:
    """The architecture's table: settings, engine specs (by layer) and how it was built.
    ``draft``: a :class:`.drafts.Pair` (the target served with its speculative draft);
    ``tensor_parallel_size``: the size the model's layers are built for (:mod:`.parallel`).
    Raises :class:`NotBuildable` (or what the engine raised) when it cannot be built."""
    standin.install()
    os.environ.update(ENVIRONMENT)
    started = time.monotonic()
    module, cls, path = model_module(arch)
    choice = configs.choose(arch, path.read_text(encoding="utf-8") if path else "")
    try:
        hf_config = choice.make()
    except Exception as exc:  # noqa: BLE001 - the config class cannot be made at its defaults
        raise NotBuildable(f"{choice.class_path}() with its published values fails: {reason(exc)}") from None
    hf_config.architectures = [arch]
    try:  # as the registry's inspection would, but with the reason (it only logs it)
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - the model module cannot be imported here
        raise NotBuildable(f"its model module {module} cannot be imported here: {reason(exc)}") from None
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.platforms import current_platform
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.worker.gpu import attn_utils

    with _checkpoint(hf_config) as folder, contextlib.ExitStack() as stack:
        speculative = draft.speculative_config(folder, stack) if draft is not None else None
        vllm_config = _configs(folder, choice, cache_dtype, speculative, tensor_parallel_size)
        with set_current_vllm_config(vllm_config):
            _distributed(vllm_config)
            stack.enter_context(tensor_parallel(tensor_parallel_size))
            model_config = vllm_config.model_config
            # the loader's own steps (BaseModelLoader.load_model), less the weights
            loader = get_model_loader(vllm_config.load_config)
            with set_default_torch_dtype(model_config.dtype), standin.model_init():
                model = _create_model(loader, vllm_config, model_config)
                if draft is not None:
                    _load_speculator(vllm_config, model)
            current_platform.update_block_size_for_backend(vllm_config)
            specs = dict(attn_utils.get_kv_cache_spec(vllm_config))
            layout = _layout(vllm_config, specs) if specs else None
            backends = _backends(vllm_config, specs)
    model_config = vllm_config.model_config
    return {
        "architecture": arch,
        "model_class": f"{module}:{cls}",
        "config": {"class": choice.class_path, "how": choice.how, "source": choice.source_text(),
                   "values": _plain(dict(choice.values)), "sources": dict(choice.sources)},
        "settings": {
            "runner": str(model_config.runner_type),
            "model_dtype": str(model_config.dtype).removeprefix("torch."),
            "cache_dtype": str(vllm_config.cache_config.cache_dtype),
            "block_size": int(vllm_config.cache_config.block_size),
            "layout": layout,
            "hybrid": not bool(vllm_config.scheduler_config.disable_hybrid_kv_cache_manager),
            "tensor_parallel_size": tensor_parallel_size,
            "draft": draft.method if draft is not None else None,
            "backends": backends,
            "max_model_len": int(model_config.max_model_len),
        },
        "engine_specs": specs,
        "seconds": round(time.monotonic() - started, 2),
    }


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


__all__ = ["NotBuildable", "build", "model_module", "reason"]


def _create_model(loader: Any, vllm_config: Any, model_config: Any) -> Any:
    """The loader's model creation, less the weights: ``create_model`` where the release's
    loader has one, else the ``initialize_model`` its ``load_model`` calls (releases before it)."""
    if hasattr(loader, "create_model"):
        return loader.create_model(vllm_config=vllm_config, model_config=model_config)
    from vllm.model_executor.model_loader.utils import initialize_model

    return initialize_model(vllm_config=vllm_config, model_config=model_config)
