"""Which configuration builds an architecture, offline: the release's own config classes.

An architecture's model class reads ``vllm_config.model_config.hf_config``; what that holds
comes, here, from a config class the release or transformers ships, at its defaults (the
class's defaults are a published checkpoint's values: each class's docstring names it),
with the published values of :data:`PUBLISHED_FILE` on top where the defaults are not a
model (``num_hidden_layers=1``, ``None`` where the checkpoint has a value). Which class:

1. ``published.toml`` names one for the architecture (with the values, each with its source);
2. transformers' auto mappings name the model type whose classes include the architecture;
3. the architecture is named ``<model type>For...`` or ``<model type>Model`` after a model
   type of the release's config registry or of transformers' (squashed: case, ``_`` and
   ``-`` ignored), the longest such;
4. the architecture's vLLM model module names one config class of the release's config
   registry or of transformers (its imports and annotations), and only one.

Anything else is a :class:`NoConfig` with the precise reason (listed in the corpus).
"""

from __future__ import annotations

import functools
import importlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PUBLISHED_FILE = Path(__file__).with_name("published.toml")

GENERIC_CONFIGS = frozenset({
    "VllmConfig", "ModelConfig", "CacheConfig", "QuantizationConfig", "PretrainedConfig",
    "PreTrainedConfig", "LoRAConfig", "MultiModalConfig", "ParallelConfig", "SchedulerConfig",
    "SpeculativeConfig", "CompilationConfig", "LoadConfig", "DeviceConfig", "PoolerConfig",
    "MultiModalFieldConfig", "Fp8Config", "AutoAWQConfig", "KVTransferConfig", "ObservabilityConfig",
    "AttentionConfig", "StructuredOutputsConfig", "GenerationConfig", "KernelConfig",
})
"""Config class names a model module mentions that are not a model's configuration."""


class NoConfig(LookupError):
    """No configuration for the architecture is available offline; the message says why."""


@dataclass(frozen=True)
class ConfigChoice:
    """The config class that builds an architecture, and the values set on its defaults."""

    class_path: str
    """``module:Class``."""
    how: str
    """Which rule chose it (``published``, ``transformers-auto``, ``model-module``)."""
    values: Mapping[str, Any] = field(default_factory=dict)
    """Value name -> value set on top of the class defaults."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Value name -> where the published value comes from."""
    build: Mapping[str, Any] = field(default_factory=dict)
    """Build settings the published file gives (``runner``, ``max_model_len``, ...)."""

    def make(self) -> Any:
        module, _, name = self.class_path.partition(":")
        cls = getattr(importlib.import_module(module), name)
        config = cls()
        for key, value in self.values.items():
            _set_path(config, key, value)
        return config

    def source_text(self) -> str:
        module, _, name = self.class_path.partition(":")
        top = module.split(".")[0]
        version = getattr(importlib.import_module(top), "__version__", "?")
        text = f"{top} {version} {name}() defaults"
        checkpoint = documented_checkpoint(self.class_path)
        if checkpoint:
            text += f" (documented checkpoint {checkpoint})"
        if self.values:
            text += f" + {len(self.values)} published values"
        return text


def _set_path(config: Any, path: str, value: Any) -> None:
    """``text_config.num_hidden_layers`` -> setattr on the nested config."""
    *parents, last = path.split(".")
    target = config
    for part in parents:
        target = getattr(target, part)
    setattr(target, last, value)


def documented_checkpoint(class_path: str) -> str | None:
    """The checkpoint a config class's module documents as its defaults, if it names one."""
    import inspect

    module, _, name = class_path.partition(":")
    try:
        text = inspect.getsource(importlib.import_module(module))
    except (OSError, TypeError):
        return None
    found = re.search(r'checkpoint="([^"]+)"', text) or re.search(r"\[([\w.-]+/[\w.-]+)\]\(https://huggingface", text)
    return found.group(1) if found else None


@functools.lru_cache(maxsize=1)
def published() -> dict[str, dict[str, Any]]:
    """``published.toml``: architecture -> ``{"config": ..., "values": {...}, "sources": {...}}``."""
    with PUBLISHED_FILE.open("rb") as handle:
        data = tomllib.load(handle)
    return {str(arch): dict(entry) for arch, entry in data.get("architecture", {}).items()}


