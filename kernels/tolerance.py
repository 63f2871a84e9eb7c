"""How far an engine's output may be from the ground truth, per dtype (NUM-TOL-1).

The reference is evaluated on the very tensors the engine read, upcast
exactly to float64, so rounding the inputs is not an error source. What is
left is the engine's own arithmetic, which a forward error analysis bounds
row by row:

* scores ``s_j = scale * q . k_j``: the dot consumes operands rounded to
  ``score_operand_roundoff`` ``u_op`` (TF32 for float32 storage on tensor
  cores, exact for 16-bit storage) and accumulates ``D`` products in float32,
  so ``|ds_j| <= e_s = S * (2 u_op + u_op^2 + (D + 8) u32)`` where ``S`` is
  ``scale * max_j sum_i |q_i||k_ji|`` (:class:`RowScales`).
* a perturbation of every score by at most ``e_s`` moves each softmax weight
  by a factor within ``exp(+-2 e_s)``, so the output moves by at most
  ``expm1(2 e_s) * V`` with ``V`` the largest visible value magnitude, and
  the LSE by at most ``e_s``.
* the weights reach the ``P . V`` product rounded to ``weight_roundoff``
  ``u_p`` and are summed in float32 over ``n`` keys and rescales:
  ``(u_p + (2 n + 16) u32) * V``.
* the output is stored in the storage dtype: ``u_out * |o|``; the LSE in
  float32: ``u32 * |lse|`` plus ``(n + 16) u32`` for the sum it is the log of.

The bound is multiplied by :data:`SAFETY_FACTOR` for operations the analysis
leaves out (approximate ``exp2``/``log2`` on GPUs, division). NaN or Inf
never passes (NUM-FINITE-1).
"""

from __future__ import annotations

import dataclasses

import torch

from .arithmetic import Arithmetic, get_arithmetic, straightforward_attention
from .cases import MLABatch
from .mla import MLAResult

__all__ = [
    "ACCUMULATOR_ROUNDOFF",
    "SAFETY_FACTOR",
    "TOLERANCES",
    "DtypeTolerance",
    "EMPIRICAL_FACTOR",
    "RowErrors",
    "allowed_error",
    "compare_rows",
    "empirical_error",
    "tolerance",
]

ACCUMULATOR_ROUNDOFF = 2.0**-24  # float32 unit roundoff: every engine accumulates in float32
SAFETY_FACTOR = 2.0
# How much further from the float64 truth than the straightforward computation in
# the same declared arithmetic a kernel may be (FlashAttention's tests use 2).
EMPIRICAL_FACTOR = 2.0


@dataclasses.dataclass(frozen=True)
class DtypeTolerance:
    """Unit roundoffs of one storage dtype's attention arithmetic (NUM-TOL-1)."""

    dtype: str
    output_roundoff: float
    score_operand_roundoff: float
    weight_roundoff: float


TOLERANCES: dict[torch.dtype, DtypeTolerance] = {
    # Tensor-core dots round float32 operands to TF32 (10 explicit mantissa bits).
    torch.float32: DtypeTolerance("float32", 2.0**-24, 2.0**-11, 2.0**-11),
    # 16-bit operands multiply exactly into float32; the weights are rounded to
    # the storage dtype before the P.V dot, and the output is stored in it.
    torch.bfloat16: DtypeTolerance("bfloat16", 2.0**-8, 0.0, 2.0**-8),
    torch.float16: DtypeTolerance("float16", 2.0**-11, 0.0, 2.0**-11),
}


def allowed_error(
    dtype: torch.dtype,
    reference: MLAResult,
    head_dim: int,
    arithmetic: Arithmetic | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A-priori per-element output bound ``[T, H, R]`` and per-row LSE bound ``[T, H]`` (NUM-TOL-1).

    ``reference`` must carry :class:`RowScales` (``mla_reference(...,
    with_scales=True)``). ``arithmetic`` is the backend's declaration (an
    :class:`Arithmetic` or its name); None means ``"tf32"``, the loosest
    float32 declaration, whose unit roundoffs are :data:`TOLERANCES`.
    """
    if dtype not in TOLERANCES:
        raise ValueError(f"no tolerance model for {dtype}; known: {sorted(map(str, TOLERANCES))}")
    if reference.scales is None:
        raise ValueError("the reference must be computed with_scales=True")
    declared = _resolve(arithmetic, "tf32")
    model = declared.roundoffs(dtype)
    u_acc = model.accumulator
    scales = reference.scales
    out_ref = reference.out.to(torch.float64)
    lse_ref = reference.lse.to(torch.float64)
    u_op = model.score_operand
    keys = scales.visible_keys.to(torch.float64)[:, None]  # [T, 1]
    score_error = scales.score_magnitude.to(torch.float64) * (
        2 * u_op + u_op**2 + (head_dim + 8) * u_acc
    )  # [T, H]
    value = scales.value_magnitude.to(torch.float64)[:, None]  # [T, 1]
    weight_error = model.weight + (2 * keys + 16) * u_acc
    row_bound = (torch.expm1(2 * score_error) + weight_error) * value  # [T, H]
    tiny = torch.finfo(dtype).tiny
    out_tol = SAFETY_FACTOR * (
        row_bound[..., None] + model.output * out_ref.abs()
    ) + tiny
    lse_tol = SAFETY_FACTOR * (
        score_error + (keys + 16) * u_acc + model.lse * lse_ref.abs()
    ) + torch.finfo(torch.float32).tiny
    return out_tol, lse_tol


def _resolve(arithmetic: Arithmetic | str | None, default: str) -> Arithmetic:
    if arithmetic is None:
        return get_arithmetic(default)
    if isinstance(arithmetic, str):
        return get_arithmetic(arithmetic)
    return arithmetic


def empirical_error(
    batch: MLABatch, reference: MLAResult, arithmetic: Arithmetic | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output bound ``[T, H, R]`` and LSE bound ``[T, H]`` relative to a straightforward implementation (NUM-TOL-1).

    With ``e[t, h]`` the largest error over channels of
    :func:`straightforward_attention` (before it rounds its output) against
    the float64 ``reference``, the bound is
    ``F (1 + u_out) e + u_out |o_ref| + u_p sum_j p_j |v_jc| + 16 u_acc V``
    for the output (the weight rounding the declaration allows is charged at
    its exact worst case per channel, as few keys make its random part a poor
    estimate) and
    ``F e_lse + u_lse |lse_ref| + 16 u_acc (1 + |lse_ref|)`` for the LSE,
    ``F`` = :data:`EMPIRICAL_FACTOR`. It tracks the output's own scale.
    ``reference`` must carry :class:`RowScales`.
    """
    if reference.scales is None:
        raise ValueError("the reference must be computed with_scales=True")
    declared = _resolve(arithmetic, "float32")
    model = declared.roundoffs(batch.dtype)
    naive = straightforward_attention(batch, declared)
    out_ref = reference.out.to(torch.float64).cpu()
    lse_ref = reference.lse.to(torch.float64).cpu()
    naive_error = (naive.out_unrounded.to(torch.float64).cpu() - out_ref).abs().amax(dim=-1)
    lse_error = (naive.lse_unrounded.to(torch.float64).cpu() - lse_ref).abs()
    value = reference.scales.value_magnitude.to(torch.float64).cpu()[:, None, None]
    weight_rounding = model.weight * naive.weighted_abs.to(torch.float64).cpu()
    floor = 16 * model.accumulator * value + torch.finfo(batch.dtype).tiny
    out_tol = (
        EMPIRICAL_FACTOR * (1 + model.output) * naive_error[..., None]
        + model.output * out_ref.abs()
        + weight_rounding
        + floor
    )
    lse_tol = (
        EMPIRICAL_FACTOR * lse_error
        + model.lse * lse_ref.abs()
        + 16 * model.accumulator * (1 + lse_ref.abs())
    )
    return out_tol, lse_tol


