"""Batches of MLA attention work: their description and their tensors.

A :class:`CaseSpec` is plain data (request kinds, lengths, shapes, a seed); it
materialises into an :class:`MLABatch` of tensors with :func:`build_batch`.
Every spec reproduces the same tensors, so a failing case can be printed and
re-run. The visibility rules the kinds stand for are NUM-DECODE-1,
NUM-VERIFY-1, NUM-DRAFT-1, NUM-PREFILL-1, NUM-WINDOW-1 and NUM-PAD-1. Which
cases a run checks (hypothesis-drawn and production-shaped) is
:mod:`kvcontract.kernels.generation`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

import torch

__all__ = [
    "DTYPES",
    "MODES",
    "CaseSpec",
    "Kind",
    "MLABatch",
    "RequestSpec",
    "build_batch",
    "mode_of",
]

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


class Kind(enum.StrEnum):
    """How a request's query rows are dispatched (NUM-DECODE-1 … NUM-PAD-1)."""

    DECODE = "decode"  # one query row, causal
    VERIFY = "verify"  # causal multi-token verification block
    DRAFT = "draft"  # non-causal draft block
    PREFILL = "prefill"  # causal prefill or extend
    PADDING = "padding"  # trailing request with zero query tokens

    @property
    def causal(self) -> bool:
        """Whether row t is limited to the keys before its own position (NUM-VERIFY-1)."""
        return self is not Kind.DRAFT


# Table modes, in report order. A request's mode is its kind, except that in
# a batch with a sliding window it is the window mode of its causality.
MODES: tuple[str, ...] = (
    "decode",
    "verify",
    "draft",
    "prefill",
    "window-causal",
    "window-noncausal",
    "padding",
)


def mode_of(kind: Kind, windowed: bool) -> str:
    """The report mode of a request of ``kind`` (NUM-WINDOW-1 splits windowed batches)."""
    if kind is Kind.PADDING:
        return "padding"
    if windowed:
        return "window-causal" if kind.causal else "window-noncausal"
    return kind.value


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    """One request of a batch: its kind, query rows ``query_len`` and keys ``seq_len`` (NUM-VISIBILITY-1)."""

    kind: Kind
    query_len: int
    seq_len: int


