"""Independent formulations the reference is checked against (NUM-SELFCHECK-1).

:func:`dense_attention` gathers each request's keys into one contiguous
tensor, builds an explicit boolean mask from the absolute position of every
query token, and applies ``torch.softmax`` to the whole score matrix.
:func:`non_absorbed_attention` does the same with explicit per-head up
projections of the latent cache (DeepSeek MLA before weight absorption).
Neither shares code with :mod:`kvcontract.kernels.mla`: no key ranges, no
chunks, no online softmax. Both materialise ``[rows, heads, keys]`` and are
for small cases only.
"""

from __future__ import annotations

import torch

from .cases import MLABatch
from .mla import MLAResult

__all__ = ["absorb_query", "dense_attention", "non_absorbed_attention", "visibility_mask"]


def visibility_mask(
    causal: bool, query_len: int, seq_len: int, window: int | None
) -> torch.Tensor:
    """``[query_len, seq_len]`` boolean mask from query positions (NUM-VISIBILITY-1).

    Query token ``t`` of a request sits at position ``p_t = L - n + t``. A
    causal row sees keys ``j <= p_t``, a non-causal row every ``j < L``; with
    a window of ``W`` a row sees only the ``W`` newest of those: ``j > p_t - W``
    (causal) or ``j >= L - W`` (non-causal).
    """
    key = torch.arange(seq_len)[None, :]
    position = (seq_len - query_len + torch.arange(query_len))[:, None]
    newest = position if causal else torch.full_like(position, seq_len - 1)
    mask = key <= newest
    if window is not None:
        mask &= key > newest - window
    return mask


def _request_keys(batch: MLABatch, request: int) -> torch.Tensor:
    """The request's keys in order, page by page, as float64 ``[L, width]``."""
    length, block_size = batch.seq_len(request), batch.block_size
    pages = []
    for page_index in range((length + block_size - 1) // block_size):
        page = int(batch.block_table[request, page_index])
        pages.append(batch.kv_cache[page])
    if not pages:
        return batch.kv_cache.new_zeros(0, batch.head_dim, dtype=torch.float64)
    return torch.cat(pages)[:length].to(torch.float64)


def _masked_softmax_attention(
    scores: torch.Tensor, mask: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over the last axis of ``scores [n, H, L]`` under ``mask [n, L]``."""
    scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
    probabilities = torch.softmax(scores, dim=-1)
    if values.dim() == 2:
        out = torch.einsum("nhl,lr->nhr", probabilities, values)
    else:
        out = torch.einsum("nhl,hlr->nhr", probabilities, values)
    return out, torch.logsumexp(scores, dim=-1)


def dense_attention(batch: MLABatch) -> MLAResult:
    """Absorbed MLA with a materialised, explicitly masked score matrix (NUM-SELFCHECK-1)."""
    rank = batch.kv_lora_rank
    out = torch.zeros(batch.num_tokens, batch.num_heads, rank, dtype=torch.float64)
    lse = torch.zeros(batch.num_tokens, batch.num_heads, dtype=torch.float64)
    for r in range(batch.num_requests):
        rows = batch.rows(r)
        if len(rows) == 0:
            continue
        keys = _request_keys(batch, r)
        q = batch.q[rows.start : rows.stop].to(torch.float64).cpu()
        keys = keys.cpu()
        mask = visibility_mask(
            batch.kinds[r].causal, len(rows), batch.seq_len(r), batch.sliding_window
        )
        scores = torch.einsum("nhd,ld->nhl", q, keys) * batch.scale
        out[rows.start : rows.stop], lse[rows.start : rows.stop] = _masked_softmax_attention(
            scores, mask, keys[:, :rank]
        )
    return MLAResult(out, lse)


def absorb_query(
    q_nope: torch.Tensor, q_rope: torch.Tensor, w_uk: torch.Tensor
) -> torch.Tensor:
    """Absorbed query ``[T, H, R + P]`` from ``q_nope [T, H, d]``, ``q_rope [T, H, P]`` (NUM-SELFCHECK-1).

    ``w_uk [H, R, d]`` up-projects a latent vector ``c`` to the head's key
    ``W_UK[h] c``, so ``q_nope . (W_UK[h] c) = (W_UK[h]^T q_nope) . c``.
    """
    latent = torch.einsum("thd,hrd->thr", q_nope, w_uk)
    return torch.cat([latent, q_rope], dim=-1)


def non_absorbed_attention(
    batch: MLABatch,
    q_nope: torch.Tensor,
    q_rope: torch.Tensor,
    w_uk: torch.Tensor,
    w_uv: torch.Tensor,
) -> torch.Tensor:
    """MLA with explicit per-head keys and values (NUM-SELFCHECK-1).

    Keys of head ``h`` are ``[W_UK[h] c ; k_rope]`` and values ``W_UV[h]^T c``
    with ``w_uv [H, R, dv]``; returns ``[T, H, dv]`` in float64. The queries
    of ``batch`` are ignored: ``q_nope`` and ``q_rope`` stand for them.
    """
    rank = batch.kv_lora_rank
    out = torch.zeros(batch.num_tokens, batch.num_heads, w_uv.shape[-1], dtype=torch.float64)
    for r in range(batch.num_requests):
        rows = batch.rows(r)
        if len(rows) == 0:
            continue
        cache = _request_keys(batch, r).cpu()
        latent, k_rope = cache[:, :rank], cache[:, rank:]
        head_keys = torch.einsum("hrd,lr->hld", w_uk.to(torch.float64), latent)
        head_values = torch.einsum("hrv,lr->hlv", w_uv.to(torch.float64), latent)
        qn = q_nope[rows.start : rows.stop].to(torch.float64)
        qr = q_rope[rows.start : rows.stop].to(torch.float64)
        scores = torch.einsum("nhd,hld->nhl", qn, head_keys) + torch.einsum(
            "nhp,lp->nhl", qr, k_rope
        )
        mask = visibility_mask(
            batch.kinds[r].causal, len(rows), batch.seq_len(r), batch.sliding_window
        )
        out[rows.start : rows.stop], _ = _masked_softmax_attention(
            scores * batch.scale, mask, head_values
        )
    return out