def tolerance(
    batch: MLABatch, reference: MLAResult, arithmetic: Arithmetic | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The allowance the harness applies (NUM-TOL-1): the smaller of the a-priori and the empirical bound.

    ``arithmetic`` defaults to IEEE ``"float32"``. A kernel computing as declared
    stays within the a-priori bound by analysis and within the empirical one
    because it makes errors of the same kind as the straightforward
    computation; a defect has to hide under both.
    """
    declared = _resolve(arithmetic, "float32")
    a_out, a_lse = allowed_error(batch.dtype, reference, batch.head_dim, declared)
    e_out, e_lse = empirical_error(batch, reference, declared)
    return torch.minimum(a_out.cpu(), e_out), torch.minimum(a_lse.cpu(), e_lse)


@dataclasses.dataclass(frozen=True)
class RowErrors:
    """Errors of each query row, worst over heads and channels (NUM-TOL-1, NUM-FINITE-1).

    ``ratio`` is the largest error divided by its allowance (output and LSE);
    a row passes when it is finite and ``ratio <= 1``. ``worst_head`` is the
    head holding that ratio.
    """

    abs_error: torch.Tensor
    rel_error: torch.Tensor
    lse_error: torch.Tensor
    ratio: torch.Tensor
    finite: torch.Tensor
    worst_head: torch.Tensor

    @property
    def passed(self) -> torch.Tensor:
        """Boolean ``[T]``: finite and within tolerance."""
        return self.finite & (self.ratio <= 1.0)


def compare_rows(
    out: torch.Tensor,
    lse: torch.Tensor,
    reference: MLAResult,
    out_tol: torch.Tensor,
    lse_tol: torch.Tensor,
) -> RowErrors:
    """Compare an engine's ``out``/``lse`` with ``reference`` row by row (NUM-TOL-1)."""
    if out.shape != reference.out.shape or lse.shape != reference.lse.shape:
        raise ValueError(
            f"shape mismatch: out {tuple(out.shape)} vs {tuple(reference.out.shape)}, "
            f"lse {tuple(lse.shape)} vs {tuple(reference.lse.shape)}"
        )
    got = out.detach().to(torch.float64).cpu()
    got_lse = lse.detach().to(torch.float64).cpu()
    ref, ref_lse = reference.out.to(torch.float64).cpu(), reference.lse.to(torch.float64).cpu()
    finite = torch.isfinite(got).all(dim=-1).all(dim=-1) & torch.isfinite(got_lse).all(dim=-1)
    diff = (got - ref).abs().nan_to_num(nan=float("inf"))
    lse_diff = (got_lse - ref_lse).abs().nan_to_num(nan=float("inf"))
    per_head_ratio = torch.maximum(
        (diff / out_tol.cpu()).amax(dim=-1), lse_diff / lse_tol.cpu()
    )  # [T, H]
    head_abs = diff.amax(dim=-1)
    head_rel = head_abs / ref.abs().amax(dim=-1).clamp(min=torch.finfo(torch.float64).tiny)
    if got.shape[0] == 0:
        empty = torch.zeros(0, dtype=torch.float64)
        return RowErrors(empty, empty, empty, empty, torch.zeros(0, dtype=torch.bool), empty.long())
    ratio, worst_head = per_head_ratio.max(dim=-1)
    return RowErrors(
        abs_error=head_abs.amax(dim=-1),
        rel_error=head_rel.amax(dim=-1),
        lse_error=lse_diff.amax(dim=-1),
        ratio=ratio,
        finite=finite,
        worst_head=worst_head,
    )
