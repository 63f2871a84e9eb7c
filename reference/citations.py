"""Who relies on each spec field: the ``relied_on_by`` citations and advisory reasons
that :mod:`kvcontract.reference.specs` puts in its fields' metadata (ROLE-TABLE-1).

Each names, engine-neutrally, what reads the field's value in a group's merged spec (or,
where the engine reads per-layer specs instead, in those), then the vLLM 0.34.0 code as
``vllm/<path>.py:<line> `<name>` in <function>``. An advisory reason starts "nothing reads
the merged value". tests/test_spec_citations.py checks every cited line still contains
``<name>``. Constants are named ``<KIND>_<FIELD>`` after the class that declares the field.
"""

from __future__ import annotations

PAGE = ("the planner sizes every block of the group from its spec's page size "
         "(vllm/v1/core/kv_cache_planning.py:635 `page_size_bytes` in _get_kv_cache_bytes_per_block)")
ATTN_PAGE = (PAGE + "; an attention page's cell bytes "
              "(vllm/v1/kv_cache_interface.py:601 `head_size_v` in AttentionSpec.state_content_size_bytes)")
ALIGNMENT = ("re-derives the page padding whenever the group's spec is copied to another block size, "
              "e.g. the kernel block size its metadata builders get "
              "(vllm/v1/worker/utils.py:303 `copy_with_new_block_size` in AttentionGroup.create_metadata_builders; "
              "vllm/v1/kv_cache_interface.py:732 `alignment` in _apply_alignment_padding)")
NON_CAUSAL_MTD = ("nothing reads the merged value: the MLA metadata builder takes the flag from the "
                   "group's layers, not its spec, so that a target sharing a group with draft layers is not "
                   "marked non-causal (vllm/model_executor/layers/attention/mla_attention.py:2626 "
                   "`non_causal_multi_token_decode` in MLACommonMetadataBuilder.__init__)")

KVCACHESPEC_BLOCK_SIZE = (
    "the block manager counts a request's blocks in tokens per block of the group's spec "
    "(vllm/v1/core/single_type_kv_cache_manager.py:110 `block_size` in SingleTypeKVCacheManager.__init__)")

KVCACHESPEC_DCP_SHARDED = (
    "the block manager scales tokens per block by the DCP ranks when the group's spec is sharded "
    "(vllm/v1/core/single_type_kv_cache_manager.py:108 `dcp_sharded` in SingleTypeKVCacheManager.__init__)")

KVCACHESPEC_BLOCK_STRIDE_ALIGNMENT = (
    "the planner pads the stride between physical blocks to the group's spec's alignment "
    "(vllm/v1/core/kv_cache_planning.py:617 `get_block_stride_alignment` in _get_layer_block_stride)")

KVCACHESPEC_IS_DRAFT = (
    "nothing reads the merged value: the planner marks draft (EAGLE) groups from each layer's own "
    "spec (vllm/v1/core/kv_cache_planning.py:1758 `is_draft` in get_global_kv_cache_groups), and the "
    "field is excluded from the engine's equality")

ATTENTIONSPEC_DCP_SHARDED = (
    "the block manager scales tokens per block by the DCP ranks when the group's spec is sharded "
    "(vllm/v1/core/single_type_kv_cache_manager.py:108 `dcp_sharded` in SingleTypeKVCacheManager.__init__)")

ATTENTIONSPEC_MAX_TP_SHARDS = (
    "the planner counts the TP ranks that hold replica bytes from every group's spec "
    "(vllm/v1/core/kv_cache_planning.py:1278 `max_tp_shards` in _layer_tp_replicas)")

ATTENTIONSPEC_NUM_KV_HEADS = (
    "the attention metadata builder is built from the group's spec "
    "(vllm/v1/attention/backends/flash_attn.py:709 `num_kv_heads` in FlashAttentionMetadataBuilder.__init__)")

