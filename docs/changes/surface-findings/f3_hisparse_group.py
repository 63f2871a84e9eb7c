import os; os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
import types, torch
from vllm.v1.kv_cache_interface import HiSparseHotSpec, FullAttentionSpec
from vllm.v1.core.kv_cache_planning import get_kv_cache_groups
from vllm.v1.kv_cache_layout import KVCacheLayout
full = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)  # 65536 B
hot = HiSparseHotSpec(block_size=16, page_size=32768, blocks_per_request=4)
cfg = types.SimpleNamespace(scheduler_config=types.SimpleNamespace(disable_hybrid_kv_cache_manager=False),
    attention_config=None, speculative_config=None,
    cache_config=types.SimpleNamespace(get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBHNC))
try:
    groups = get_kv_cache_groups(cfg, {"a": full, "h": hot})
except NotImplementedError as exc:
    print("explicit error:", exc); raise SystemExit(0)
except AssertionError as exc:
    raise SystemExit(f"VIOLATION of GROUP-PAGE-1: grouping failed by a bare assert (gone under -O): {exc!r}")
pages = {g.kv_cache_spec.page_size_bytes for g in groups}
if len(pages) > 1:
    raise SystemExit(f"VIOLATION of GROUP-PAGE-1: groups with page sizes {sorted(pages)}")