@functools.lru_cache(maxsize=1)
def transformers_arch_types() -> dict[str, list[str]]:
    """Architecture class name -> the transformers model types whose auto mappings list it."""
    auto = importlib.import_module("transformers.models.auto.modeling_auto")
    out: dict[str, set[str]] = {}
    for name in dir(auto):
        if not (name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES")):
            continue
        for model_type, classes in getattr(auto, name).items():
            for cls in classes if isinstance(classes, list | tuple) else (classes,):
                out.setdefault(str(cls), set()).add(str(model_type))
    return {arch: sorted(types) for arch, types in out.items()}


def _transformers_config(model_type: str) -> str | None:
    mapping = importlib.import_module("transformers.models.auto.configuration_auto").CONFIG_MAPPING_NAMES
    name = mapping.get(model_type)
    if not name:
        return None
    return f"transformers:{name}"


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _closest(arch: str, names: list[str]) -> list[str]:
    """The names whose squashed form is the longest prefix of the squashed architecture."""
    squashed = _squash(arch)
    scored = [(len(_squash(n.removesuffix("Config"))), n) for n in names
              if squashed.startswith(_squash(n.removesuffix("Config").removesuffix("_text")))]
    if not scored:
        return names
    best = max(s for s, _ in scored)
    return [n for s, n in scored if s == best]


@functools.lru_cache(maxsize=1)
def _vllm_config_classes() -> dict[str, str]:
    """Config class name -> ``module:Class`` for every class the release's config registry
    and transformers' auto config mapping name."""
    out: dict[str, str] = {}
    mapping = importlib.import_module("transformers.models.auto.configuration_auto").CONFIG_MAPPING_NAMES
    for name in mapping.values():
        out.setdefault(str(name), f"transformers:{name}")
    registry = importlib.import_module("vllm.transformers_utils.config")._CONFIG_REGISTRY
    for model_type in list(dict.keys(registry)):
        value = dict.__getitem__(registry, model_type)
        name = value if isinstance(value, str) else value.__name__
        out[str(name)] = f"vllm.transformers_utils.configs:{name}"
    return out


@functools.lru_cache(maxsize=1)
def _model_types() -> dict[str, str]:
    """Squashed model type -> ``module:Class``: the release's config registry first (it
    overrides transformers' class for a type, as ``get_config`` does), then transformers'."""
    out: dict[str, str] = {}
    registry = importlib.import_module("vllm.transformers_utils.config")._CONFIG_REGISTRY
    for model_type in list(dict.keys(registry)):
        value = dict.__getitem__(registry, model_type)
        name = value if isinstance(value, str) else value.__name__
        out.setdefault(_squash(str(model_type)), f"vllm.transformers_utils.configs:{name}")
    mapping = importlib.import_module("transformers.models.auto.configuration_auto").CONFIG_MAPPING_NAMES
    for model_type, name in mapping.items():
        out.setdefault(_squash(str(model_type)), f"transformers:{name}")
    return out


_HEADS = ("for", "model")


def by_architecture_name(arch: str) -> str | None:
    """The config class of the model type the architecture is named after (rule 3)."""
    squashed = _squash(arch)
    found = [(len(t), path) for t, path in _model_types().items()
             if squashed.startswith(t) and squashed[len(t):].startswith(_HEADS)]
    return max(found)[1] if found else None


def choose(arch: str, model_source: str) -> ConfigChoice:
    """The config that builds ``arch``; ``model_source`` is its vLLM model module's text."""
    entry = published().get(arch)
    if entry is not None:
        return ConfigChoice(class_path=str(entry["config"]), how="published",
                            values=dict(entry.get("values", {})),
                            sources=dict(entry.get("sources", {})),
                            build=dict(entry.get("build", {})))
    types = transformers_arch_types().get(arch, [])
    if types:
        paths = [p for p in (_transformers_config(t) for t in _closest(arch, types)) if p]
        if len(set(paths)) == 1:
            return ConfigChoice(class_path=paths[0], how="transformers-auto")
    named_after = by_architecture_name(arch)
    if named_after is not None:
        return ConfigChoice(class_path=named_after, how="architecture-name")
    known = _vllm_config_classes()
    named = sorted({n for n in re.findall(r"\b([A-Z]\w*Config)\b", model_source)
                    if n in known and n not in GENERIC_CONFIGS})
    if len(named) > 1:
        named = _closest(arch, named)
    if len(named) == 1:
        return ConfigChoice(class_path=known[named[0]], how="model-module")
    if not named:
        raise NoConfig("no config class available offline: transformers' auto mappings do not list "
                       "the architecture and its model module names no config class of the release "
                       "or of transformers (its configuration comes from the checkpoint's remote code)")
    raise NoConfig(f"its model module names several config classes ({', '.join(named)}) and none "
                   "matches the architecture's name")