ATTENTIONSPEC_HEAD_SIZE = (
    "the attention metadata builder is built from the group's spec "
    "(vllm/v1/attention/backends/flash_attn.py:711 `head_size` in FlashAttentionMetadataBuilder.__init__)")

ATTENTIONSPEC_DTYPE = (
    "the attention metadata builder is built from the group's spec "
    "(vllm/v1/attention/backends/flash_attn.py:710 `dtype` in FlashAttentionMetadataBuilder.__init__)")

ATTENTIONSPEC_KV_QUANT_MODE = (
    "the backend picks its kernels from the spec its metadata builder gets "
    "(vllm/v1/attention/backends/flash_attn.py:157 `kv_quant_mode` in FA4DenseAttentionKernel.get_warmup_keys)")

ATTENTIONSPEC_PAGE_SIZE_PADDED = (
    "the planner rescales a group's padded page when it grows the common page "
    "(vllm/v1/core/kv_cache_planning.py:1151 `page_size_padded` in _ensure_min_page_size); " + PAGE)

ATTENTIONSPEC_NUM_HEAD_SLOTS = (
        PAGE + "; the page's head slots (vllm/v1/kv_cache_interface.py:592 `num_head_slots` in "
    "AttentionSpec.num_heads)")

ATTENTIONSPEC_STATE_CONTENT_BYTES = (
        PAGE + "; the packed cell bytes (vllm/v1/kv_cache_interface.py:599 `state_content_bytes` in "
    "AttentionSpec.state_content_size_bytes)")

ATTENTIONSPEC_KV_HEAD_MAJOR_SLOTS = (
    "a KV connector slices a page by KV head only when the group's spec lays it out head-major "
    "(vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:2936 `kv_head_major_slots` "
    "in NixlBaseConnectorWorker._validate_remote_agent_handshake; its per-layer specs are the group's "
    "spec, vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:717 `group_spec`)")

ATTENTIONSPEC_TOKENS_PER_STATE = (
    "the indexer's metadata builder reads the compression ratio from the group's spec "
    "(vllm/v1/attention/backends/mla/indexer.py:1016 `tokens_per_state` in "
    "DeepseekV32IndexerMetadataBuilder.__init__)")

FULLATTENTIONSPEC_SLIDING_WINDOW = (
    "the backend compiles its window variant from the spec its metadata builder gets "
    "(vllm/v1/attention/backends/flash_attn.py:164 `sliding_window` in FA4DenseAttentionKernel.get_warmup_keys, "
    "registered with the builder's spec at flash_attn.py:734)")

FULLATTENTIONSPEC_ATTENTION_CHUNK_SIZE = (
    "nothing reads the merged value of a full-attention spec: block managers and connectors read "
    "attention_chunk_size only of a chunked-local spec "
    "(vllm/v1/core/single_type_kv_cache_manager.py:1284 `attention_chunk_size` in "
    "ChunkedLocalAttentionManager.__init__)")

FULLATTENTIONSPEC_NON_CAUSAL = (
    "nothing reads the merged value: the engine core reads it from every layer's spec, before "
    "grouping, to turn off chunked prefill and prefix caching "
    "(vllm/v1/engine/core.py:289 `non_causal` in EngineCore._initialize_kv_caches); no MLA layer sets it")

MLAATTENTIONSPEC_CACHE_DTYPE_STR = (
    "the MLA metadata builder decodes the group's storage format from its spec "
    "(vllm/v1/attention/backends/mla/rocm_aiter_mla.py:1081 `cache_dtype_str` in AiterMLAMetadataBuilder.__init__)")

MLAATTENTIONSPEC_TOPK_BUFFER_WIDTH = (
    "nothing reads the merged value: HiSparse reads it from each layer's spec "
    "(vllm/v1/hisparse/layout.py:139 `topk_buffer_width` in _lay_out_hisparse_groups), and the "
    "buffer itself is the attention layers' (vllm/model_executor/layers/attention/mla_attention.py:587 "
    "`topk_buffer_width`)")

