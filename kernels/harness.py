"""Compare any backend with the ground truth, per mode and per row (NUM-TOL-1, NUM-DISPATCH-1).

For each batch the harness poisons the output with NaN (NUM-POISON-1), lets
the backend fill it, computes the float64 reference with its error scales,
and checks every query row against the tolerance model (NUM-TOL-1,
NUM-FINITE-1). A batch with trailing padding is run a second time without
the padding and the two runs must agree (NUM-PAD-1). When a multi-row
request fails, the harness recomputes it with the other causality; if that
matches, the message names the misrouting (NUM-DISPATCH-1). The verdicts and
their table and JSON are :mod:`kvcontract.kernels.report`; the cases a default run
checks, :mod:`kvcontract.kernels.generation`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch

from .arithmetic import Arithmetic, arithmetic_of
from .cases import DTYPES, MODES, CaseSpec, Kind, MLABatch, build_batch
from .generation import default_case_specs
from .mla import MLAResult, mla_reference
from .protocol import Backend
from .report import CaseResult, ModeSummary, RequestRecord, SuiteReport
from .tolerance import RowErrors, compare_rows, tolerance

__all__ = [
    "check_backend",
    "check_batch",
    "judge_outputs",
    "poisoned_outputs",
    "run_suite",
]

MAX_MESSAGES = 5


def poisoned_outputs(batch: MLABatch) -> tuple[torch.Tensor, torch.Tensor]:
    """NaN-filled ``out [T, H, R]`` (storage dtype) and ``lse [T, H]`` (float32) (NUM-POISON-1)."""
    out = torch.full(
        (batch.num_tokens, batch.num_heads, batch.kv_lora_rank),
        float("nan"),
        dtype=batch.dtype,
        device=batch.device,
    )
    lse = torch.full(
        (batch.num_tokens, batch.num_heads), float("nan"), dtype=torch.float32, device=batch.device
    )
    return out, lse


def _run_backend(backend: Backend, batch: MLABatch) -> tuple[torch.Tensor, torch.Tensor]:
    out, lse = poisoned_outputs(batch)
    backend.run(batch, out, lse)
    return out, lse


def _describe(batch: MLABatch, r: int) -> str:
    window = f", window {batch.sliding_window}" if batch.sliding_window is not None else ""
    heads = "1 head" if batch.num_heads == 1 else f"{batch.num_heads} heads"
    return (
        f"request {r} ({batch.kinds[r].value}, {len(batch.rows(r))} rows, "
        f"{batch.seq_len(r)} keys{window}, {heads}, {str(batch.dtype).removeprefix('torch.')})"
    )


def _row_message(
    errors: RowErrors, rows: range, out_tol: torch.Tensor, lse_tol: torch.Tensor, what: str
) -> str:
    local = slice(rows.start, rows.stop)
    finite = errors.finite[local]
    if not bool(finite.all()):
        t = int((~finite).nonzero()[0])
        return (
            f"{what}: row {t} is non-finite (NaN/Inf); outputs are NaN-poisoned before the run, "
            "so an unwritten row shows as NaN"
        )
    ratios = errors.ratio[local]
    t = int(ratios.argmax())
    h = int(errors.worst_head[rows.start + t])
    row = rows.start + t
    return (
        f"{what}: row {t} head {h} off by {float(errors.abs_error[row]):.3g} "
        f"(LSE by {float(errors.lse_error[row]):.3g}), {float(ratios[t]):.3g}x its tolerance "
        f"(output {float(out_tol[row, h].max()):.3g}, LSE {float(lse_tol[row, h]):.3g})"
    )


def _misrouting_note(
    backend_out: tuple[torch.Tensor, torch.Tensor],
    batch: MLABatch,
    r: int,
    arithmetic: Arithmetic,
) -> str:
    """Name the misrouting when the failing request matches the other causality."""
    rows = batch.rows(r)
    if len(rows) < 2:
        return ""
    override = [k.causal for k in batch.kinds]
    override[r] = not override[r]
    flipped = mla_reference(batch, with_scales=True, causal_override=override)
    flipped_batch = dataclasses.replace(
        batch, kinds=tuple(_flip(k) if i == r else k for i, k in enumerate(batch.kinds))
    )
    out_tol, lse_tol = tolerance(flipped_batch, flipped, arithmetic)
    errors = compare_rows(backend_out[0], backend_out[1], flipped, out_tol, lse_tol)
    if not bool(errors.passed[rows.start : rows.stop].all()):
        return ""
    if batch.kinds[r].causal:
        return (
            "; its rows match the NON-CAUSAL visibility (every row sees what the block's last row "
            "sees): a causal block was dispatched to the non-causal path (misrouted)"
        )
    return (
        "; its rows match the CAUSAL visibility (row t sees only keys up to its own position "
        "L - n + t): a non-causal block was dispatched to the causal path (misrouted)"
    )


def _flip(kind: Kind) -> Kind:
    """A kind of the other causality with the same rows (for the misrouting note)."""
    return Kind.VERIFY if not kind.causal else Kind.DRAFT


def check_batch(
    backend: Backend, batch: MLABatch, *, case_index: int = 0, spec: CaseSpec | None = None
) -> CaseResult:
    """Run ``backend`` on ``batch`` and judge every request (NUM-TOL-1 … NUM-PAD-1).

    The allowance follows the backend's declared arithmetic (``arithmetic``
    attribute, default IEEE float32; NUM-TOL-1).
    """
    arithmetic = arithmetic_of(backend)
    reference = mla_reference(batch, with_scales=True)
    out_tol, lse_tol = tolerance(batch, reference, arithmetic)
    try:
        produced = _run_backend(backend, batch)
    except Exception as exc:  # noqa: BLE001 - a crashing backend fails every mode of the case
        crash = f"backend {backend.name} raised {type(exc).__name__}: {exc}"
        failed = [_failed_record(batch, r, case_index, crash) for r in range(batch.num_requests)]
        return CaseResult(case_index, spec, tuple(failed))
    records = judge_outputs(batch, produced, reference, out_tol, lse_tol, case_index, arithmetic)
    if batch.has_padding():
        records.append(_padding_record(backend, batch, case_index, produced, out_tol, lse_tol))
    return CaseResult(case_index, spec, tuple(records))


def judge_outputs(
    batch: MLABatch,
    produced: tuple[torch.Tensor, torch.Tensor],
    reference: MLAResult,
    out_tol: torch.Tensor,
    lse_tol: torch.Tensor,
    case_index: int = 0,
    arithmetic: Arithmetic | None = None,
) -> list[RequestRecord]:
    """One record per real request of ``batch`` for outputs ``produced`` (NUM-TOL-1, NUM-FINITE-1).

    With ``arithmetic``, a failing multi-row request is also checked against
    the other causality, and the message names a misrouting (NUM-DISPATCH-1).
    """
    errors = compare_rows(produced[0], produced[1], reference, out_tol, lse_tol)
    records = []
    for r, kind in enumerate(batch.kinds):
        if kind is Kind.PADDING:
            continue
        rows = batch.rows(r)
        passed = bool(errors.passed[rows.start : rows.stop].all())
        message: str | None = None
        if not passed:
            message = _row_message(errors, rows, out_tol, lse_tol, _describe(batch, r))
            if arithmetic is not None:
                message += _misrouting_note(produced, batch, r, arithmetic)
        records.append(_record(batch, r, case_index, errors, rows, passed, message))
    return records


def _record(
    batch: MLABatch,
    r: int,
    case_index: int,
    errors: RowErrors,
    rows: range,
    passed: bool,
    message: str | None,
    mode: str | None = None,
) -> RequestRecord:
    local = slice(rows.start, rows.stop)

    def worst(values: torch.Tensor) -> float:
        return float(values[local].max()) if len(rows) else 0.0

    return RequestRecord(
        case=case_index,
        request=r,
        mode=mode or batch.mode(r),
        kind=batch.kinds[r].value,
        query_len=len(rows) if mode is None else 0,
        seq_len=batch.seq_len(r),
        rows=len(rows),
        max_abs_error=worst(errors.abs_error),
        max_rel_error=worst(errors.rel_error),
        max_lse_error=worst(errors.lse_error),
        worst_ratio=worst(errors.ratio),
        passed=passed,
        message=message,
    )


def _failed_record(batch: MLABatch, r: int, case_index: int, message: str) -> RequestRecord:
    inf = float("inf")
    rows = len(batch.rows(r))
    return RequestRecord(
        case_index, r, batch.mode(r), batch.kinds[r].value, rows,
        batch.seq_len(r), rows, inf, inf, inf, inf, False, message,
    )


def _padding_record(
    backend: Backend,
    batch: MLABatch,
    case_index: int,
    padded: tuple[torch.Tensor, torch.Tensor],
    out_tol: torch.Tensor,
    lse_tol: torch.Tensor,
) -> RequestRecord:
    """NUM-PAD-1: the rows with padding agree with the rows without it."""
    first_padding = batch.kinds.index(Kind.PADDING)
    try:
        unpadded = _run_backend(backend, batch.without_padding())
    except Exception as exc:  # noqa: BLE001 - a crash without the padding fails NUM-PAD-1
        failure = f"backend {backend.name} raised {type(exc).__name__} without the padding: {exc}"
        return _failed_record(batch, first_padding, case_index, failure)
    baseline = MLAResult(unpadded[0].to(torch.float64), unpadded[1].to(torch.float64))
    errors = compare_rows(padded[0], padded[1], baseline, out_tol, lse_tol)
    rows = range(0, batch.num_tokens)
    passed = bool(errors.passed.all())
    message: str | None = None
    if not passed:
        padding = batch.num_requests - first_padding
        message = _row_message(
            errors, rows, out_tol, lse_tol,
            f"{padding} trailing padding request(s) changed the batch's rows",
        )
    return _record(batch, first_padding, case_index, errors, rows, passed, message, mode="padding")


def _summarise(mode: str, records: list[RequestRecord]) -> ModeSummary:
    failures = [r for r in records if not r.passed]
    status = "no cases" if not records else ("FAIL" if failures else "pass")
    return ModeSummary(
        mode=mode,
        status=status,
        cases=len({r.case for r in records}),
        rows=sum(r.rows for r in records),
        max_abs_error=max((r.max_abs_error for r in records), default=0.0),
        max_rel_error=max((r.max_rel_error for r in records), default=0.0),
        max_lse_error=max((r.max_lse_error for r in records), default=0.0),
        worst_ratio=max((r.worst_ratio for r in records), default=0.0),
        failures=len(failures),
        messages=tuple(
            f"case {r.case}: {r.message}" for r in failures[:MAX_MESSAGES] if r.message
        ),
    )


def run_suite(
    backend: Backend,
    specs: Iterable[CaseSpec],
    *,
    device: torch.device | str = "cpu",
    dtype: str = "",
    seed: int = 0,
) -> SuiteReport:
    """Check ``backend`` on every spec and summarise per mode (NUM-DISPATCH-1)."""
    specs = list(specs)
    reason = None
    for wanted in sorted({dtype, *(spec.dtype for spec in specs)} - {""}):
        reason = reason or backend.unavailable_reason(wanted)
    cases: list[CaseResult] = []
    if reason is None:
        for index, spec in enumerate(specs):
            batch = build_batch(spec, device)
            cases.append(check_batch(backend, batch, case_index=index, spec=spec))
    by_mode: dict[str, list[RequestRecord]] = {m: [] for m in MODES}
    for case in cases:
        for record in case.records:
            by_mode[record.mode].append(record)
    summaries = []
    for mode in MODES:
        if mode not in backend.modes:
            summaries.append(ModeSummary(mode, "not served", 0, 0, 0.0, 0.0, 0.0, 0.0, 0, ()))
        else:
            summaries.append(_summarise(mode, by_mode[mode]))
    error = f"backend {backend.name} unavailable: {reason}" if reason else None
    return SuiteReport(
        backend.name, backend.description, dtype, str(device), seed, tuple(summaries), tuple(cases), error
    )


def check_backend(
    backend: Backend,
    *,
    cases_per_mode: int = 6,
    seed: int = 0,
    dtype: str = "bfloat16",
    device: torch.device | str = "cpu",
    max_seq_len: int = 8192,
    head_counts: tuple[int, ...] = (1, 2, 4, 16, 128),
    production: bool = True,
) -> SuiteReport:
    """Run the default cases (:func:`default_case_specs`) of ``backend`` (NUM-DISPATCH-1)."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    specs: list[CaseSpec] = []
    if backend.unavailable_reason(dtype) is None:
        specs = default_case_specs(
            backend.modes,
            dtype,
            cases_per_mode=cases_per_mode,
            seed=seed,
            max_seq_len=max_seq_len,
            head_counts=head_counts,
            production=production,
        )
    return run_suite(backend, specs, device=device, dtype=dtype, seed=seed)
