import os; os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
import types, torch
from vllm.v1.kv_cache_interface import SlidingWindowMLASpec, FullAttentionSpec
from vllm.v1.core.kv_cache_planning import get_kv_cache_groups
from vllm.v1.kv_cache_layout import KVCacheLayout
full = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)  # 65536 B
swmla = SlidingWindowMLASpec(block_size=16, num_kv_heads=1, head_size=576, dtype=torch.bfloat16, sliding_window=128)  # 18432 B
cfg = types.SimpleNamespace(scheduler_config=types.SimpleNamespace(disable_hybrid_kv_cache_manager=False),
    attention_config=None, speculative_config=None,
    cache_config=types.SimpleNamespace(get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBHNC))
groups = get_kv_cache_groups(cfg, {"a": full, "s": swmla})
padded = [g.kv_cache_spec for g in groups if isinstance(g.kv_cache_spec, SlidingWindowMLASpec)]
if padded and padded[0].page_size_padded:
    raise SystemExit(f"VIOLATION of GROUP-PAGE-1: SlidingWindowMLASpec page padded to {padded[0].page_size_padded} (MLA pages are never padded)")
