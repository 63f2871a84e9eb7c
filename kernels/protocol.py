"""The backend protocol: what the harness needs of an attention implementation (NUM-DISPATCH-1).

A backend (public; see ``docs/kernels.md``) has:

* ``name: str`` and ``description: str``, for the report;
* ``modes: frozenset[str]``: the report modes it serves, a subset of
  :data:`~kvcontract.kernels.cases.MODES` (``decode``, ``verify``, ``draft``,
  ``prefill``, ``window-causal``, ``window-noncausal``, ``padding``); the harness
  only gives it batches made of those;
* ``unavailable_reason(dtype) -> str | None``: why it cannot run the storage
  dtype ``dtype`` (``"float32"``, ``"bfloat16"``, ``"float16"``) here, or
  None; a reason makes the run report it and exit 1, never a crash;
* ``run(batch, out, lse) -> None``: compute the :class:`MLABatch` (tensors on
  the run's device) into ``out [T, H, R]`` (storage dtype) and ``lse [T, H]``
  (float32, natural log), both NaN-poisoned by the harness (NUM-POISON-1);
  raising fails every request of the batch;
* optional ``arithmetic``: the declared arithmetic (an
  :class:`~kvcontract.kernels.arithmetic.Arithmetic` or one of
  ``"float64"``, ``"float32"``, ``"mixed"``, ``"tf32"``, each optionally with
  ``"+lse-storage"``); the tolerance follows it (NUM-TOL-1). Default:
  ``"float32"`` (IEEE).

This module is what the harness (:mod:`kvcontract.kernels.harness`), the registry
(:mod:`kvcontract.kernels.backends`) and the backends themselves share; it imports
only the case model.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from .cases import MLABatch

__all__ = ["Backend"]


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
