"""Mutants of the uniformity check (``is_uniform``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _register
from kvcontract.reference import IncompatibleSpecs, Role


@_register
class UniformRaises(Mutant):
    """UNIFORM-NORAISE-1: the uniformity check lets merge's error escape."""

    key = "uniform-raises"
    description = "is_uniform calls merge without catching its error: it raises instead of answering False"
    imitates = ""
    expected_clauses = ("UNIFORM-NORAISE-1",)

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        if objs_by_layer:
            reference.merge(list(objs_by_layer.values()))
        return True


@_register
class UniformWindowValueError(Mutant):
    """UNIFORM-NORAISE-1: uniformity raises ValueError when mask windows disagree.

    Killed by near misses stratified over (kind, field) pairs."""

    key = "uniform-window-value-error"
    description = ("is_uniform raises ValueError, instead of answering False, when layers "
                   "disagree on a mask window (a common annotation)")
    imitates = ("vLLM 0.34.0 is_kv_cache_spec_uniform (catches only AssertionError) with "
                "FullAttentionSpec.merge_window_sizes (raises ValueError)")
    expected_clauses = ("UNIFORM-NORAISE-1",)

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        try:
            if objs_by_layer:
                reference.merge(list(objs_by_layer.values()))
        except IncompatibleSpecs as exc:
            windows = [d.describe() for d in exc.disagreements if d.role is Role.ANNOTATION]
            if windows:  # what merge_window_sizes raises, and the check does not catch
                raise ValueError(f"window sizes must match: {'; '.join(windows)}") from None
            return False
        return True


@_register
class UniformByKind(Mutant):
    """UNIFORM-MERGE-1: uniformity compares kinds only."""

    key = "uniform-by-kind"
    description = "is_uniform answers True whenever all layers have the same kind"
    imitates = ""
    expected_clauses = ("UNIFORM-MERGE-1",)

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        return len({type(s) for s in objs_by_layer.values()}) <= 1