MLAATTENTIONSPEC_MODEL_VERSION = (
    "the indexer's metadata builder refuses decode-context parallelism for a DeepSeek-V4 group "
    "(vllm/v1/attention/backends/mla/indexer.py:1140 `model_version` in "
    "DeepseekV32IndexerMetadataBuilder.__init__); one merged spec has one value, but grouping may "
    "keep layers of different values in one block table (DeepSeek-V4.1's main KV and indexer)")

MLAATTENTIONSPEC_CACHE_ROLE = (
    "a KV connector refuses synchronous loads for a group whose spec holds indexer keys "
    "(vllm/distributed/kv_transfer/kv_connector/v1/umbp/scheduler.py:223 `cache_role` in "
    "UMBPStoreConnectorScheduler.__init__)")

MLAATTENTIONSPEC_IS_INDEX_GROUP_LEADER = (
    "nothing reads the merged value: HiSparse reads it from each layer's spec to cut hot units "
    "(vllm/v1/hisparse/layout.py:162 `is_index_group_leader` in _lay_out_hisparse_groups)")

RSWASPEC_RSWA_WINDOW = (
    "the block manager evicts generated tokens' blocks outside the window of the group's spec "
    "(vllm/v1/core/single_type_kv_cache_manager.py:916 `rswa_window` in RSWAManager.__init__)")

SINKFULLATTENTIONSPEC_SINK_LEN = (
    "the static-sink block manager checks that the sink tokens of the group's spec fill whole blocks "
    "(vllm/v1/core/single_type_kv_cache_manager.py:2224 `sink_len` in SinkFullAttentionManager.__init__); "
    "it allocates and frees as the full-attention manager does")

SLIDINGWINDOWSPEC_SLIDING_WINDOW = (
    "the block manager frees blocks below the window of the group's spec "
    "(vllm/v1/core/single_type_kv_cache_manager.py:954 `sliding_window` in SlidingWindowManager.__init__)")

SLIDINGWINDOWSPEC_EXTRA_RETAINED_TOKENS = (
    "the block manager keeps that many tokens' blocks below the window "
    "(vllm/v1/core/single_type_kv_cache_manager.py:958 `extra_retained_tokens` in "
    "SlidingWindowManager.__init__)")

SLIDINGWINDOWMLASPEC_CACHE_DTYPE_STR = (
    "nothing reads the merged value: the sliding-window MLA backend takes the storage format from the "
    "cache config (vllm/v1/attention/backends/mla/sparse_swa.py:136 `cache_dtype_str`), and the MLA "
    "builders that read it from a spec serve MLAAttentionSpec groups")

SLIDINGWINDOWMLASPEC_MODEL_VERSION = (
    "nothing reads the merged value: the indexer's DeepSeek-V4 check reads an MLAAttentionSpec only "
    "(vllm/v1/attention/backends/mla/indexer.py:1140 `model_version`); the engine only validates it at "
    "construction")

SLIDINGWINDOWMLASPEC_BOUNDED_REPLAY = (
    "the block manager stops prefix-caching the group's blocks "
    "(vllm/v1/kv_cache_interface.py:1045 `bounded_replay` in SlidingWindowMLASpec.prefix_cacheable, read "
    "from the group's spec at vllm/v1/core/single_type_kv_cache_manager.py:504 `prefix_cacheable`)")

CHUNKEDLOCALATTENTIONSPEC_ATTENTION_CHUNK_SIZE = (
    "the block manager frees blocks outside the current chunk of the group's spec "
    "(vllm/v1/core/single_type_kv_cache_manager.py:1284 `attention_chunk_size` in "
    "ChunkedLocalAttentionManager.__init__)")

MAMBASPEC_SHAPES = (
    "the state-space metadata builder reads head counts from the group's state shapes "
    "(vllm/v1/attention/backends/mamba_attn.py:171 `shapes` in BaseMambaAttentionMetadataBuilder.__init__)")

