"""Attention/Mamba hybrids: Qwen3-Next (Gated DeltaNet linear attention + full attention).

``qwen3_next.py`` builds ``QwenGatedDeltaNetAttention`` on ``layer_types[i] ==
"linear_attention"`` and an ``Attention`` on ``"full_attention"``. The Mamba page is
sized the way vLLM sizes it before the model runs: ``mamba_block_size`` by the model
config rule (``model_executor/models/config.py``: ``max_model_len`` without prefix
caching) and the page padding by the platform's own ``_align_hybrid_block_size``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kvcontract.conformance.engines.vllm.tables.build import (
    Built,
    Family,
    FamilySkipped,
    bare,
    cache_config,
    hf_config,
    quiet,
    record,
    torch_dtype,
)
from kvcontract.conformance.engines.vllm.tables.families_dense import NOTE, attention_layer


def align_hybrid(config: Any) -> None:
    """``Platform._align_hybrid_block_size`` on the runner's config (it may raise the
    block size and sets ``cache_config.mamba_page_size_padded``)."""
    from vllm.platforms.interface import Platform

    backends = Platform._find_non_ssm_backends(config)
    Platform._align_hybrid_block_size(config, backends[0])


def build_qwen3_next() -> Built:
    quiet()
    try:
        from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import (
            QwenGatedDeltaNetAttention,
        )
    except ImportError as exc:  # its module imports the quantization stack
        raise FamilySkipped(f"qwen_gdn_linear_attn does not import here: "
                            f"{type(exc).__name__}: {exc}") from None

    hf, source = hf_config("transformers.Qwen3NextConfig")
    config: dict[str, dict[str, Any]] = {}
    record(config, source, num_hidden_layers=hf.num_hidden_layers, layer_types=hf.layer_types,
           num_key_value_heads=hf.num_key_value_heads, head_dim=hf.head_dim,
           linear_num_key_heads=hf.linear_num_key_heads,
           linear_num_value_heads=hf.linear_num_value_heads,
           linear_key_head_dim=hf.linear_key_head_dim,
           linear_value_head_dim=hf.linear_value_head_dim,
           linear_conv_kernel_dim=hf.linear_conv_kernel_dim,
           max_position_embeddings=hf.max_position_embeddings)
    cache = cache_config(None)
    cache.mamba_cache_dtype = "auto"
    cache.mamba_ssm_cache_dtype = "auto"
    cache.mamba_page_size_padded = None
    # model_executor/models/config.py: no prefix caching -> mamba_block_size = max_model_len
    cache.mamba_block_size = hf.max_position_embeddings
    cache.kv_cache_dtype_skip_layers = None
    model_config = SimpleNamespace(dtype=torch_dtype("bfloat16"))
    layers: dict[str, Any] = {}
    for i in range(hf.num_hidden_layers):
        if hf.layer_types[i] == "linear_attention":
            name = f"model.layers.{i}.linear_attn"
            layers[name] = bare(
                QwenGatedDeltaNetAttention, prefix=name, tp_size=1,
                num_k_heads=hf.linear_num_key_heads, num_v_heads=hf.linear_num_value_heads,
                head_k_dim=hf.linear_key_head_dim, head_v_dim=hf.linear_value_head_dim,
                conv_kernel_size=hf.linear_conv_kernel_dim, num_spec=0,
                model_config=model_config, cache_config=cache, speculative_config=None,
                _checkpoint_alignment=None)
        else:
            name = f"model.layers.{i}.self_attn.attn"
            layers[name] = attention_layer(name, num_kv_heads=hf.num_key_value_heads,
                                           head_size=hf.head_dim, sliding_window=None,
                                           model_dtype="bfloat16")
    model_extra = {
        "use_mla": False, "architecture": "Qwen3NextForCausalLM", "hf_config": hf,
        "model_impl": "auto",
        "hf_text_config": hf, "max_model_len": hf.max_position_embeddings,
        "get_num_kv_heads": lambda parallel_config: hf.num_key_value_heads,
    }
    return Built(layers, config, ["vllm/model_executor/models/qwen3_next.py",
                                  "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py",
                                  "vllm/model_executor/layers/mamba/abstract.py",
                                  "vllm/platforms/interface.py"],
                 "families_mamba.build_qwen3_next", cache=cache, head_size=hf.head_dim,
                 model_extra=model_extra, align=align_hybrid,
                 config_extra={"parallel_config": SimpleNamespace(tensor_parallel_size=1),
                               "use_flashinfer_replayssm": False},
                 notes=[NOTE, "no prefix caching: mamba_cache_mode none, mamba_block_size = "
                        "max_model_len (max_position_embeddings); page padding by "
                        "Platform._align_hybrid_block_size"],
                 expected_layers=hf.num_hidden_layers)


FAMILIES = [Family("qwen3-next", build_qwen3_next)]
