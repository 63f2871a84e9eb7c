"""Assert one kernel call against the ground truth from any test suite (NUM-TOL-1, NUM-DISPATCH-1).

In an engine's own tests::

    from kvcontract.kernels.testing import assert_matches_ground_truth, production_case

    def test_my_decode_kernel():
        def run(batch, out, lse):          # batch: kvcontract.kernels.MLABatch
            my_kernel(batch.q, batch.kv_cache, batch.block_table, batch.seq_lens,
                      batch.scale, out=out, lse=lse)
        assert_matches_ground_truth(run, production_case("decode", dtype="bfloat16"),
                                    arithmetic="mixed")

``kernel`` is a backend (see :mod:`kvcontract.kernels.backends`) or a plain
callable ``run(batch, out, lse)``. A mismatch raises
:class:`GroundTruthMismatch` (an ``AssertionError``, so pytest reports it as
a failure) naming every failing request, the error and the tolerance; it is
raised explicitly, so ``python -O`` changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .arithmetic import Arithmetic
from .cases import MODES, CaseSpec, Kind, MLABatch, RequestSpec, build_batch
from .generation import production_specs
from .harness import check_batch
from .report import CaseResult

__all__ = ["GroundTruthMismatch", "assert_matches_ground_truth", "production_case"]


class GroundTruthMismatch(AssertionError):
    """A kernel's output is outside NUM-TOL-1's allowance (or non-finite, NUM-FINITE-1)."""


class _CallableBackend:
    def __init__(
        self,
        run: Callable[[MLABatch, torch.Tensor, torch.Tensor], Any],
        arithmetic: Arithmetic | str,
    ) -> None:
        self.name = getattr(run, "__qualname__", "kernel")
        self.description = f"callable {self.name}"
        self.modes = frozenset(MODES)
        self.arithmetic = arithmetic
        self._run = run

    def unavailable_reason(self, dtype: str) -> str | None:
        return None

    def run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        self._run(batch, out, lse)


def production_case(
    mode: str, *, dtype: str = "bfloat16", max_seq_len: int = 8192, seed: int = 0
) -> CaseSpec:
    """The first production-shaped case (width 576) made only of ``mode`` (see :func:`production_specs`)."""
    for spec in production_specs({mode}, dtype, max_seq_len=max_seq_len, seed=seed):
        return spec
    if mode == "padding":
        return CaseSpec(
            requests=(RequestSpec(Kind.DECODE, 1, min(max_seq_len, 512)), RequestSpec(Kind.PADDING, 0, 0)),
            num_heads=16, kv_lora_rank=512, rope_dim=64, block_size=64, dtype=dtype, seed=seed,
        )
    raise ValueError(f"no production case for mode {mode!r}; modes: {', '.join(MODES)}")


def assert_matches_ground_truth(
    kernel: object,
    case: CaseSpec | MLABatch,
    *,
    arithmetic: Arithmetic | str | None = None,
    device: torch.device | str = "cpu",
) -> CaseResult:
    """Run ``kernel`` on ``case`` and raise :class:`GroundTruthMismatch` unless every request passes.

    ``kernel``: a backend object, or a callable ``run(batch, out, lse)``.
    ``arithmetic``: the declared arithmetic (default: the backend's own
    declaration, else IEEE ``"float32"``). Returns the :class:`CaseResult`
    (per-request errors and ratios) when everything passes.
    """
    if callable(kernel) and not hasattr(kernel, "run"):
        backend: Any = _CallableBackend(kernel, arithmetic or "float32")
    elif hasattr(kernel, "run"):
        backend = kernel
        if arithmetic is not None:
            backend = _Declared(kernel, arithmetic)
    else:
        raise TypeError("kernel must be a backend or a callable run(batch, out, lse)")
    spec = case if isinstance(case, CaseSpec) else None
    batch = build_batch(case, device) if isinstance(case, CaseSpec) else case
    result = check_batch(backend, batch, spec=spec)
    failures = [r.message or f"request {r.request} failed" for r in result.records if not r.passed]
    if failures:
        raise GroundTruthMismatch(
            f"{len(failures)} request(s) off the ground truth:\n  " + "\n  ".join(failures)
        )
    return result


class _Declared:
    """A backend seen with another declared arithmetic."""

    def __init__(self, inner: Any, arithmetic: Arithmetic | str) -> None:
        self._inner = inner
        self.arithmetic = arithmetic
        self.name, self.description, self.modes = inner.name, inner.description, inner.modes

    def unavailable_reason(self, dtype: str) -> str | None:
        return self._inner.unavailable_reason(dtype)  # type: ignore[no-any-return]

    def run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        self._inner.run(batch, out, lse)
