"""Dense-attention families: vLLM's generic ``Attention`` layer (full and sliding window).

Each builder applies the model file's per-layer rule (named in the notes) to the config
values and makes one ``Attention`` per decoder layer, as the model's ``__init__`` would
at tensor-parallel size 1, with the backend a Hopper GPU selects (FlashAttention).
"""

from __future__ import annotations

from typing import Any

from kvcontract.conformance.engines.vllm.tables.build import (
    Built,
    Family,
    bare,
    hf_config,
    quiet,
    record,
    torch_dtype,
)

ATTENTION_MODULE = "vllm/model_executor/layers/attention/attention.py"
NOTE = "TP=1; backend FlashAttentionBackend; block_size: the platform's pick for the backend"


def attention_layer(prefix: str, *, num_kv_heads: int, head_size: int,
                    sliding_window: int | None, model_dtype: str,
                    kv_cache_dtype: str = "auto") -> Any:
    """An ``Attention`` (decoder) as its ``__init__`` sets it up for these values."""
    quiet()
    from vllm.model_executor.layers.attention.attention import Attention
    from vllm.v1.attention.backend import AttentionType
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    dtype = torch_dtype(model_dtype)
    return bare(Attention, layer_name=prefix, num_heads=num_kv_heads, head_size=head_size,
                head_size_v=head_size, num_kv_heads=num_kv_heads,
                sliding_window=sliding_window, kv_cache_dtype=kv_cache_dtype,
                kv_cache_torch_dtype=dtype, act_dtype=dtype, dtype=dtype,
                attn_type=AttentionType.DECODER, attn_backend=FlashAttentionBackend)


def build_llama3() -> Built:
    """Llama-3.1-8B: every layer full attention (no ``layer_types`` in its config)."""
    config: dict[str, dict[str, Any]] = {}
    source = "meta-llama/Llama-3.1-8B config.json (published values)"
    values: dict[str, int] = {"num_hidden_layers": 32, "num_attention_heads": 32,
                              "num_key_value_heads": 8, "hidden_size": 4096}
    record(config, source, torch_dtype="bfloat16", **values)
    head_dim = values["hidden_size"] // values["num_attention_heads"]
    record(config, "llama.py: head_dim = hidden_size // num_attention_heads", head_dim=head_dim)
    layers = {}
    for i in range(values["num_hidden_layers"]):
        # llama.py LlamaAttention: sliding_window only where config.layer_types says so
        name = f"model.layers.{i}.self_attn.attn"
        layers[name] = attention_layer(name, num_kv_heads=values["num_key_value_heads"],
                                       head_size=head_dim, sliding_window=None,
                                       model_dtype="bfloat16")
    return Built(layers, config, ["vllm/model_executor/models/llama.py", ATTENTION_MODULE],
                 "families_dense.build_llama3", head_size=head_dim,
                 notes=[NOTE],
                 expected_layers=values["num_hidden_layers"])


def build_gemma3() -> Built:
    """Gemma-3 (text): ``config.layer_types`` decides sliding vs full (gemma3.py)."""
    hf, source = hf_config("transformers.Gemma3TextConfig")
    config: dict[str, dict[str, Any]] = {}
    record(config, source, num_hidden_layers=hf.num_hidden_layers,
           num_key_value_heads=hf.num_key_value_heads, head_dim=hf.head_dim,
           sliding_window=hf.sliding_window, layer_types=hf.layer_types)
    layers = {}
    for i in range(hf.num_hidden_layers):
        # gemma3.py Gemma3Attention: is_sliding = layer_types[i] == "sliding_attention"
        is_sliding = hf.layer_types[i] == "sliding_attention"
        name = f"model.layers.{i}.self_attn.attn"
        layers[name] = attention_layer(name, num_kv_heads=hf.num_key_value_heads,
                                       head_size=hf.head_dim,
                                       sliding_window=hf.sliding_window if is_sliding else None,
                                       model_dtype="bfloat16")
    return Built(layers, config, ["vllm/model_executor/models/gemma3.py", ATTENTION_MODULE],
                 "families_dense.build_gemma3", head_size=hf.head_dim,
                 notes=[NOTE],
                 expected_layers=hf.num_hidden_layers)


def build_gpt_oss() -> Built:
    """gpt-oss: even layers sliding window (gpt_oss.py ``layer_idx % 2 == 0``)."""
    hf, source = hf_config("transformers.GptOssConfig")
    config: dict[str, dict[str, Any]] = {}
    record(config, source, num_hidden_layers=hf.num_hidden_layers,
           num_key_value_heads=hf.num_key_value_heads, head_dim=hf.head_dim,
           sliding_window=hf.sliding_window)
    layers = {}
    for i in range(hf.num_hidden_layers):
        name = f"model.layers.{i}.attn.attn"
        layers[name] = attention_layer(name, num_kv_heads=hf.num_key_value_heads,
                                       head_size=hf.head_dim,
                                       sliding_window=hf.sliding_window if i % 2 == 0 else None,
                                       model_dtype="bfloat16")
    return Built(layers, config, ["vllm/model_executor/models/gpt_oss.py", ATTENTION_MODULE],
                 "families_dense.build_gpt_oss", head_size=hf.head_dim,
                 notes=[NOTE, "attention sinks do not enter the spec"],
                 expected_layers=hf.num_hidden_layers)


def build_llama4() -> Built:
    """Llama-4 (text): RoPE layers use chunked local attention, NoPE layers full
    attention (llama4.py: ``nope = no_rope_layers[i] == 0``;
    ``use_chunked_local_attn = not nope and attention_chunk_size``)."""
    quiet()
    from vllm.model_executor.layers.attention.chunked_local_attention import (
        ChunkedLocalAttention,
        create_chunked_local_attention_backend,
    )
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    hf, source = hf_config("transformers.Llama4TextConfig")
    config: dict[str, dict[str, Any]] = {}
    record(config, source, num_hidden_layers=hf.num_hidden_layers,
           num_key_value_heads=hf.num_key_value_heads, head_dim=hf.head_dim,
           attention_chunk_size=hf.attention_chunk_size, no_rope_layers=hf.no_rope_layers)
    chunked_backend = create_chunked_local_attention_backend(FlashAttentionBackend,
                                                             hf.attention_chunk_size)
    layers = {}
    for i in range(hf.num_hidden_layers):
        name = f"model.layers.{i}.self_attn.attn"
        layer = attention_layer(name, num_kv_heads=hf.num_key_value_heads,
                                head_size=hf.head_dim, sliding_window=None,
                                model_dtype="bfloat16")
        nope = hf.no_rope_layers[i] == 0
        if not nope and hf.attention_chunk_size:
            chunked = bare(ChunkedLocalAttention, **vars(layer))
            object.__setattr__(chunked, "attention_chunk_size", hf.attention_chunk_size)
            object.__setattr__(chunked, "attn_backend", chunked_backend)
            layer = chunked
        layers[name] = layer
    modules = ["vllm/model_executor/models/llama4.py", ATTENTION_MODULE,
               "vllm/model_executor/layers/attention/chunked_local_attention.py"]
    return Built(layers, config, modules,
                 "families_dense.build_llama4", head_size=hf.head_dim,
                 notes=[NOTE + " (wrapped by create_chunked_local_attention_backend on the "
                        "chunked layers)"],
                 expected_layers=hf.num_hidden_layers)


FAMILIES = [
    Family("llama-3.1-8b", build_llama3),
    Family("gemma-3", build_gemma3),
    Family("gpt-oss-20b", build_gpt_oss),
    Family("llama-4-scout", build_llama4),
]