@dataclasses.dataclass(frozen=True)
class CaseSpec:
    """A reproducible batch description (NUM-DECODE-1 … NUM-PAD-1).

    ``query_scale`` multiplies the standard normal queries, which sharpens or
    flattens the softmax; ``spare_blocks`` adds cache pages no request owns,
    so the block table is a permutation of a larger pool.
    """

    requests: tuple[RequestSpec, ...]
    num_heads: int = 4
    kv_lora_rank: int = 32
    rope_dim: int = 16
    block_size: int = 16
    sliding_window: int | None = None
    dtype: str = "float32"
    seed: int = 0
    spare_blocks: int = 2
    query_scale: float = 1.0

    @property
    def head_dim(self) -> int:
        """Width of a cache entry and a query row: ``kv_lora_rank + rope_dim``."""
        return self.kv_lora_rank + self.rope_dim

    @property
    def modes(self) -> frozenset[str]:
        """The report modes of this case's requests."""
        return frozenset(mode_of(r.kind, self.sliding_window is not None) for r in self.requests)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict from which :meth:`from_json` rebuilds the spec."""
        data = dataclasses.asdict(self)
        data["requests"] = [
            {"kind": r.kind.value, "query_len": r.query_len, "seq_len": r.seq_len}
            for r in self.requests
        ]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseSpec:
        """Inverse of :meth:`to_json`."""
        fields = dict(data)
        fields["requests"] = tuple(
            RequestSpec(Kind(r["kind"]), int(r["query_len"]), int(r["seq_len"]))
            for r in data["requests"]
        )
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class MLABatch:
    """Inputs of absorbed MLA attention over a paged latent cache (NUM-INPUT-1).

    ``q`` is ``[tokens, heads, kv_lora_rank + rope_dim]``, ``kv_cache`` is
    ``[num_blocks, block_size, kv_lora_rank + rope_dim]``; request ``r`` owns
    query rows ``query_start_loc[r]:query_start_loc[r+1]``, has ``seq_lens[r]``
    keys, and its key at position ``p`` lives in slot ``p % block_size`` of
    block ``block_table[r, p // block_size]``. The value of a key is its first
    ``kv_lora_rank`` channels.
    """

    q: torch.Tensor
    kv_cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    query_start_loc: torch.Tensor
    kinds: tuple[Kind, ...]
    kv_lora_rank: int
    scale: float
    sliding_window: int | None = None

    def __post_init__(self) -> None:
        _validate_batch(self)

    @property
    def num_requests(self) -> int:
        """Requests in the batch, padding included."""
        return len(self.kinds)

    @property
    def num_tokens(self) -> int:
        """Query rows in the batch."""
        return int(self.q.shape[0])

    @property
    def num_heads(self) -> int:
        """Query heads."""
        return int(self.q.shape[1])

    @property
    def head_dim(self) -> int:
        """``kv_lora_rank + rope_dim``."""
        return int(self.q.shape[2])

    @property
    def block_size(self) -> int:
        """Keys per cache page."""
        return int(self.kv_cache.shape[1])

    @property
    def dtype(self) -> torch.dtype:
        """Storage dtype of queries, cache and engine output."""
        return self.q.dtype

    @property
    def device(self) -> torch.device:
        """Device holding the tensors."""
        return self.q.device

    def rows(self, request: int) -> range:
        """Global query-row indices of ``request``."""
        start = int(self.query_start_loc[request])
        return range(start, int(self.query_start_loc[request + 1]))

    def seq_len(self, request: int) -> int:
        """Number of keys of ``request``."""
        return int(self.seq_lens[request])

    def mode(self, request: int) -> str:
        """Report mode of ``request`` (see :func:`mode_of`)."""
        return mode_of(self.kinds[request], self.sliding_window is not None)

    def has_padding(self) -> bool:
        """Whether the batch ends in padding requests (NUM-PAD-1)."""
        return Kind.PADDING in self.kinds

    def without_padding(self) -> MLABatch:
        """The same batch with its trailing padding requests removed (NUM-PAD-1)."""
        keep = sum(1 for k in self.kinds if k is not Kind.PADDING)
        return dataclasses.replace(
            self,
            block_table=self.block_table[:keep],
            seq_lens=self.seq_lens[:keep],
            query_start_loc=self.query_start_loc[: keep + 1],
            kinds=self.kinds[:keep],
        )

    def with_query(self, q: torch.Tensor) -> MLABatch:
        """The same batch with queries ``q``."""
        return dataclasses.replace(self, q=q)


def _validate_batch(batch: MLABatch) -> None:
    q, cache = batch.q, batch.kv_cache
    if q.dim() != 3 or cache.dim() != 3:
        raise ValueError(f"q must be 3-D and kv_cache 3-D, got {tuple(q.shape)} and {tuple(cache.shape)}")
    if q.shape[2] != cache.shape[2]:
        raise ValueError(f"q width {q.shape[2]} != cache width {cache.shape[2]}")
    if not 0 < batch.kv_lora_rank <= q.shape[2]:
        raise ValueError(f"kv_lora_rank {batch.kv_lora_rank} outside (0, {q.shape[2]}]")
    num_requests = len(batch.kinds)
    if batch.seq_lens.shape != (num_requests,):
        raise ValueError(f"seq_lens shape {tuple(batch.seq_lens.shape)} != ({num_requests},)")
    if batch.query_start_loc.shape != (num_requests + 1,):
        raise ValueError("query_start_loc needs one more entry than there are requests")
    if batch.block_table.dim() != 2 or batch.block_table.shape[0] != num_requests:
        raise ValueError(f"block_table must be [{num_requests}, max_blocks]")
    if batch.sliding_window is not None and batch.sliding_window < 1:
        raise ValueError(f"sliding_window must be >= 1 or None, got {batch.sliding_window}")
    starts = batch.query_start_loc.tolist()
    if starts[0] != 0 or starts[-1] != q.shape[0]:
        raise ValueError(f"query_start_loc must run from 0 to {q.shape[0]}, got {starts}")
    seq_lens = batch.seq_lens.tolist()
    seen_padding = False
    for r, kind in enumerate(batch.kinds):
        n, length = starts[r + 1] - starts[r], seq_lens[r]
        if n < 0 or length < 0:
            raise ValueError(f"request {r}: negative query or sequence length")
        if kind is Kind.PADDING:
            seen_padding = True
            if n != 0:
                raise ValueError(f"request {r}: padding requests have zero query tokens, got {n}")
            continue
        if seen_padding:
            raise ValueError(f"request {r}: padding requests must be trailing")
        if n < 1 or length < n:
            raise ValueError(f"request {r}: needs 1 <= query_len <= seq_len, got {n}, {length}")
        if kind is Kind.DECODE and n != 1:
            raise ValueError(f"request {r}: a decode request has one query row, got {n}")
        needed = math.ceil(length / cache.shape[1])
        if needed > batch.block_table.shape[1]:
            raise ValueError(f"request {r}: block table too short for {length} keys")
        pages = batch.block_table[r, :needed]
        if needed and (int(pages.min()) < 0 or int(pages.max()) >= cache.shape[0]):
            raise ValueError(f"request {r}: block table points outside the cache")


def build_batch(spec: CaseSpec, device: torch.device | str = "cpu") -> MLABatch:
    """Materialise ``spec`` into tensors (NUM-ISOLATION-1 traps included).

    Queries and owned cache slots are standard normal (queries times
    ``query_scale``), rounded to ``spec.dtype``. Every slot no request may
    see (the tail of a last page, unowned pages, and the page that unused
    block-table entries point at) holds NaN, so a kernel that lets an
    invisible slot reach its output produces NaN and fails.
    """
    dtype = DTYPES[spec.dtype]
    gen = torch.Generator().manual_seed(spec.seed)
    bs = spec.block_size
    owned = [math.ceil(r.seq_len / bs) for r in spec.requests if r.kind is not Kind.PADDING]
    num_blocks = sum(owned) + spec.spare_blocks + 1  # + the trap page
    cache = torch.full((num_blocks, bs, spec.head_dim), float("nan"), dtype=torch.float32)
    permutation = torch.randperm(num_blocks, generator=gen)
    trap_page = int(permutation[-1])
    max_pages = max([1, *(math.ceil(r.seq_len / bs) for r in spec.requests)])
    table = torch.full((len(spec.requests), max_pages), trap_page, dtype=torch.int32)
    flat = cache.view(-1, spec.head_dim)
    next_page = 0
    for r, request in enumerate(spec.requests):
        if request.kind is Kind.PADDING:
            continue
        pages = permutation[next_page : next_page + math.ceil(request.seq_len / bs)]
        next_page += len(pages)
        table[r, : len(pages)] = pages.to(torch.int32)
        positions = torch.arange(request.seq_len)
        slots = pages[positions // bs] * bs + positions % bs
        flat[slots] = torch.randn(request.seq_len, spec.head_dim, generator=gen)
    query_lens = [r.query_len for r in spec.requests]
    q = torch.randn(sum(query_lens), spec.num_heads, spec.head_dim, generator=gen) * spec.query_scale
    starts = torch.tensor([0, *query_lens], dtype=torch.int64).cumsum(0).to(torch.int32)
    return MLABatch(
        q=q.to(dtype).to(device),
        kv_cache=cache.to(dtype).to(device),
        block_table=table.to(device),
        seq_lens=torch.tensor([r.seq_len for r in spec.requests], dtype=torch.int32).to(device),
        query_start_loc=starts.to(device),
        kinds=tuple(r.kind for r in spec.requests),
        kv_lora_rank=spec.kv_lora_rank,
        scale=spec.head_dim**-0.5,
        sliding_window=spec.sliding_window,
    )
