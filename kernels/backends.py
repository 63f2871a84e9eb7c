"""Attention backends the harness can check, and their registry (NUM-DISPATCH-1).

A backend takes an :class:`MLABatch` and writes the output rows and LSE of
every query row into tensors the harness allocated and poisoned
(NUM-POISON-1). ``modes`` lists the report modes it serves; the harness only
gives it batches made of those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch

from .cases import MODES, Kind, MLABatch
from .mla import mla_reference

__all__ = [
    "Backend",
    "ReferenceBackend",
    "UnknownBackendError",
    "backend_names",
    "get_backend",
]

CAUSAL_AS_NONCAUSAL = "causal-as-noncausal"
NONCAUSAL_AS_CAUSAL = "noncausal-as-causal"


@runtime_checkable
class Backend(Protocol):
    """What the harness needs of an attention implementation (NUM-DISPATCH-1)."""

    name: str
    description: str
    modes: frozenset[str]

    def unavailable_reason(self, dtype: str) -> str | None:
        """Why it cannot run ``dtype`` (a key of ``DTYPES``) here, or None when it can."""
        ...

    def run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        """Write ``out [T, H, R]`` (storage dtype) and natural-log ``lse [T, H]`` (float32)."""
        ...


class ReferenceBackend:
    """The reference itself as a backend (NUM-OUTPUT-1), optionally misrouted.

    ``misroute="causal-as-noncausal"`` computes causal multi-row requests with
    every row seeing all keys; ``"noncausal-as-causal"`` computes draft
    blocks causally. Both exist to prove that the harness tells the modes
    apart (NUM-DISPATCH-1).
    """

    modes = frozenset(MODES)

    def __init__(
        self, name: str, accumulate: torch.dtype = torch.float64, misroute: str | None = None
    ) -> None:
        if misroute not in (None, CAUSAL_AS_NONCAUSAL, NONCAUSAL_AS_CAUSAL):
            raise ValueError(f"unknown misroute {misroute!r}")
        self.name = name
        self.accumulate = accumulate
        self.misroute = misroute
        self.arithmetic = "float64" if accumulate == torch.float64 else "float32"
        precision = "float64" if accumulate == torch.float64 else "float32"
        self.description = f"chunked online-softmax reference, {precision} accumulation" + (
            f", deliberately misrouted {misroute}" if misroute else ""
        )

    def unavailable_reason(self, dtype: str) -> str | None:
        """Always available."""
        return None

    def run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        """Compute ``batch`` with the reference and store it in ``out``/``lse``."""
        override = None
        if self.misroute is not None:
            flip_causal = self.misroute == CAUSAL_AS_NONCAUSAL
            override = [
                (not k.causal) if (k.causal == flip_causal and k is not Kind.PADDING) else k.causal
                for k in batch.kinds
            ]
        result = mla_reference(batch, accumulate=self.accumulate, causal_override=override)
        out.copy_(result.out.to(out.dtype))
        lse.copy_(result.lse.to(lse.dtype))


def _vllm_triton(name: str, **options: str) -> Callable[[], Backend]:
    def make() -> Backend:
        from .vllm_triton import VllmTritonBackend

        return VllmTritonBackend(name, **options)

    return make


_REGISTRY: dict[str, Callable[[], Backend]] = {
    "reference": lambda: ReferenceBackend("reference"),
    "reference-float32": lambda: ReferenceBackend("reference-float32", torch.float32),
    "reference-misrouted-causal-as-noncausal": lambda: ReferenceBackend(
        "reference-misrouted-causal-as-noncausal", misroute=CAUSAL_AS_NONCAUSAL
    ),
    "reference-misrouted-noncausal-as-causal": lambda: ReferenceBackend(
        "reference-misrouted-noncausal-as-causal", misroute=NONCAUSAL_AS_CAUSAL
    ),
    "vllm-triton": _vllm_triton("vllm-triton"),
    "vllm-triton-rows": _vllm_triton("vllm-triton-rows", route="rows"),
    "vllm-triton-misrouted-causal-as-noncausal": _vllm_triton(
        "vllm-triton-misrouted-causal-as-noncausal", misroute=CAUSAL_AS_NONCAUSAL
    ),
    "vllm-triton-misrouted-noncausal-as-causal": _vllm_triton(
        "vllm-triton-misrouted-noncausal-as-causal", misroute=NONCAUSAL_AS_CAUSAL
    ),
}


class UnknownBackendError(KeyError):
    """No backend is registered under that name (NUM-DISPATCH-1)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown backend"


def backend_names() -> list[str]:
    """Registered backend names (NUM-DISPATCH-1)."""
    return list(_REGISTRY)


def get_backend(name: str) -> Backend:
    """The backend registered as ``name`` (NUM-DISPATCH-1)."""
    if name not in _REGISTRY:
        raise UnknownBackendError(
            f"unknown backend {name!r}; known: {', '.join(_REGISTRY)}"
        )
    return _REGISTRY[name]()
