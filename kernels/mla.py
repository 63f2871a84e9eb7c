"""The ground truth: absorbed MLA over a paged latent cache, chunked, online softmax.

Row ``t`` of a request sees a contiguous key range ``[lo_t, hi_t)``
(NUM-VISIBILITY-1). The reference walks that range in chunks of
``key_chunk`` keys, tiles the query rows in groups of ``query_chunk``, and
keeps a running maximum, sum and weighted value per (row, head), so no
``[tokens, heads, context]`` tensor ever exists (NUM-MEMORY-1). It
accumulates in float64 by default; float32 is selectable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from .cases import MLABatch

__all__ = ["MLAResult", "RowScales", "mla_reference", "visible_ranges"]

DEFAULT_KEY_CHUNK = 1024
DEFAULT_QUERY_CHUNK = 32


@dataclasses.dataclass(frozen=True)
class RowScales:
    """Magnitudes that size the error budget of each row (NUM-TOL-1).

    ``score_magnitude[t, h]`` is ``scale * max_j sum_i |q_ti| |k_ji|`` over the
    keys ``j`` row ``t`` sees; ``value_magnitude[t]`` is the largest
    ``|v_jc|`` over those keys; ``visible_keys[t]`` is how many keys it sees.
    """

    score_magnitude: torch.Tensor
    value_magnitude: torch.Tensor
    visible_keys: torch.Tensor


@dataclasses.dataclass(frozen=True)
class MLAResult:
    """Output ``[tokens, heads, kv_lora_rank]`` and natural-log LSE ``[tokens, heads]`` (NUM-OUTPUT-1)."""

    out: torch.Tensor
    lse: torch.Tensor
    scales: RowScales | None = None


def visible_ranges(
    causal: bool, query_len: int, seq_len: int, window: int | None, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row key range ``[lo, hi)`` of a request (NUM-VISIBILITY-1, NUM-WINDOW-1).

    Causal (NUM-VERIFY-1): row ``t`` of ``n`` rows with ``L`` keys has
    ``hi = L - n + 1 + t``. Non-causal (NUM-DRAFT-1): ``hi = L``. A window
    of ``W`` keys keeps the last ``W`` of them: ``lo = max(hi - W, 0)``.
    """
    rows = torch.arange(query_len, dtype=torch.int64, device=device)
    if causal:
        hi = seq_len - query_len + 1 + rows
    else:
        hi = torch.full_like(rows, seq_len)
    lo = (hi - window).clamp(min=0) if window is not None else torch.zeros_like(hi)
    return lo, hi


def mla_reference(
    batch: MLABatch,
    *,
    accumulate: torch.dtype = torch.float64,
    key_chunk: int = DEFAULT_KEY_CHUNK,
    query_chunk: int = DEFAULT_QUERY_CHUNK,
    with_scales: bool = False,
    causal_override: Sequence[bool] | None = None,
) -> MLAResult:
    """Reference MLA attention of ``batch`` (NUM-OUTPUT-1, NUM-MEMORY-1).

    Returns ``out`` ``[tokens, heads, kv_lora_rank]`` and ``lse``
    ``[tokens, heads]`` in ``accumulate`` precision. ``with_scales`` also
    returns the :class:`RowScales` of the tolerance model.
    ``causal_override`` (one flag per request) recomputes the batch as if
    dispatched with other causality; the harness uses it to name a
    misrouting.
    """
    if accumulate not in (torch.float64, torch.float32):
        raise ValueError(f"accumulate must be float64 or float32, got {accumulate}")
    if key_chunk < 1 or query_chunk < 1:
        raise ValueError("key_chunk and query_chunk must be positive")
    if causal_override is not None and len(causal_override) != batch.num_requests:
        raise ValueError("causal_override needs one flag per request")
    tokens, heads, rank = batch.num_tokens, batch.num_heads, batch.kv_lora_rank
    device = batch.device
    out = torch.empty(tokens, heads, rank, dtype=accumulate, device=device)
    lse = torch.empty(tokens, heads, dtype=accumulate, device=device)
    score_mag = torch.zeros(tokens, heads, dtype=accumulate, device=device) if with_scales else None
    value_mag = torch.zeros(tokens, dtype=accumulate, device=device) if with_scales else None
    visible = torch.zeros(tokens, dtype=torch.int64, device=device)
    flat_cache = batch.kv_cache.reshape(-1, batch.head_dim)
    for r in range(batch.num_requests):
        rows = batch.rows(r)
        if len(rows) == 0:
            continue
        causal = batch.kinds[r].causal if causal_override is None else bool(causal_override[r])
        lo, hi = visible_ranges(causal, len(rows), batch.seq_len(r), batch.sliding_window, device)
        visible[rows.start : rows.stop] = hi - lo
        for t0 in range(0, len(rows), query_chunk):
            t1 = min(t0 + query_chunk, len(rows))
            tile = _attend_tile(
                q=batch.q[rows.start + t0 : rows.start + t1].to(accumulate),
                lo=lo[t0:t1],
                hi=hi[t0:t1],
                flat_cache=flat_cache,
                pages=batch.block_table[r].to(torch.int64),
                block_size=batch.block_size,
                rank=rank,
                scale=batch.scale,
                key_chunk=key_chunk,
                with_scales=with_scales,
            )
            span = slice(rows.start + t0, rows.start + t1)
            out[span], lse[span] = tile[0], tile[1]
            if score_mag is not None and value_mag is not None:
                score_mag[span], value_mag[span] = tile[2], tile[3]
    scales = None
    if score_mag is not None and value_mag is not None:
        scales = RowScales(score_mag, value_mag, visible)
    return MLAResult(out, lse, scales)


