"""Numerical ground truth for MLA attention in every dispatch mode (spec chapter NUM).

``mla_reference`` is the chunked, float64 reference (NUM-OUTPUT-1,
NUM-MEMORY-1); ``dense_attention`` and ``non_absorbed_attention`` are the
independent formulations it is checked against (NUM-SELFCHECK-1);
``allowed_error`` is the tolerance model (NUM-TOL-1); the harness
(``check_batch``, ``check_backend``) compares any registered backend with
the reference per mode and per row (NUM-DISPATCH-1) on the cases of
``kvcontract.kernels.generation`` and reports them (``kvcontract.kernels.report``). Importing this package
imports nothing heavy: torch loads with the first public name used (so the
``kvcontract`` CLI stays fast for other verbs), vLLM and Triton only with the
``vllm-triton`` backends.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "Backend": "protocol",
    "ReferenceBackend": "backends",
    "UnknownBackendError": "backends",
    "backend_names": "backends",
    "get_backend": "backends",
    "DTYPES": "cases",
    "MODES": "cases",
    "CaseSpec": "cases",
    "Kind": "cases",
    "MLABatch": "cases",
    "RequestSpec": "cases",
    "build_batch": "cases",
    "case_specs": "generation",
    "default_case_specs": "generation",
    "draw_examples": "generation",
    "mode_of": "cases",
    "production_specs": "generation",
    "specs_for_modes": "generation",
    "absorb_query": "dense",
    "dense_attention": "dense",
    "non_absorbed_attention": "dense",
    "visibility_mask": "dense",
    "CaseResult": "report",
    "ModeSummary": "report",
    "RequestRecord": "report",
    "SuiteReport": "report",
    "check_backend": "harness",
    "check_batch": "harness",
    "format_table": "report",
    "poisoned_outputs": "harness",
    "run_suite": "harness",
    "write_json": "report",
    "MLAResult": "mla",
    "RowScales": "mla",
    "mla_reference": "mla",
    "visible_ranges": "mla",
    "TOLERANCES": "tolerance",
    "DtypeTolerance": "tolerance",
    "RowErrors": "tolerance",
    "allowed_error": "tolerance",
    "compare_rows": "tolerance",
}

__all__ = [
    "DTYPES",
    "MODES",
    "TOLERANCES",
    "Backend",
    "CaseResult",
    "CaseSpec",
    "DtypeTolerance",
    "Kind",
    "MLABatch",
    "MLAResult",
    "ModeSummary",
    "ReferenceBackend",
    "RequestRecord",
    "RequestSpec",
    "RowErrors",
    "RowScales",
    "SuiteReport",
    "UnknownBackendError",
    "absorb_query",
    "allowed_error",
    "backend_names",
    "build_batch",
    "case_specs",
    "check_backend",
    "check_batch",
    "compare_rows",
    "default_case_specs",
    "dense_attention",
    "draw_examples",
    "format_table",
    "get_backend",
    "mla_reference",
    "mode_of",
    "non_absorbed_attention",
    "poisoned_outputs",
    "production_specs",
    "run_suite",
    "specs_for_modes",
    "visibility_mask",
    "visible_ranges",
    "write_json",
]


def __getattr__(name: str) -> Any:
    """Import the public object ``name`` from its submodule on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
