"""Speculative-decoding tables: a target model plus the draft layers its speculator adds.

``deepseek-v3+dspark``: DeepSeek-V3 (MLA, every layer ``MLAAttention`` with
``non_causal_multi_token_decode=False``) drafted by DSpark with the dense MLA draft of
``vllm/models/kimi_k3/nvidia/dspark_mla.py`` (``K3DSparkModel``), whose layers are the
Kimi-K3 ``MultiHeadLatentAttention`` built with ``non_causal_multi_token_decode=True``.
It is the only DSpark draft architecture of vLLM 0.34.0 that pairs plain dense MLA draft
layers with a dense MLA target and whose class does not tie it to one target family
(``K3DSparkForCausalLM`` declares ``speculator_config_class = DSparkSpeculatorConfig``
and reads only its own draft config and the target's layer count):

* ``DSparkSpeculatorConfig.default_model``/``adapt_draft_model_config``
  (``v1/worker/gpu/spec_decode/dspark/config.py``): a draft with no speculator config
  class of its own (no separate checkpoint) becomes ``DSparkDraftModel`` (DeepSeek-V4's
  draft, which needs a V4/V4.1 target config); a self-contained draft
  (``speculator_config_class`` set) keeps its architecture. DeepSeek-V3's own
  ``DeepseekV2MLAAttention`` has a ``non_causal_multi_token_decode`` parameter, but no
  0.34.0 caller passes ``True``.
* the DSpark speculator is the DFlash one (``DSparkSpeculator(DFlashSpeculator)``), which
  feeds the draft the target's aux hidden states: ``DeepseekV3ForCausalLM`` implements
  ``SupportsEagle3`` (``deepseek_v2.py``).
* ``load_dspark_model`` (``dspark/utils.py``) builds the draft with
  ``attention_config.use_non_causal = dflash_has_any_non_causal(draft hf_config)``:
  a draft config without ``is_causal``/``dflash_config.causal``/``layer_types`` is
  non-causal (``qwen3_dflash._dflash_layer_causal``), so the draft's backend must be one
  that ``supports_non_causal()``.
* ``Speculator.load_model`` (``v1/worker/gpu/spec_decode/speculator.py``) marks every
  attention layer the draft adds ``is_draft_layer = True``; the runner's spec loop then
  sets ``is_draft=True`` on their specs.
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
from kvcontract.conformance.engines.vllm.tables.families_deepseek import (
    MLA_MODULE,
    V2_MODULE,
    build_deepseek_v3,
    mla_layer,
)

DSPARK_MODULES = [
    "vllm/v1/worker/gpu/spec_decode/dspark/config.py",
    "vllm/v1/worker/gpu/spec_decode/dspark/speculator.py",
    "vllm/v1/worker/gpu/spec_decode/dspark/utils.py",
    "vllm/v1/worker/gpu/spec_decode/speculator.py",
    "vllm/models/kimi_k3/nvidia/dspark_mla.py",
    "vllm/models/kimi_k3/nvidia/mla.py",
]

# K3DSparkModel._precompute_fused_context_kv (dspark_mla.py): "One KV-only GEMM replaces
# five full Q+KV GEMMs. For K3 this projects 5*576 rows rather than 5*2112 rows" -- the
# one draft layer count and latent width the engine's DSpark MLA code states.
K3_DSPARK_DRAFT_LAYERS = 5
K3_DSPARK_KV_WIDTH = 576


def k3_dspark_attention(prefix: str, *, kv_lora_rank: int, qk_rope_head_dim: int,
                        backend: type, kv_cache_dtype: str = "auto",
                        model_dtype: str = "bfloat16") -> Any:
    """The ``MultiHeadLatentAttention`` a ``K3DSparkDecoderLayer`` builds, as its
    ``__init__`` sets it up (``head_size = kv_lora_rank + qk_rope_head_dim``,
    ``non_causal_multi_token_decode=True``, the layer registered under its prefix)."""
    from vllm.models.kimi_k3.nvidia.mla import MultiHeadLatentAttention

    return bare(MultiHeadLatentAttention, layer_name=prefix, kv_lora_rank=kv_lora_rank,
                qk_rope_head_dim=qk_rope_head_dim, head_size=kv_lora_rank + qk_rope_head_dim,
                kv_cache_dtype=kv_cache_dtype, non_causal_multi_token_decode=True,
                attn_backend=backend, act_dtype=torch_dtype(model_dtype))


def mark_draft_layers(layers: dict[str, Any], target_names: set[str]) -> None:
    """``Speculator.load_model``: every attention layer not in the target's set is a
    draft layer."""
    for name in set(layers) - target_names:
        layers[name].is_draft_layer = True


def build_deepseek_v3_dspark() -> Built:
    quiet()
    from vllm.v1.attention.backends.mla.triton_mla import TritonMLABackend

    built = build_deepseek_v3()
    num_layers = int(built.config["num_hidden_layers"]["value"])
    kv_lora_rank = int(built.config["kv_lora_rank"]["value"])
    rope = int(built.config["qk_rope_head_dim"]["value"])
    backend = TritonMLABackend
    # Target: the same MLA layers, on the backend both sides can use (see notes).
    target = {name: mla_layer(name, head_size=kv_lora_rank + rope, backend=backend)
              for name in built.layers}
    layers: dict[str, Any] = dict(target)
    record(built.config, "dspark_mla.py K3DSparkModel._precompute_fused_context_kv "
           "comment ('five full Q+KV GEMMs ... 5*576 rows'); used as the draft config's "
           "num_hidden_layers (assumption: no published DSpark draft config)",
           draft_num_hidden_layers=K3_DSPARK_DRAFT_LAYERS)
    record(built.config, "the target's kv_lora_rank / qk_rope_head_dim (DeepseekV3Config "
           "defaults), used as the draft's (assumption; their sum matches the 576-wide K3 "
           "DSpark latent the dspark_mla.py comment states)",
           draft_kv_lora_rank=kv_lora_rank, draft_qk_rope_head_dim=rope)
    if kv_lora_rank + rope != K3_DSPARK_KV_WIDTH:
        raise RuntimeError(f"DeepSeek-V3 latent width {kv_lora_rank + rope} is not the "
                           f"K3 DSpark latent width {K3_DSPARK_KV_WIDTH}")
    # K3DSparkForCausalLM: start_layer_id = target model_config.get_total_num_hidden_layers();
    # K3DSparkDecoderLayer: prefix maybe_prefix("model", f"layers.{start + i}.self_attn").
    for i in range(K3_DSPARK_DRAFT_LAYERS):
        name = f"model.layers.{num_layers + i}.self_attn"
        layers[name] = k3_dspark_attention(name, kv_lora_rank=kv_lora_rank,
                                           qk_rope_head_dim=rope, backend=backend)
    mark_draft_layers(layers, set(target))
    built.layers = layers
    built.block_size = None  # the platform's pick for the (Triton MLA) backend
    built.head_size = kv_lora_rank + rope
    built.modules = [V2_MODULE, MLA_MODULE, *DSPARK_MODULES]
    built.builder = "families_spec_decode.build_deepseek_v3_dspark"
    built.notes = [
        "target: DeepSeek-V3 (DeepseekV3Config defaults: 61 MLA layers, kv_lora_rank 512, "
        "qk_rope_head_dim 64), MLAAttention with non_causal_multi_token_decode=False; "
        "its MTP layer left out",
        "draft: DSpark with K3DSparkForCausalLM (vllm/models/kimi_k3/nvidia/dspark_mla.py), "
        "the only 0.34.0 DSpark draft with dense MLA layers that is not tied to its target "
        "family (DSparkDraftModel needs a DeepSeek-V4/V4.1 target config, "
        "MistralLarge4DSparkModel a Mistral Large 4 target); DeepSeek-V3's own MLA is "
        "never built with non_causal_multi_token_decode=True in 0.34.0",
        f"draft layers: model.layers.{num_layers}..{num_layers + K3_DSPARK_DRAFT_LAYERS - 1}"
        ".self_attn (start_layer_id = the target's layer count), Kimi-K3 "
        "MultiHeadLatentAttention with non_causal_multi_token_decode=True; marked "
        "is_draft_layer by Speculator.load_model's rule (layers not in the target's set)",
        "assumption: the draft config's num_hidden_layers is 5 (the count the K3 DSpark "
        "code comment states; no published draft config here)",
        "assumption: the draft's kv_lora_rank/qk_rope_head_dim are the target's (512/64; "
        "576 wide, the K3 DSpark latent width the code comment states)",
        "assumption: cache dtype auto for both (no --kv-cache-dtype, no speculative "
        "kv_cache_dtype), so load_dspark_model keeps the target's cache_config",
        "assumption: backend TritonMLABackend for target and draft: the draft's config has "
        "no causal flags, so load_dspark_model sets use_non_causal=True and only backends "
        "with supports_non_causal() qualify (FlashInfer MLA, Triton MLA, TokenSpeed MLA "
        "[fp8 R1 dims only]); Triton MLA is the first MLA priority for both on SM12x "
        "(platforms/cuda.py _get_backend_priorities); block size: the platform's pick",
        "draft model's dtype: bfloat16 (torch default dtype during get_model)",
    ]
    built.expected_layers = num_layers + K3_DSPARK_DRAFT_LAYERS
    return built


FAMILIES = [
    Family("deepseek-v3+dspark", build_deepseek_v3_dspark),
]
