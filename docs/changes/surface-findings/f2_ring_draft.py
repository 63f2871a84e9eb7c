import os; os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
import torch
from vllm.v1.kv_cache_interface import CircularBufferSpec
ring = CircularBufferSpec(block_size=128, num_kv_heads=1, head_size=512, dtype=torch.bfloat16)
draft = CircularBufferSpec(block_size=128, num_kv_heads=1, head_size=512, dtype=torch.bfloat16, is_draft=True)
x, y = ring.merge([ring, draft]).is_draft, draft.merge([draft, ring]).is_draft
if x != y:
    raise SystemExit(f"VIOLATION of MERGE-ORDER-1: CircularBufferSpec merge is_draft {x} vs {y} by order")
