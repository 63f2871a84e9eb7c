"""DeepSeek families: V3 (MLA), V3.2 (sparse MLA + indexer K cache), V4 (compressed MLA,
SWA cache, compressor state caches, indexer with its own compressor).

The MLA layer is made as ``MultiHeadLatentAttentionWrapper`` makes it (``bare``, the
attributes its ``__init__`` sets); the small cache layers (indexer K cache, compressor
state cache, SWA cache) are built through their own ``__init__`` (``construct``).
MTP (next-n) layers belong to the draft model, not the target's table, and are left out.
"""

from __future__ import annotations

from typing import Any

from kvcontract.conformance.engines.vllm.tables.build import (
    Built,
    Family,
    bare,
    cache_config,
    construct,
    hf_config,
    quiet,
    record,
    torch_dtype,
)

MLA_MODULE = "vllm/model_executor/layers/attention/mla_attention.py"
V2_MODULE = "vllm/model_executor/models/deepseek_v2.py"


def mla_layer(prefix: str, *, head_size: int, backend: type, indexer: Any = None,
              topk_buffer_width: int | None = None, kv_cache_dtype: str = "auto",
              model_dtype: str = "bfloat16") -> Any:
    """An ``MLAAttention`` as its ``__init__`` sets it up (``head_size = kv_lora_rank +
    qk_rope_head_dim``, one latent KV head)."""
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    return bare(MLAAttention, layer_name=prefix, head_size=head_size, num_kv_heads=1,
                kv_cache_dtype=kv_cache_dtype, sliding_window=None, indexer=indexer,
                topk_buffer_width=topk_buffer_width, non_causal_multi_token_decode=False,
                attn_backend=backend, act_dtype=torch_dtype(model_dtype))


def build_deepseek_v3() -> Built:
    quiet()
    from vllm.v1.attention.backends.mla.flashmla import FlashMLABackend

    hf, source = hf_config("transformers.DeepseekV3Config")
    config: dict[str, dict[str, Any]] = {}
    record(config, source, num_hidden_layers=hf.num_hidden_layers, kv_lora_rank=hf.kv_lora_rank,
           qk_rope_head_dim=hf.qk_rope_head_dim, first_k_dense_replace=hf.first_k_dense_replace,
           num_nextn_predict_layers=hf.num_nextn_predict_layers)
    layers = {}
    for i in range(hf.num_hidden_layers):
        # every decoder layer has MLA attention (first_k_dense_replace only picks the MLP)
        name = f"model.layers.{i}.self_attn.attn"
        layers[name] = mla_layer(name, head_size=hf.kv_lora_rank + hf.qk_rope_head_dim,
                                 backend=FlashMLABackend)
    return Built(layers, config, [V2_MODULE, "vllm/model_executor/layers/mla.py", MLA_MODULE],
                 "families_deepseek.build_deepseek_v3",
                 head_size=hf.kv_lora_rank + hf.qk_rope_head_dim,
                 notes=["backend FlashMLABackend; block_size: the platform's pick for the backend",
                        "the DeepseekV3Config defaults are DeepSeek-V3's published values "
                        "(61 layers, kv_lora_rank 512, qk_rope_head_dim 64, first_k_dense 3)",
                        "cache dtype auto (bf16); MTP layer left out (draft model)"],
                 expected_layers=hf.num_hidden_layers)


def v32_builds_indexer(config: Any, layer_id: int) -> bool:
    """``DeepseekV2MLAAttention.__init__``'s IndexCache rule (deepseek_v2.py): whether
    layer ``layer_id`` builds its own indexer."""
    freq = getattr(config, "index_topk_freq", 1)
    pattern = getattr(config, "index_topk_pattern", None)
    offset = getattr(config, "index_skip_topk_offset", 2)
    if pattern is None:
        skip = max(layer_id - offset + 1, 0) % freq != 0
    else:
        skip = 0 <= layer_id < len(pattern) and pattern[layer_id] == "S"
    return not skip or layer_id >= config.num_hidden_layers


def build_deepseek_v32() -> Built:
    quiet()
    import torch
    from vllm.model_executor.models.deepseek_v2 import DeepseekV32IndexerCache
    from vllm.v1.attention.backends.mla.flashmla_sparse import FlashMLASparseBackend

    hf, source = hf_config("transformers.DeepseekV32Config")
    config: dict[str, dict[str, Any]] = {}
    record(config, source, num_hidden_layers=hf.num_hidden_layers, kv_lora_rank=hf.kv_lora_rank,
           qk_rope_head_dim=hf.qk_rope_head_dim, index_topk=hf.index_topk,
           index_head_dim=hf.index_head_dim,
           index_topk_freq=getattr(hf, "index_topk_freq", None),
           index_topk_pattern=getattr(hf, "index_topk_pattern", None))
    cache = cache_config(None)
    layers: dict[str, Any] = {}
    quant_block = 128  # Indexer.quant_block_size in deepseek_v2.py
    for i in range(hf.num_hidden_layers):
        prefix = f"model.layers.{i}.self_attn"
        indexer = None
        if v32_builds_indexer(hf, i):
            k_cache = construct(DeepseekV32IndexerCache,
                                head_dim=hf.index_head_dim + hf.index_head_dim // quant_block * 4,
                                dtype=torch.uint8, prefix=f"{prefix}.indexer.k_cache",
                                cache_config=cache)
            indexer = k_cache  # only its presence matters to the MLA spec
        layers[f"{prefix}.attn"] = mla_layer(
            f"{prefix}.attn", head_size=hf.kv_lora_rank + hf.qk_rope_head_dim,
            backend=FlashMLASparseBackend, indexer=indexer, topk_buffer_width=hf.index_topk)
        if indexer is not None:
            layers[f"{prefix}.indexer.k_cache"] = indexer
    return Built(layers, config, [V2_MODULE, MLA_MODULE], "families_deepseek.build_deepseek_v32",
                 head_size=hf.kv_lora_rank + hf.qk_rope_head_dim,
                 cache=cache,
                 notes=["backend FlashMLASparseBackend; block_size: the platform's pick",
                        "cache dtype auto (bf16); topk buffer width = index_topk"],
                 expected_layers=2 * hf.num_hidden_layers)


