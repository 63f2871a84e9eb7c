"""The laws of chapter UNIFORM: the engine's uniformity check answers (never raises)
exactly whether the layers' specs merge, and no layers at all is uniform."""

from __future__ import annotations

from collections.abc import Sequence

from kvcontract import reference
from kvcontract.conformance.contract import shapes
from kvcontract.conformance.contract.expectations import Answer, Raised
from kvcontract.conformance.contract.laws.common import describe, fields_of, to_engine
from kvcontract.conformance.contract.model import Example, KitFailure, Law, Violation, signature
from kvcontract.conformance.contract.repro import UniformOf
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.reference import KVCacheSpec


def _uniform(engine: Engine, table: Sequence[tuple[str, KVCacheSpec]]) -> bool | BaseException:
    objs = {n: to_engine(engine, s) for n, s in table}
    try:
        return engine.is_uniform(objs)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:  # noqa: BLE001
        return exc


def check_uniform_merge(engine: Engine, ex: Example) -> None:
    table = ex.table or tuple((f"layers.{i}", s) for i, s in enumerate(ex.specs))
    want = reference.is_uniform(dict(table))
    got = _uniform(engine, table)
    if isinstance(got, BaseException):
        return  # UNIFORM-NORAISE-1 judges exceptions
    if got != want:
        raise Violation(f"is_uniform returned {got}, the contract says {want}", Answer(UniformOf(), want),
                        signature(f"uniform-{str(got).lower()}", ex.kinds(), fields_of(ex)))


def check_uniform_noraise(engine: Engine, ex: Example) -> None:
    table = tuple((f"layers.{i}", s) for i, s in enumerate(ex.specs))
    got = _uniform(engine, table)
    if isinstance(got, BaseException):
        raise Violation(f"is_uniform raised {describe(got)} instead of answering False", Raised(UniformOf()),
                        signature(f"raised-{type(got).__name__}", ex.kinds(), fields_of(ex)))


def check_uniform_empty(engine: Engine, ex: Example) -> None:
    got = _uniform(engine, ())
    if got is not True:
        raise Violation(f"is_uniform({{}}) gave {got!r}", Answer(UniformOf(empty=True), True, identical=True),
                        signature("not-true"))


def _needs_uniform(engine: Engine) -> str | None:
    """UNIFORM-*: the engine's uniformity test can be called here (else skip with the adapter's
    reason: a release without the function is not judged by the adapter's refusal)."""
    from kvcontract.conformance.engines.protocol import UniformAvailability

    return engine.uniform_unavailable() if isinstance(engine, UniformAvailability) else None


UNIFORM_OPS = frozenset({"to_engine", "is_uniform"})
_SEARCHED = frozenset({"merge", "mixed", "uniform"})

UNIFORM_LAWS: tuple[Law, ...] = (
    Law("UNIFORM-MERGE-1", shapes.UNIFORM_CASES, check_uniform_merge, _needs_uniform, operations=UNIFORM_OPS,
        searched=_SEARCHED),
    Law("UNIFORM-NORAISE-1", shapes.INCOMPATIBLE, check_uniform_noraise, _needs_uniform, operations=UNIFORM_OPS,
        searched=_SEARCHED, feeds=("ERROR-OPTIMIZE-1",)),
    Law("UNIFORM-EMPTY-1", shapes.NOTHING, check_uniform_empty, _needs_uniform, operations=frozenset({"is_uniform"}),
        searched=frozenset({"empty"})),
)
"""The laws of chapter UNIFORM, in SPEC.md order."""
