"""Batches of MLA attention work: their description, tensors and hypothesis strategies.

A :class:`CaseSpec` is plain data (request kinds, lengths, shapes, a seed); it
materialises into an :class:`MLABatch` of tensors with :func:`build_batch`.
Every spec reproduces the same tensors, so a failing case can be printed and
re-run. The visibility rules the kinds stand for are NUM-DECODE-1,
NUM-VERIFY-1, NUM-DRAFT-1, NUM-PREFILL-1, NUM-WINDOW-1 and NUM-PAD-1.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

__all__ = [
    "DTYPES",
    "MODES",
    "CaseSpec",
    "Kind",
    "MLABatch",
    "RequestSpec",
    "build_batch",
    "case_specs",
    "draw_examples",
    "mode_of",
    "production_specs",
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


# --------------------------------------------------------------------------
# Hypothesis strategies
# --------------------------------------------------------------------------

_QUERY_LEN_LIMITS: dict[Kind, tuple[int, int]] = {
    Kind.DECODE: (1, 1),
    Kind.VERIFY: (2, 6),
    Kind.DRAFT: (1, 6),
    Kind.PREFILL: (1, 24),
}


@st.composite
def _request(draw: st.DrawFn, kind: Kind, max_seq_len: int) -> RequestSpec:
    low, high = _QUERY_LEN_LIMITS[kind]
    n = draw(st.integers(low, high))
    # Mostly short contexts (cheap, and every key weighs a lot); some long
    # enough to split the key range across kernel programs.
    length = draw(
        st.one_of(st.integers(n, max(n, 40)), st.integers(n, max(n, max_seq_len)))
    )
    if kind is Kind.PREFILL and draw(st.booleans()):
        length = n  # a fresh prefill rather than an extend
    return RequestSpec(kind, n, length)


_BASE_MODES = ("decode", "verify", "draft", "prefill")


@st.composite
def case_specs(
    draw: st.DrawFn,
    modes: Iterable[str] = MODES,
    require: str | None = None,
    *,
    dtypes: Sequence[str] = ("float32",),
    block_sizes: Sequence[int] = (1, 16, 64),
    kv_lora_ranks: Sequence[int] = (32, 64),
    rope_dims: Sequence[int] = (16, 32),
    head_counts: Sequence[int] = (1, 2, 4, 16),
    max_requests: int = 4,
    max_seq_len: int = 300,
) -> CaseSpec:
    """Batches mixing the kinds of ``modes`` (NUM-DECODE-1 … NUM-PAD-1).

    Draws 1..``max_requests`` real requests of the served kinds in random
    order with uneven lengths, 0..2 trailing padding requests (if
    ``"padding"`` is served), a block size, a random page permutation and
    possibly a sliding window. ``require`` forces a mode to be present.
    """
    served = frozenset(modes)
    if require is not None and require not in served:
        raise ValueError(f"required mode {require!r} is not among {sorted(served)}")
    base_kinds = {Kind(m) for m in served if m in _BASE_MODES}
    window_modes = served & {"window-causal", "window-noncausal"}
    if require in window_modes:
        windowed = True
    elif require in _BASE_MODES or not window_modes or not base_kinds:
        windowed = bool(window_modes) and not base_kinds
    else:
        windowed = draw(st.booleans())
    forced: set[Kind] = set()
    if windowed:
        causal_kinds = base_kinds & {Kind.DECODE, Kind.VERIFY, Kind.PREFILL} or {Kind.DECODE}
        kinds: set[Kind] = set()
        if "window-causal" in served:
            kinds |= causal_kinds
            forced = set(causal_kinds) if require == "window-causal" else forced
        if "window-noncausal" in served:
            kinds.add(Kind.DRAFT)
            forced = {Kind.DRAFT} if require == "window-noncausal" else forced
    else:
        kinds = base_kinds
        forced = {Kind(require)} if require in _BASE_MODES else forced
    if not kinds:
        raise ValueError(f"no request kind can be drawn for modes {sorted(served)}")
    kind_list = sorted(kinds)
    count = draw(st.integers(1, max_requests))
    chosen = [draw(st.sampled_from(kind_list)) for _ in range(count)]
    if forced and not set(chosen) & forced:
        chosen[draw(st.integers(0, count - 1))] = draw(st.sampled_from(sorted(forced)))
    requests = [draw(_request(kind, max_seq_len)) for kind in chosen]
    padding = 0
    if "padding" in served:
        padding = draw(st.integers(1 if require == "padding" else 0, 2))
    requests += [RequestSpec(Kind.PADDING, 0, 0)] * padding
    window = draw(st.integers(1, 64)) if windowed else None
    return CaseSpec(
        requests=tuple(requests),
        num_heads=draw(st.sampled_from(list(head_counts))),
        kv_lora_rank=draw(st.sampled_from(list(kv_lora_ranks))),
        rope_dim=draw(st.sampled_from(list(rope_dims))),
        block_size=draw(st.sampled_from(list(block_sizes))),
        sliding_window=window,
        dtype=draw(st.sampled_from(list(dtypes))),
        seed=draw(st.integers(0, 2**31 - 1)),
        spare_blocks=draw(st.integers(0, 3)),
        query_scale=draw(st.sampled_from([0.5, 1.0, 2.0])),
    )


def draw_examples(strategy: st.SearchStrategy[Any], count: int, seed: int) -> list[Any]:
    """``count`` examples of ``strategy``, reproducibly from ``seed`` (the CLI's cases, NUM-DISPATCH-1)."""
    if count < 1:
        return []
    drawn: list[Any] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        drawn.append(example)

    collect()
    return drawn[:count]


def specs_for_modes(
    modes: Iterable[str], count: int, seed: int, **strategy_options: Any
) -> dict[str, list[CaseSpec]]:
    """``count`` cases per mode of ``modes``, each case containing that mode (NUM-DISPATCH-1)."""
    served = tuple(m for m in MODES if m in set(modes))
    out: dict[str, list[CaseSpec]] = {}
    for index, mode in enumerate(served):
        strategy = case_specs(served, require=mode, **strategy_options)
        out[mode] = draw_examples(strategy, count, seed * 1009 + index)
    return out



# --------------------------------------------------------------------------
# Production-shaped cases
# --------------------------------------------------------------------------

PRODUCTION_RANK, PRODUCTION_ROPE, PRODUCTION_BLOCK = 512, 64, 64


def production_specs(
    modes: Iterable[str], dtype: str, *, max_seq_len: int = 8192, seed: int = 0
) -> list[CaseSpec]:
    """Fixed cases shaped like DeepSeek MLA serving (NUM-DECODE-1 … NUM-PAD-1).

    Width 576 (``R = 512``, ``P = 64``), pages of 64 keys, one and sixteen
    query heads, contexts up to ``max_seq_len`` (8192 by default; longer
    requests are shortened to it), a draft block over 256 keys, windows that
    cut a long context, and, for a block-boundary check, a verify block at
    block size 1. Only cases whose every mode is in ``modes`` are returned.
    The reference stays memory-bounded on all of them (NUM-MEMORY-1).
    """
    if max_seq_len < 8:
        raise ValueError("max_seq_len must be at least 8")
    served = frozenset(modes)
    cap = max_seq_len

    def req(kind: Kind, n: int, length: int) -> RequestSpec:
        return RequestSpec(kind, n, max(n, min(length, cap)))

    D, V, Dr, P, PAD = Kind.DECODE, Kind.VERIFY, Kind.DRAFT, Kind.PREFILL, Kind.PADDING
    shapes: list[tuple[tuple[RequestSpec, ...], int, dict[str, Any]]] = [
        ((req(D, 1, 8192), req(D, 1, 4096), req(D, 1, 1000), req(D, 1, 37)), 16, {}),
        ((req(D, 1, 4096), req(D, 1, 300)), 1, {}),
        ((req(V, 4, 8192), req(V, 4, 513)), 16, {}),
        ((req(V, 3, 4096),), 1, {"query_scale": 2.0}),
        ((req(V, 5, 700),), 4, {"block_size": 1}),
        ((req(Dr, 4, 4096), req(Dr, 8, 256)), 16, {}),
        ((req(Dr, 8, 256),), 1, {}),
        ((req(P, 16, 4096), req(P, 24, 24)), 16, {}),
        ((req(D, 1, 8192), req(V, 4, 2048)), 16, {"sliding_window": 1024}),
        ((req(D, 1, 4096), req(V, 3, 300)), 1, {"sliding_window": 128}),
        ((req(Dr, 4, 8192),), 16, {"sliding_window": 1024}),
        ((req(Dr, 4, 300),), 1, {"sliding_window": 64}),
        ((req(D, 1, 4096), req(D, 1, 130), RequestSpec(PAD, 0, 0), RequestSpec(PAD, 0, 0)), 16, {}),
    ]
    specs = []
    for index, (requests, heads, extra) in enumerate(shapes):
        fields: dict[str, Any] = {
            "num_heads": heads,
            "kv_lora_rank": PRODUCTION_RANK,
            "rope_dim": PRODUCTION_ROPE,
            "block_size": PRODUCTION_BLOCK,
            "dtype": dtype,
            "seed": seed * 7919 + index,
            "spare_blocks": 1,
        }
        fields.update(extra)
        spec = CaseSpec(requests=requests, **fields)
        if spec.modes <= served:
            specs.append(spec)
    return specs