MAMBASPEC_DTYPES = (
        PAGE + "; each state's bytes (vllm/v1/kv_cache_interface.py:1149 `dtypes` in "
    "MambaSpec.state_content_size_bytes)")

MAMBASPEC_STATE_ALIGNMENT = (
        PAGE + "; each state rounded up (vllm/v1/kv_cache_interface.py:1148 `state_alignment` in "
    "MambaSpec.state_content_size_bytes)")

MAMBASPEC_PAGE_SIZE_PADDED = (
    "the planner rescales a group's padded page when it grows the common page "
    "(vllm/v1/core/kv_cache_planning.py:1151 `page_size_padded` in _ensure_min_page_size); " + PAGE)

MAMBASPEC_MAMBA_TYPE = (
    "the worker picks the state copy functions of the group's spec "
    "(vllm/v1/worker/mamba_utils.py:694 `mamba_type` in validate_mamba_state_copy_funcs)")

MAMBASPEC_MAMBA_CACHE_MODE = (
    "the state manager's block policy follows the group's spec "
    "(vllm/v1/core/single_type_kv_cache_manager.py:1446 `mamba_cache_mode` in MambaManager.__init__)")

MAMBASPEC_NUM_SPECULATIVE_BLOCKS = (
    "the state manager holds that many extra blocks per request "
    "(vllm/v1/core/single_type_kv_cache_manager.py:1450 `num_speculative_blocks` in MambaManager.__init__)")

MAMBASPEC_NUM_PREFILL_CHECKPOINT_BLOCKS = (
    "the state manager and the scheduler hold checkpoint blocks per the group's spec "
    "(vllm/v1/core/single_type_kv_cache_manager.py:1453 `num_prefill_checkpoint_blocks` in "
    "MambaManager.__init__; vllm/v1/core/sched/scheduler.py:457 `num_prefill_checkpoint_blocks`)")

MAMBASPEC_PREFILL_CHECKPOINT_ALIGNMENT = (
    "the state manager and the scheduler place prefill checkpoints at the group's alignment "
    "(vllm/v1/core/single_type_kv_cache_manager.py:1684 `prefill_checkpoint_alignment` in "
    "MambaManager._needs_internal_checkpoint; vllm/v1/core/sched/scheduler.py:449 "
    "`prefill_checkpoint_alignment`)")

MAMBASPEC_NUM_HEADS = (
    "nothing reads the merged value: the cache layout is resolved from each layer's spec before "
    "grouping (vllm/v1/attention/backends/utils.py:358 `num_heads` in resolve_kv_cache_layout, called "
    "with the per-layer specs at vllm/v1/engine/core.py:317 `specs.values()`)")

MAMBASPEC_TOKENS_PER_STATE = (
    "nothing reads the merged value: the cache layout is resolved from each layer's spec before "
    "grouping (vllm/v1/attention/backends/utils.py:358 `num_states` in resolve_kv_cache_layout); "
    "kernel-block views are built for attention groups only (vllm/v1/worker/utils.py:292 `AttentionSpec`)")

MAMBASPEC_TP_REPLICATED = (
    "a KV connector transfers a replicated state group once, not per TP rank, reading every "
    "group's spec (vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:746 "
    "`tp_replicated` in NixlBaseConnectorWorker.__init__)")

HISPARSEHOTSPEC_PAGE_SIZE = (
        PAGE + "; the given page (vllm/v1/kv_cache_interface.py:502 `page_size` in "
    "HiSparseHotSpec.page_size_bytes)")

HISPARSEHOTSPEC_BLOCKS_PER_REQUEST = (
    "the hot-cache manager holds exactly that many blocks per request "
    "(vllm/v1/core/single_type_kv_cache_manager.py:2418 `blocks_per_request` in HiSparseHotManager.__init__)")

HISPARSERESIDENTSPEC_PAGE_SIZE = (
        PAGE + "; the given page (vllm/v1/kv_cache_interface.py:538 `page_size` in "
    "HiSparseResidentSpec.page_size_bytes)")