def build_deepseek_v4() -> Built:
    quiet()
    import torch
    from vllm.models.deepseek_v4 import attention as v4
    from vllm.models.deepseek_v4.compressor import CompressorStateCache
    from vllm.models.deepseek_v4.nvidia.flashmla import DeepseekV4FlashMLAAttention
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekV4SWACache

    hf, source = hf_config("transformers.DeepseekV4Config")
    config: dict[str, dict[str, Any]] = {}
    record(config, source, num_hidden_layers=hf.num_hidden_layers, head_dim=hf.head_dim,
           qk_rope_head_dim=hf.qk_rope_head_dim, sliding_window=hf.sliding_window,
           compress_rates=hf.compress_rates, layer_types=hf.layer_types,
           index_head_dim=hf.index_head_dim)
    cache = cache_config(None, "auto")
    attn_cls = DeepseekV4FlashMLAAttention  # _select_dsv4_attn_cls: FlashMLA on non-SM12 CUDA
    probe = bare(attn_cls)
    kv_cache_dtype, kv_torch = v4._resolve_dsv4_kv_cache_dtype(
        probe._uses_fp8_ds_mla_layout(), cache.cache_dtype, cache)
    layers: dict[str, Any] = {}
    quant_block = 128  # DeepseekV4Indexer.quant_block_size (FP8 indexer cache, the default)
    for i in range(hf.num_hidden_layers):
        prefix = f"model.layers.{i}.attn"
        # DeepseekV4Attention.__init__: compress_ratio from layer_types / compress_rates
        ratio = max(1, hf.compress_rates.get(hf.layer_types[i], 0))
        layers[prefix] = bare(attn_cls, prefix=prefix, compress_ratio=ratio, head_dim=hf.head_dim,
                              kv_cache_dtype=kv_cache_dtype, kv_cache_torch_dtype=kv_torch,
                              window_size=hf.sliding_window, backend_cls=attn_cls.backend_cls
                              if hasattr(attn_cls, "backend_cls") else None)
        layers[f"{prefix}.swa_cache"] = construct(
            DeepseekV4SWACache, head_dim=hf.head_dim, window_size=hf.sliding_window,
            dtype=kv_torch, prefix=f"{prefix}.swa_cache", cache_config=cache,
            backend_cls=attn_cls.swa_backend_cls)
        if ratio > 1:
            coff = 1 + (ratio == 4)  # DeepseekCompressor: overlap = compress_ratio == 4
            layers[f"{prefix}.compressor.state_cache"] = construct(
                CompressorStateCache, state_dim=2 * coff * hf.head_dim, dtype=torch.float32,
                compress_ratio=ratio, prefix=f"{prefix}.compressor.state_cache")
        if ratio == 4:  # only C4A layers have an indexer
            ip = f"{prefix}.indexer"
            layers[f"{ip}.k_cache"] = construct(
                v4.DeepseekV4IndexerCache,
                head_dim=hf.index_head_dim + hf.index_head_dim // quant_block * 4,
                dtype=torch.uint8, prefix=f"{ip}.k_cache", cache_config=cache,
                compress_ratio=ratio)
            layers[f"{ip}.compressor.state_cache"] = construct(
                CompressorStateCache, state_dim=2 * 2 * hf.index_head_dim, dtype=torch.float32,
                compress_ratio=ratio, prefix=f"{ip}.compressor.state_cache")
    n_c4 = sum(1 for t in hf.layer_types if hf.compress_rates.get(t, 0) == 4)
    n_comp = sum(1 for t in hf.layer_types if hf.compress_rates.get(t, 0) > 1)
    expected = hf.num_hidden_layers + n_comp + n_comp + 2 * n_c4
    return Built(layers, config, ["vllm/models/deepseek_v4/attention.py",
                                  "vllm/models/deepseek_v4/compressor.py",
                                  "vllm/models/deepseek_v4/nvidia/flashmla.py",
                                  "vllm/v1/attention/backends/mla/sparse_swa.py"],
                 "families_deepseek.build_deepseek_v4", cache=cache, head_size=hf.head_dim,
                 cache_dtype=cache.cache_dtype,
                 notes=["attention class DeepseekV4FlashMLAAttention (CUDA, non-SM12 default)",
                        f"--kv-cache-dtype auto resolved by _resolve_dsv4_kv_cache_dtype to "
                        f"{kv_cache_dtype} ({kv_torch})",
                        "sliding-only layers (compress ratio 1) give no attention spec; "
                        "MTP layers left out"],
                 expected_layers=expected)


FAMILIES = [
    Family("deepseek-v3", build_deepseek_v3),
    Family("deepseek-v3.2", build_deepseek_v32),
    Family("deepseek-v4", build_deepseek_v4),
]
