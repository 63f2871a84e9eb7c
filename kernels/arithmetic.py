"""What arithmetic a backend declares, and the straightforward attention that emulates it (NUM-TOL-1).

A backend states how it computes (:class:`Arithmetic`): how the operands of
the ``q . k`` dot reach the multiplier (as stored, or rounded to TF32), in
which precision the softmax weights enter the ``P . V`` dot, what it
accumulates in, and in which dtype it returns the LSE. The tolerance model
(:mod:`kvcontract.kernels.tolerance`) follows the declaration in two ways:

* an a-priori bound (forward error analysis, NUM-TOL-1) from the unit
  roundoffs the declaration implies (:meth:`Arithmetic.roundoffs`);
* an empirical bound: :func:`straightforward_attention` computes the batch
  the plainest way in the declared arithmetic (one float32 matmul for the
  scores, a max-shifted softmax, the weights rounded as declared, one matmul
  with the values, the output stored in the storage dtype); a kernel may be
  at most a small factor further from the float64 truth than that
  computation is, on the same case (the rule FlashAttention's tests use).

Declaring less precision than a kernel has only loosens its check; declaring
more makes an honest kernel fail. NUM-ACCUM-1 has no declaration that
permits 16-bit accumulation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .cases import MLABatch
from .dense import visibility_mask

__all__ = [
    "ARITHMETICS",
    "Arithmetic",
    "NaiveResult",
    "Roundoffs",
    "arithmetic_of",
    "get_arithmetic",
    "round_to_tf32",
    "straightforward_attention",
    "unit_roundoff",
]

U32 = 2.0**-24

OPERANDS = ("storage", "tf32")
WEIGHTS = ("float32", "storage", "tf32")
LSE_DTYPES = ("float32", "storage")


def unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff of ``dtype``: half its machine epsilon (``2^-24`` for float32)."""
    return float(torch.finfo(dtype).eps) / 2


def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to TF32 (10 explicit mantissa bits), nearest-even, as float32; NaN/Inf kept."""
    source = x.float().contiguous()
    bits = source.view(torch.int32)
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(source), rounded, source)


@dataclasses.dataclass(frozen=True)
class Roundoffs:
    """Unit roundoffs of one (arithmetic, storage dtype) pair (NUM-TOL-1).

    ``score_operand``: ``q`` and ``k`` on their way into the dot;
    ``weight``: the softmax weights on their way into ``P . V``;
    ``accumulator``: sums and products; ``output``: the stored output;
    ``lse``: the stored LSE.
    """

    score_operand: float
    weight: float
    accumulator: float
    output: float
    lse: float


@dataclasses.dataclass(frozen=True)
class Arithmetic:
    """A backend's declared arithmetic (NUM-TOL-1, NUM-ACCUM-1).

    ``operands``: ``"storage"`` (16-bit products are exact in float32; float32
    products are IEEE) or ``"tf32"`` (float32 operands rounded to TF32 first,
    as tensor cores do by default). ``weights``: ``"float32"``, ``"storage"``
    (``p.to(v.dtype)`` before the ``P . V`` dot) or ``"tf32"``.
    ``accumulator``: ``torch.float32`` or ``torch.float64``. ``lse``:
    ``"float32"`` or ``"storage"`` (vLLM's ``TritonMLAImpl`` allocates its LSE
    in the query dtype).
    """

    name: str
    description: str
    operands: str = "storage"
    weights: str = "float32"
    accumulator: torch.dtype = torch.float32
    lse: str = "float32"

    def __post_init__(self) -> None:
        if self.operands not in OPERANDS:
            raise ValueError(f"operands must be one of {OPERANDS}, got {self.operands!r}")
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {WEIGHTS}, got {self.weights!r}")
        if self.accumulator not in (torch.float32, torch.float64):
            raise ValueError(
                "accumulator must be torch.float32 or torch.float64 (NUM-ACCUM-1 forbids less), "
                f"got {self.accumulator}"
            )
        if self.lse not in LSE_DTYPES:
            raise ValueError(f"lse must be one of {LSE_DTYPES}, got {self.lse!r}")

    def with_lse(self, lse: str) -> Arithmetic:
        """The same arithmetic returning its LSE in ``lse`` (``"float32"`` or ``"storage"``)."""
        suffix = "" if lse == "float32" else ", LSE stored in the storage dtype"
        return dataclasses.replace(
            self, name=f"{self.name}" + ("" if lse == "float32" else "+lse-storage"),
            description=self.description + suffix, lse=lse,
        )

    def roundoffs(self, storage: torch.dtype) -> Roundoffs:
        """Unit roundoffs this arithmetic implies for ``storage`` (NUM-TOL-1)."""
        u_storage = unit_roundoff(storage)
        u_acc = unit_roundoff(self.accumulator)
        tf32 = 2.0**-11
        operand = tf32 if self.operands == "tf32" and storage == torch.float32 else 0.0
        weight = {
            "float32": 0.0,
            "storage": u_storage if storage != torch.float32 else 0.0,
            "tf32": tf32,
        }[self.weights]
        if self.weights == "tf32" and storage != torch.float32:
            weight = u_storage  # 16-bit storage: the weights go in as the storage dtype
        lse = U32 if self.lse == "float32" else max(u_storage, U32)
        return Roundoffs(operand, weight, u_acc, u_storage, lse)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return {
            "name": self.name,
            "description": self.description,
            "operands": self.operands,
            "weights": self.weights,
            "accumulator": str(self.accumulator).removeprefix("torch."),
            "lse": self.lse,
        }


ARITHMETICS: dict[str, Arithmetic] = {
    "float64": Arithmetic(
        "float64", "float64 throughout (a reference)", accumulator=torch.float64
    ),
    "float32": Arithmetic(
        "float32", "IEEE float32: operands as stored, float32 products and sums, float32 weights"
    ),
    "mixed": Arithmetic(
        "mixed",
        "storage-dtype products with float32 accumulation; weights rounded to the storage "
        "dtype before P.V (tl.dot(p.to(v.dtype), v))",
        weights="storage",
    ),
    "tf32": Arithmetic(
        "tf32",
        "tensor cores: float32 operands rounded to TF32 for both dots, float32 accumulation; "
        "16-bit storage as 'mixed'",
        operands="tf32",
        weights="tf32",
    ),
}


def get_arithmetic(name: str) -> Arithmetic:
    """The predefined arithmetic ``name`` (``float64``, ``float32``, ``mixed``, ``tf32``; ``+lse-storage``)."""
    base, _, lse = name.partition("+")
    if base not in ARITHMETICS or lse not in ("", "lse-storage"):
        raise ValueError(
            f"unknown arithmetic {name!r}; known: {', '.join(ARITHMETICS)} "
            "(each optionally with '+lse-storage')"
        )
    found = ARITHMETICS[base]
    return found.with_lse("storage") if lse else found


def arithmetic_of(backend: object) -> Arithmetic:
    """A backend's declared arithmetic: its ``arithmetic`` attribute (name or object), else IEEE float32."""
    declared = getattr(backend, "arithmetic", None)
    if declared is None:
        return ARITHMETICS["float32"]
    if isinstance(declared, Arithmetic):
        return declared
    if isinstance(declared, str):
        return get_arithmetic(declared)
    raise TypeError(f"backend arithmetic must be an Arithmetic or a name, got {declared!r}")


