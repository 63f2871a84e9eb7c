"""Layer tables built by the installed vLLM's own spec-building code (the shared part).

A family builder returns a :class:`Built`: the attention-like layer objects vLLM would
register in ``compilation_config.static_forward_context`` (name -> layer), made with
:func:`bare` where the layer's ``__init__`` needs a GPU or a distributed state, and the
config values the builder read, each with where it comes from. :func:`collect` then
hands those layers to vLLM's own model-runner loop
(``vllm.v1.worker.gpu.attn_utils.get_kv_cache_spec``), which calls each layer's
``get_kv_cache_spec(vllm_config)`` and applies the backend's ``customize_spec`` and the
draft marking, exactly as a served model's runner does.

Family builders live in :mod:`.families_dense`, :mod:`.families_deepseek` and
:mod:`.families_hybrid`; :mod:`.catalogue` lists them all.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class FamilySkipped(Exception):
    """A family that cannot be driven here; the message says precisely why."""


@dataclass
class Built:
    """What a family builder produced (before the runner's spec loop)."""

    layers: dict[str, Any]
    config: dict[str, dict[str, Any]]
    """Config value name -> ``{"value": ..., "source": ...}``."""
    modules: list[str]
    builder: str
    block_size: int | None = None
    """None: the platform's pick (:func:`platform_block_size`)."""
    cache_dtype: str = "auto"
    model_dtype: str = "bfloat16"
    notes: list[str] = field(default_factory=list)
    cache_extra: dict[str, Any] = field(default_factory=dict)
    """More ``cache_config`` attributes the family's layers read."""
    model_extra: dict[str, Any] = field(default_factory=dict)
    """More ``model_config`` attributes the family's layers or the platform read."""
    config_extra: dict[str, Any] = field(default_factory=dict)
    """More top-level ``vllm_config`` attributes the family's layers read."""
    expected_layers: int | None = None
    """How many layer-table entries the config values imply (checked by the tests)."""
    head_size: int | None = None
    """``model_config.get_head_size()`` (some backends read it to pick a block size)."""
    align: Callable[[Any], None] | None = None
    """The platform's page alignment to run on the config before the spec loop (hybrid
    models: ``Platform._align_hybrid_block_size``)."""
    grouping: str | None = None
    """``module:Class`` of the model's own ``SupportsKVCacheGrouping``, where it has one."""
    cache: Any = None
    """The ``cache_config`` the layers were built with (shared with the runner's config;
    a layer's ``__init__`` may write to it, as DeepSeek-V4's does)."""


@dataclass(frozen=True)
class Family:
    name: str
    build: Callable[[], Built]


def quiet() -> None:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")


def bare(cls: type, **attrs: Any) -> Any:
    """An instance of ``cls`` without its ``__init__``, carrying ``attrs`` (the values the
    ``__init__`` would set from the model config). ``torch.nn.Module`` bookkeeping is
    initialised so attribute access behaves as on a built layer."""
    import torch

    obj: Any = object.__new__(cls)
    if isinstance(obj, torch.nn.Module):
        torch.nn.Module.__init__(obj)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


def hf_config(class_path: str, **overrides: Any) -> tuple[Any, str]:
    """A Hugging Face config class's defaults (with ``overrides``) and where they come from:
    the class and the checkpoint its docstring names (its published configuration)."""
    module_name, _, class_name = class_path.rpartition(".")
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name)
    text = inspect.getsource(inspect.getmodule(cls) or module)
    found = re.search(r'checkpoint="([^"]+)"', text) or re.search(r"\[([\w.-]+/[\w.-]+)\]", text)
    version = getattr(importlib.import_module(module_name.split(".")[0]), "__version__", "?")
    source = f"{module_name.split('.')[0]} {version} {class_name}() defaults"
    if found:
        source += f" (documented checkpoint {found.group(1)})"
    return cls(**overrides), source


def record(config: dict[str, dict[str, Any]], source: str, **values: Any) -> None:
    for name, value in values.items():
        config[name] = {"value": _plain(value), "source": source}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def cache_config(block_size: int | None, cache_dtype: str = "auto") -> Any:
    """The ``cache_config`` values the layers and the runner read (prefix caching off)."""
    return SimpleNamespace(block_size=block_size, cache_dtype=cache_dtype,
                           skip_page_size_padded=None, enable_prefix_caching=False,
                           mamba_cache_mode="none", use_replayssm=False)


def construct(cls: type, **kwargs: Any) -> Any:
    """``cls(**kwargs)`` through its own ``__init__``, for the small cache layers whose
    ``__init__`` only registers the layer with the current config: that config is a
    namespace here (``get_current_vllm_config`` of the class's module is swapped for the
    call)."""
    from unittest import mock

    module = importlib.import_module(cls.__module__)
    current = SimpleNamespace(compilation_config=SimpleNamespace(static_forward_context={}))
    with mock.patch.object(module, "get_current_vllm_config", lambda: current):
        return cls(**kwargs)


def vllm_config(built: Built) -> Any:
    """The part of a ``VllmConfig`` the runner's spec loop and the layers read."""
    cache = built.cache if built.cache is not None else cache_config(built.block_size or 16,
                                                                    built.cache_dtype)
    for name, value in built.cache_extra.items():
        setattr(cache, name, value)
    config = SimpleNamespace(
        cache_config=cache,
        model_config=SimpleNamespace(dtype=torch_dtype(built.model_dtype),
                                     get_head_size=lambda: built.head_size,
                                     **built.model_extra),
        attention_config=SimpleNamespace(hisparse_config=None),
        compilation_config=SimpleNamespace(static_forward_context=dict(built.layers)),
        speculative_config=None,
        num_speculative_tokens=0,
    )
    for name, value in built.config_extra.items():
        setattr(config, name, value)
    return config


def platform_block_size(built: Built) -> int:
    """The block size vLLM's platform picks for these layers' backends
    (``Platform.update_block_size_for_backend``, phase 1: no ``--block-size`` given)."""
    from vllm.config.cache import CacheConfig
    from vllm.platforms.interface import Platform

    config = vllm_config(built)
    backends = Platform._find_non_ssm_backends(config)
    if not backends:
        return int(CacheConfig.DEFAULT_BLOCK_SIZE)
    return int(Platform._preferred_block_size_for_backends(
        backends, CacheConfig.DEFAULT_BLOCK_SIZE, config))


def collect(built: Built) -> dict[str, Any]:
    """vLLM's own spec loop over the built layers: layer name -> engine spec. The block
    size is the platform's pick for the layers' backends unless the family fixed one."""
    from vllm.v1.worker.gpu import attn_utils

    if built.block_size is None:
        built.block_size = platform_block_size(built)
        if built.cache is not None:
            built.cache.block_size = built.block_size
    config = vllm_config(built)
    if built.align is not None:
        built.align(config)
        built.block_size = int(config.cache_config.block_size)
    return dict(attn_utils.get_kv_cache_spec(config))
