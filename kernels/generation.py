"""The cases a ``kvcontract kernels`` run checks (NUM-DISPATCH-1).

Two sources, both reproducible from a seed: hypothesis-drawn small batches mixing
the kinds of the served modes (:func:`case_specs`, :func:`specs_for_modes`), and
fixed production-shaped batches (:func:`production_specs`: DeepSeek-like width 576,
long contexts, windows, padding). :func:`default_case_specs` is a default run's mix.
The cases themselves are :mod:`kvcontract.kernels.cases`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .cases import DTYPES, MODES, CaseSpec, Kind, RequestSpec

__all__ = [
    "HYPOTHESIS_MAX_SEQ_LEN",
    "case_specs",
    "default_case_specs",
    "draw_examples",
    "production_specs",
    "specs_for_modes",
]

HYPOTHESIS_MAX_SEQ_LEN = 300
"""The longest context of a drawn case in a default run."""


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
DRAWN_MAX_HEADS = 16
"""Drawn cases stay small (a kernel run through Triton's interpreter pays per head); larger head
counts come as production cases."""


def production_specs(
    modes: Iterable[str], dtype: str, *, max_seq_len: int = 8192, seed: int = 0
) -> list[CaseSpec]:
    """Fixed cases shaped like DeepSeek MLA serving (NUM-DECODE-1 … NUM-PAD-1).

    Width 576 (``R = 512``, ``P = 64``), pages of 64 keys, one, sixteen and 128
    query heads (DeepSeek-style MLA has 128), logits large enough that ``exp``
    overflows without the row maximum, contexts up to ``max_seq_len`` (8192 by default; longer
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
        # DeepSeek-style MLA: 128 query heads, decode alone (for decode-only backends) and in every mode
        ((req(D, 1, 2048), req(D, 1, 300)), 128, {}),
        ((req(D, 1, 2048), req(V, 4, 512), req(Dr, 4, 256), req(P, 16, 300), RequestSpec(PAD, 0, 0)), 128, {}),
        ((req(D, 1, 1024), req(V, 3, 300), req(Dr, 4, 300)), 128, {"sliding_window": 128}),
        # logits past exp's range (|q.k| * scale near 100): the row maximum must be subtracted
        ((req(D, 1, 2048), req(V, 3, 512)), 16, {"query_scale": 48.0}),
        ((req(D, 1, 1024), req(V, 4, 512), req(Dr, 4, 256), req(P, 16, 300)), 16, {"query_scale": 48.0}),
        ((req(D, 1, 1024), req(V, 3, 300), req(Dr, 4, 300)), 16, {"sliding_window": 128, "query_scale": 48.0}),
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


def default_case_specs(
    modes: Iterable[str],
    dtype: str,
    *,
    cases_per_mode: int = 6,
    seed: int = 0,
    max_seq_len: int = 8192,
    head_counts: tuple[int, ...] = (1, 2, 4, 16, 128),
    production: bool = True,
) -> list[CaseSpec]:
    """The cases of a ``kvcontract kernels`` run (NUM-DISPATCH-1).

    ``cases_per_mode`` hypothesis-drawn small cases per served mode (contexts
    up to ``min(max_seq_len, 300)``, widths 48 to 96, heads from
    ``head_counts`` up to :data:`DRAWN_MAX_HEADS`), then, with ``production``, the production-shaped cases of
    :func:`production_specs` whose head count is in ``head_counts`` (width
    576, contexts up to ``max_seq_len``).
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    served = frozenset(modes)
    drawn = specs_for_modes(
        served,
        cases_per_mode,
        seed,
        dtypes=(dtype,),
        max_seq_len=min(max_seq_len, HYPOTHESIS_MAX_SEQ_LEN),
        head_counts=tuple(h for h in head_counts if h <= DRAWN_MAX_HEADS) or head_counts,
    )
    specs = [spec for mode in MODES for spec in drawn.get(mode, [])]
    if production:
        specs += [
            spec
            for spec in production_specs(served, dtype, max_seq_len=max_seq_len, seed=seed)
            if spec.num_heads in head_counts
        ]
    return specs
