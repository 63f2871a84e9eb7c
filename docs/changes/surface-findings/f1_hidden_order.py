import os; os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
import torch
from vllm.v1.kv_cache_interface import HiddenStateCacheSpec, MLAAttentionSpec
kw = dict(block_size=64, num_kv_heads=1, head_size=576, dtype=torch.bfloat16)
a, b = MLAAttentionSpec(**kw), HiddenStateCacheSpec(**kw)
m1, m2 = a.merge([a, b]), b.merge([b, a])
# The contract: two kinds never merge (ERROR-KIND-1); vLLM returns a spec, of specs[0]'s kind.
if {type(m1), type(m2)} == {MLAAttentionSpec, HiddenStateCacheSpec}:
    raise SystemExit(f"VIOLATION of ERROR-KIND-1: MLAAttentionSpec and HiddenStateCacheSpec merged into {type(m1).__name__} / {type(m2).__name__} (MERGE-ORDER-1: the kind depends on order)")
