"""The verdicts of a ``kvcontract kernels`` run: per request, per case, per mode; the
table it prints and the JSON report it writes (NUM-DISPATCH-1)."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import kvcontract
from kvcontract.reports import ReportHeader, text_table, write_atomic

from .cases import CaseSpec

__all__ = [
    "CaseResult",
    "ModeSummary",
    "RequestRecord",
    "SuiteReport",
    "format_table",
    "write_json",
]


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """The verdict on one request's rows, or for mode ``padding`` on the padding's effect (NUM-TOL-1, NUM-PAD-1)."""

    case: int
    request: int
    mode: str
    kind: str
    query_len: int
    seq_len: int
    rows: int
    max_abs_error: float
    max_rel_error: float
    max_lse_error: float
    worst_ratio: float
    passed: bool
    message: str | None = None


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """All records of one batch (NUM-DISPATCH-1); ``spec`` reproduces it when it came from a :class:`CaseSpec`."""

    index: int
    spec: CaseSpec | None
    records: tuple[RequestRecord, ...]

    @property
    def passed(self) -> bool:
        """Whether every record passed."""
        return all(r.passed for r in self.records)


@dataclasses.dataclass(frozen=True)
class ModeSummary:
    """One line of the report table: a mode's verdict (NUM-DISPATCH-1)."""

    mode: str
    status: str  # "pass", "FAIL", "not served" or "no cases"
    cases: int
    rows: int
    max_abs_error: float
    max_rel_error: float
    max_lse_error: float
    worst_ratio: float
    failures: int
    messages: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class SuiteReport:
    """Results of a backend over a set of cases, per mode (NUM-DISPATCH-1)."""

    backend: str
    description: str
    dtype: str
    device: str
    seed: int
    modes: tuple[ModeSummary, ...]
    cases: tuple[CaseResult, ...]
    error: str | None = None

    @property
    def passed(self) -> bool:
        """No mode failed and the backend could run."""
        return self.error is None and all(m.status != "FAIL" for m in self.modes)

    def to_json(self) -> dict[str, Any]:
        """Per-mode records, failing cases (with reproducible specs) and a summary."""
        failing = [c for c in self.cases if not c.passed]
        return {
            **_header("kernels", self.backend, self.seed),
            "backend": self.backend,
            "description": self.description,
            "dtype": self.dtype,
            "device": self.device,
            "seed": self.seed,
            "error": self.error,
            "modes": [_finite_json(dataclasses.asdict(m)) for m in self.modes],
            "failing_cases": [
                {
                    "index": c.index,
                    "spec": c.spec.to_json() if c.spec is not None else None,
                    "records": [_finite_json(dataclasses.asdict(r)) for r in c.records if not r.passed],
                }
                for c in failing
            ],
            "summary": {
                "status": "pass" if self.passed else "fail",
                "cases": len(self.cases),
                "failed_cases": len(failing),
                "failed_modes": [m.mode for m in self.modes if m.status == "FAIL"],
                "modes_checked": [m.mode for m in self.modes if m.status in ("pass", "FAIL")],
            },
        }


def _finite_json(record: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN/Inf: write them as strings."""
    return {
        k: (str(v) if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))) else v)
        for k, v in record.items()
    }


def format_table(report: SuiteReport) -> str:
    """The per-mode table printed by ``kvcontract kernels`` (NUM-DISPATCH-1)."""
    rows: list[list[Any]] = []
    for m in report.modes:
        if m.status in ("not served", "no cases"):
            rows.append([m.mode, m.cases, m.rows, "", "", "", "", m.status])
        else:
            rows.append([m.mode, m.cases, m.rows, f"{m.max_abs_error:.3e}", f"{m.max_rel_error:.3e}",
                         f"{m.max_lse_error:.3e}", f"{m.worst_ratio:.3g}", m.status])
    lines = [
        f"backend {report.backend} ({report.description}); dtype {report.dtype}, "
        f"device {report.device}, seed {report.seed}",
        *text_table(["mode", "cases", "rows", "max abs err", "max rel err", "max lse err", "err/tol", "status"],
                    rows, align="<>>>>>><"),
    ]
    for m in report.modes:
        for message in m.messages:
            lines.append(f"  {m.mode}: {message}")
    if report.error:
        lines.append(f"error: {report.error}")
    lines.append("result: " + ("pass" if report.passed else "FAIL"))
    return "\n".join(lines)


def write_json(report: SuiteReport, path: str | os.PathLike[str]) -> None:
    """Write the JSON report atomically (:func:`kvcontract.reports.write_atomic`)."""
    write_atomic(path, json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n")


def _header(kind: str, backend: str, seed: int) -> dict[str, Any]:
    """The fields every kvcontract report starts with (:class:`kvcontract.reports.ReportHeader`)."""
    return ReportHeader(schema_version="2", kind=kind, kit_version=kvcontract.__version__, engine=backend,
                        engine_version=_backend_version(backend), profile="default", seed=seed).model_dump()


def _backend_version(backend: str) -> str:
    if backend.startswith("vllm"):
        try:
            import importlib.metadata

            return importlib.metadata.version("vllm")
        except Exception:  # noqa: BLE001 - not installed: no version to record
            return "unknown"
    return kvcontract.__version__
