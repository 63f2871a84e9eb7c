"""Targets with a draft / cache-only layer, and the families not built (with the reason).

``llama-3.1-8b+extract-hidden-states``: the Llama table plus the cache-only layer of the
``extract_hidden_states`` speculator (``model_executor/models/extract_hidden_states.py``),
marked as a draft layer the way ``Speculator.load_model`` marks every layer the draft
model adds (``v1/worker/gpu/spec_decode/speculator.py``).
"""

from __future__ import annotations

from typing import Any

from kvcontract.conformance.engines.vllm.tables.build import (
    Built,
    Family,
    bare,
    quiet,
    record,
    torch_dtype,
)
from kvcontract.conformance.engines.vllm.tables.families_dense import build_llama3


def eagle3_default_aux_layers(num_layers: int) -> tuple[int, ...]:
    """``SupportsEagle3.get_eagle3_default_aux_hidden_state_layers``'s rule
    (``model_executor/models/interfaces.py``) for a model of ``num_layers`` layers."""
    from types import SimpleNamespace

    from vllm.model_executor.models.interfaces import SupportsEagle3

    model = SimpleNamespace(model=SimpleNamespace(layers=[None] * num_layers))
    rule: Any = SupportsEagle3.get_eagle3_default_aux_hidden_state_layers
    return tuple(rule(model))


def build_llama_extract_hidden_states() -> Built:
    quiet()
    from vllm.model_executor.models.extract_hidden_states import (
        CacheOnlyAttentionBackend,
        CacheOnlyAttentionLayer,
    )

    built = build_llama3()
    num_layers = int(built.config["num_hidden_layers"]["value"])
    hidden = int(built.config["hidden_size"]["value"])
    aux = eagle3_default_aux_layers(num_layers)
    record(built.config, "interfaces.py get_eagle3_default_aux_hidden_state_layers rule "
           "(used as the draft config's eagle_aux_hidden_state_layer_ids)",
           eagle_aux_hidden_state_layer_ids=list(aux))
    name = f"cache_only_layers.{num_layers}"  # ExtractHiddenStatesModel, prefix "" (get_model)
    layer: Any = bare(CacheOnlyAttentionLayer, num_heads=len(aux), head_size=hidden,
                      layer_name=name, block_size=built.block_size or 16,
                      kv_cache_torch_dtype=torch_dtype(built.model_dtype),
                      attn_backend=CacheOnlyAttentionBackend, is_draft_layer=True)
    built.layers[name] = layer
    built.modules = [*built.modules, "vllm/model_executor/models/extract_hidden_states.py",
                     "vllm/v1/worker/gpu/spec_decode/extract_hidden_states.py"]
    built.builder = "families_hybrid.build_llama_extract_hidden_states"
    built.notes = [*built.notes, "draft: extract_hidden_states speculator (one cache-only "
                   "layer: num_kv_heads = number of aux layers, head_size = hidden_size)"]
    built.expected_layers = num_layers + 1
    return built


FAMILIES = [
    Family("llama-3.1-8b+extract-hidden-states", build_llama_extract_hidden_states),
]

_NOT_ATTEMPTED = "not attempted in this session (time); no builder yet"
_MAMBA_NEXT = ("not attempted in this session (time): the Qwen3-Next builder "
               "(families_mamba) shows the way (bare Mamba layer + the platform's "
               "_align_hybrid_block_size)")

NOT_BUILT: list[dict[str, str]] = [
    {"name": "kimi-k3 (+dspark draft, +GQA draft)", "modules": "vllm/models/kimi_k3/*",
     "reason": "no published Kimi-K3 configuration values are available here (vLLM's "
     "KimiLinearConfig defaults leave kv_lora_rank and linear_attn_config None; transformers "
     "has no Kimi-K3 config class); also " + _MAMBA_NEXT + " for its KDA layers, and "
     "vllm/models/kimi_k3/nvidia needs compressed_tensors"},
    {"name": "glm5-next", "modules": "vllm/models/glm5next/common/{attention,kda}.py",
     "reason": _MAMBA_NEXT},
    {"name": "qwen3.5 (GDN hybrid)", "modules": "vllm/model_executor/models/qwen3_5.py",
     "reason": _MAMBA_NEXT},
    {"name": "qwen4-exp", "modules": "vllm/models/qwen4_exp/*", "reason": _MAMBA_NEXT
     + " (Qwen4Exp has several Mamba state layouts: get_mamba_specs_from_config)"},
    {"name": "deepseek-v4.1", "modules": "vllm/models/deepseek_v41/{attention,compressor}.py",
     "reason": "no published DeepSeek-V4.1 configuration values here: vLLM's "
     "DeepseekV41Config takes every text value from the checkpoint's text_config (no "
     "defaults) and transformers has no V4.1 class"},
    {"name": "minimax-m3", "modules": "vllm/models/minimax_m3/*",
     "reason": _NOT_ATTEMPTED + " (vLLM's MiniMaxM3 config defaults to num_hidden_layers=1: "
     "published values would have to come from elsewhere)"},
    {"name": "inkling", "modules": "vllm/models/inkling/*", "reason": _NOT_ATTEMPTED},
    {"name": "mistral (sparse indexer)", "modules": "vllm/models/mistral/*/indexer.py",
     "reason": _NOT_ATTEMPTED},
    {"name": "step5", "modules": "vllm/models/step5/common/*", "reason": _NOT_ATTEMPTED},
    {"name": "dots3-note", "modules": "vllm/models/dots3_note/nvidia/model.py",
     "reason": _NOT_ATTEMPTED},
    {"name": "encoder-decoder (cross attention)",
     "modules": "vllm/model_executor/layers/attention/cross_attention.py",
     "reason": _NOT_ATTEMPTED},
    {"name": "rswa / static-sink attention models",
     "modules": "vllm/model_executor/layers/attention/{rswa_attention,static_sink_attention}.py",
     "reason": _NOT_ATTEMPTED},
    {"name": "encoder-only models",
     "modules": "vllm/v1/worker/{gpu,cpu}/model_states/encoder_only.py",
     "reason": _NOT_ATTEMPTED},
    {"name": "platform-made specs", "modules": "vllm/platforms/interface.py",
     "reason": "specs the platform builds to size pages (not a model's layer table)"},
]