def _attend_tile(
    *,
    q: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    flat_cache: torch.Tensor,
    pages: torch.Tensor,
    block_size: int,
    rank: int,
    scale: float,
    key_chunk: int,
    with_scales: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Online softmax of the query rows ``q`` over their key ranges, chunk by chunk."""
    rows, heads, _ = q.shape
    dtype, device = q.dtype, q.device
    running_max = torch.full((rows, heads), float("-inf"), dtype=dtype, device=device)
    running_sum = torch.zeros(rows, heads, dtype=dtype, device=device)
    acc = torch.zeros(rows, heads, rank, dtype=dtype, device=device)
    score_mag = torch.zeros(rows, heads, dtype=dtype, device=device)
    value_mag = torch.zeros(rows, dtype=dtype, device=device)
    q_abs = q.abs() if with_scales else q
    first, last = int(lo.min()), int(hi.max())
    for c0 in range(first, last, key_chunk):
        positions = torch.arange(c0, min(c0 + key_chunk, last), device=device)
        slots = pages[positions // block_size] * block_size + positions % block_size
        keys = flat_cache.index_select(0, slots).to(dtype)
        seen = (positions[None, :] >= lo[:, None]) & (positions[None, :] < hi[:, None])
        hidden = ~seen[:, None, :]
        # In-place from here on: one [rows, heads, chunk] buffer per chunk.
        scores = torch.einsum("thd,cd->thc", q, keys).mul_(scale)
        scores.masked_fill_(hidden, float("-inf"))
        new_max = torch.maximum(running_max, scores.amax(dim=-1))
        # Rows that have seen no key yet keep a max of -inf; shift by 0 there.
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        rescale = torch.exp(running_max - shift)
        weights = scores.sub_(shift[..., None]).exp_()
        running_sum = running_sum * rescale + weights.sum(dim=-1)
        acc = acc * rescale[..., None] + torch.einsum("thc,cr->thr", weights, keys[:, :rank])
        running_max = new_max
        del scores, weights
        if with_scales:
            magnitude = torch.einsum("thd,cd->thc", q_abs, keys.abs()).mul_(scale)
            magnitude.masked_fill_(hidden, 0.0)
            score_mag = torch.maximum(score_mag, magnitude.amax(dim=-1))
            del magnitude
            row_values = keys[:, :rank].abs().amax(dim=-1)[None, :].expand(rows, -1)
            value_mag = torch.maximum(value_mag, row_values.masked_fill(~seen, 0.0).amax(dim=-1))
    if bool((running_sum <= 0).any()) or bool((hi <= lo).any()):
        raise ValueError("a query row sees no key; every row must see at least one")
    return acc / running_sum[..., None], running_max + torch.log(running_sum), score_mag, value_mag
