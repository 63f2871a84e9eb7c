"""Attention backends the harness can check, and how they are found (NUM-DISPATCH-1).

What a backend is: :mod:`kvcontract.kernels.protocol` (:class:`Backend`, re-exported
here). Backends are named by a built-in name (the reference, its misrouted variants,
vLLM's Triton kernels, the kernel mutants of :mod:`kvcontract.kernels.mutants`), by
``module:factory`` (``factory()`` returns a backend), or by the name of an entry point
in the group ``kvcontract.backends`` of an installed package (the entry point's object
is such a factory).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from typing import Any

import torch

from .cases import MODES, Kind, MLABatch
from .mla import mla_reference
from .mutants import MUTANTS, MutantBackend
from .protocol import Backend

__all__ = [
    "Backend",
    "ReferenceBackend",
    "ENTRY_POINT_GROUP",
    "UnknownBackendError",
    "backend_names",
    "entry_point_backends",
    "get_backend",
    "load_factory",
]

ENTRY_POINT_GROUP = "kvcontract.backends"

CAUSAL_AS_NONCAUSAL = "causal-as-noncausal"
NONCAUSAL_AS_CAUSAL = "noncausal-as-causal"


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


def _vllm_triton(name: str, **options: Any) -> Callable[[], Backend]:
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
    "vllm-triton-mla-impl": _vllm_triton("vllm-triton-mla-impl", mla_impl=True),
    "vllm-triton-float32": _vllm_triton("vllm-triton-float32", upcast=True),
    "vllm-triton-gpu-sums": _vllm_triton("vllm-triton-gpu-sums", gpu_sums=True),
    "vllm-triton-misrouted-causal-as-noncausal": _vllm_triton(
        "vllm-triton-misrouted-causal-as-noncausal", misroute=CAUSAL_AS_NONCAUSAL
    ),
    "vllm-triton-misrouted-noncausal-as-causal": _vllm_triton(
        "vllm-triton-misrouted-noncausal-as-causal", misroute=NONCAUSAL_AS_CAUSAL
    ),
}


def _mutant(name: str) -> Callable[[], Backend]:
    return lambda: MutantBackend(name)


_REGISTRY.update({f"mutant-{m.name}": _mutant(m.name) for m in MUTANTS})


class UnknownBackendError(KeyError):
    """No backend is registered under that name, or a ``module:factory`` does not load (NUM-DISPATCH-1)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown backend"


def entry_point_backends() -> dict[str, importlib.metadata.EntryPoint]:
    """Backends installed packages register in the entry-point group ``kvcontract.backends``."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def backend_names() -> list[str]:
    """Built-in backend names, then those of installed entry points (NUM-DISPATCH-1)."""
    return list(_REGISTRY) + [n for n in entry_point_backends() if n not in _REGISTRY]


def load_factory(spec: str) -> Callable[[], object]:
    """The callable named by ``module:factory`` (``factory`` may be dotted)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UnknownBackendError(f"{spec!r} is not of the form module:factory")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownBackendError(f"cannot import {module_name!r} for backend {spec!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UnknownBackendError(f"{module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise UnknownBackendError(f"{spec!r} is not callable")
    return target


def _validated(made: object, origin: str) -> Backend:
    missing = [
        name for name in ("name", "description", "modes", "unavailable_reason", "run")
        if not hasattr(made, name)
    ]
    if missing:
        raise UnknownBackendError(
            f"{origin} did not return a backend: it lacks {', '.join(missing)} "
            "(see the backend protocol in kvcontract.kernels.protocol)"
        )
    if not isinstance(made, Backend):  # pragma: no cover - the attributes above imply it
        raise UnknownBackendError(f"{origin} did not return a backend")
    unknown = set(made.modes) - set(MODES)
    if unknown:
        raise UnknownBackendError(f"{origin}: unknown modes {sorted(unknown)}; known: {list(MODES)}")
    return made


def get_backend(name: str) -> Backend:
    """The backend ``name``: built-in, ``module:factory``, or an entry point (NUM-DISPATCH-1)."""
    if name in _REGISTRY:
        return _REGISTRY[name]()
    if ":" in name:
        return _validated(load_factory(name)(), f"factory {name!r}")
    installed = entry_point_backends()
    if name in installed:
        try:
            factory = installed[name].load()
        except Exception as exc:  # a broken plugin is reported, not raised
            raise UnknownBackendError(
                f"entry point {name!r} ({installed[name].value}) failed to load: {exc}"
            ) from exc
        return _validated(factory(), f"entry point {name!r}")
    raise UnknownBackendError(
        f"unknown backend {name!r}; known: {', '.join(backend_names())} "
        "(or module:factory)"
    )