@dataclasses.dataclass(frozen=True)
class NaiveResult:
    """:func:`straightforward_attention`'s output ``[T, H, R]`` before and after storage rounding, and LSE."""

    out_unrounded: torch.Tensor  # float32
    out: torch.Tensor  # storage dtype
    lse_unrounded: torch.Tensor  # float32
    lse: torch.Tensor  # float32 values of the stored LSE
    weighted_abs: torch.Tensor  # float32 [T, H, R]: sum_j p_j |v_jc|


def _operand(x: torch.Tensor, arithmetic: Arithmetic) -> torch.Tensor:
    if arithmetic.operands == "tf32" and x.dtype == torch.float32:
        return round_to_tf32(x)
    return x.to(torch.float32)


def _weights(p: torch.Tensor, storage: torch.dtype, arithmetic: Arithmetic) -> torch.Tensor:
    if storage != torch.float32 and arithmetic.weights in ("storage", "tf32"):
        return p.to(storage).to(torch.float32)
    if storage == torch.float32 and arithmetic.weights == "tf32":
        return round_to_tf32(p)
    return p


def straightforward_attention(
    batch: MLABatch, arithmetic: Arithmetic, *, query_chunk: int = 16
) -> NaiveResult:
    """The plainest computation of ``batch`` in ``arithmetic`` (NUM-TOL-1's empirical bound).

    Per request and per tile of ``query_chunk`` rows: scores by one float32
    matmul of the (declared) operands, a max-shifted softmax normalised in
    float32, weights rounded as declared, one float32 matmul with the values,
    the output stored in the storage dtype, the LSE in the declared LSE
    dtype. Its memory is bounded by ``query_chunk * heads * keys`` scores per
    tile (NUM-MEMORY-1 holds per request, not per context chunk).
    """
    if query_chunk < 1:
        raise ValueError("query_chunk must be positive")
    storage, rank = batch.dtype, batch.kv_lora_rank
    device = batch.device
    out32 = torch.zeros(batch.num_tokens, batch.num_heads, rank, dtype=torch.float32, device=device)
    lse32 = torch.zeros(batch.num_tokens, batch.num_heads, dtype=torch.float32, device=device)
    abs32 = torch.zeros_like(out32)
    flat = batch.kv_cache.reshape(-1, batch.head_dim)
    for r in range(batch.num_requests):
        rows = batch.rows(r)
        if len(rows) == 0:
            continue
        length = batch.seq_len(r)
        positions = torch.arange(length, device=device)
        pages = batch.block_table[r].to(torch.int64)
        slots = pages[positions // batch.block_size] * batch.block_size + positions % batch.block_size
        keys = flat.index_select(0, slots)
        k_op = _operand(keys, arithmetic)
        values = _operand(keys[:, :rank], arithmetic) if arithmetic.weights == "tf32" else keys[
            :, :rank
        ].to(torch.float32)
        mask = visibility_mask(batch.kinds[r].causal, len(rows), length, batch.sliding_window).to(
            device
        )
        for t0 in range(0, len(rows), query_chunk):
            t1 = min(t0 + query_chunk, len(rows))
            q = _operand(batch.q[rows.start + t0 : rows.start + t1], arithmetic)
            scores = torch.einsum("nhd,ld->nhl", q, k_op) * batch.scale
            scores.masked_fill_(~mask[t0:t1, None, :], float("-inf"))
            peak = scores.amax(dim=-1, keepdim=True)
            p = torch.exp(scores - peak)
            total = p.sum(dim=-1, keepdim=True)
            p = _weights(p / total, storage, arithmetic)
            span = slice(rows.start + t0, rows.start + t1)
            out32[span] = torch.einsum("nhl,lr->nhr", p, values)
            abs32[span] = torch.einsum("nhl,lr->nhr", p, values.abs())
            lse32[span] = peak[..., 0] + torch.log(total[..., 0])
    lse_store = storage if arithmetic.lse == "storage" else torch.float32
    return NaiveResult(
        out32, out32.to(storage), lse32, lse32.to(lse_store).to(torch.float32), abs32
    )
