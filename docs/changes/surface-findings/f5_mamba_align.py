import os; os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
import types, torch
from vllm.v1.kv_cache_interface import MambaSpec, FullAttentionSpec
from vllm.v1.core.kv_cache_planning import get_kv_cache_groups
from vllm.v1.kv_cache_layout import KVCacheLayout
full = FullAttentionSpec(block_size=1, num_kv_heads=1, head_size=100, dtype=torch.bfloat16)  # 400 B
mamba = MambaSpec(block_size=16, shapes=((3, 5),), dtypes=(torch.bfloat16,), state_alignment=128)  # 128 B
cfg = types.SimpleNamespace(scheduler_config=types.SimpleNamespace(disable_hybrid_kv_cache_manager=False),
    attention_config=None, speculative_config=None,
    cache_config=types.SimpleNamespace(get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBHNC))
try:
    groups = get_kv_cache_groups(cfg, {"a": full, "m": mamba})
except AssertionError as exc:
    raise SystemExit(f"VIOLATION of GROUP-PAGE-1: grouping failed by a bare assert (gone under -O): {exc!r}")
m = [g.kv_cache_spec for g in groups if isinstance(g.kv_cache_spec, MambaSpec)][0]
if m.page_size_padded % m.state_alignment:
    raise SystemExit(f"VIOLATION of GROUP-PAGE-1: Mamba page padded to {m.page_size_padded}, not a multiple of state_alignment {m.state_alignment}")
