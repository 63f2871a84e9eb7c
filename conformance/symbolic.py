"""Symbolic checking: CrossHair's behaviour diff between an engine and the reference.

For each operation (merge of two and of three specs, uniformity of a two-layer
table, page size) and each spec kind, two functions with one signature are
built: one runs the engine through its adapter, one runs the reference. Their
parameters are the kind's int, bool and enum fields (dtypes and other opaque
engine values come from finite enumerations); optional and tuple-valued fields
keep their defaults. CrossHair searches for inputs on which the two behave
differently; each difference is shrunk (members copy the first member's
values where the difference survives), attributed to a clause, and rendered
with the repro snippet the conformance report uses.

What it cannot see: code CrossHair cannot trace (C extensions, torch
internals) runs on realized values; optional fields (None or a value) and
tuples are not searched; the search is bounded by ``--budget``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import sys
import time
import typing
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engine import Engine
from kvcontract.conformance.model import Example, Violation, render_snippet
from kvcontract.conformance.suite import law
from kvcontract.reference import KVCacheSpec, Role, role_of
from kvcontract.reference.dtypes import KVDtype, KVQuantMode, MambaType, SparseCacheRole

OPERATIONS = ("merge2", "merge3", "uniform2", "page_size")
SHARES = {"merge2": 0.5, "merge3": 0.2, "uniform2": 0.2, "page_size": 0.1}
"""Share of the budget per operation, split evenly over the kinds."""
REJECTED = "rejected"


@dataclasses.dataclass
class Finding:
    """One behaviour difference, attributed to a clause."""

    operation: str
    kind: str
    clause: str
    field: str
    """The one field the members differ in ("" when the difference needs several)."""
    specs: list[dict[str, Any]]
    engine_behaviour: str
    reference_behaviour: str
    snippet: str
    seconds: float


@dataclasses.dataclass
class SymbolicReport:
    engine: str
    engine_version: str
    optimized: bool
    budget_s: float
    findings: list[Finding]
    searched: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def symbolic_fields(kind: type[KVCacheSpec], engine: Engine) -> list[dataclasses.Field[Any]]:
    """The fields searched symbolically: ints, bools and enums the engine has."""
    hints = typing.get_type_hints(kind)
    missing = engine.unsupported_fields(kind)
    out = []
    for f in dataclasses.fields(kind):
        tp = hints[f.name]
        if f.name in missing:
            continue
        if tp in (int, bool) or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
            out.append(f)
    return out


def searchable_kinds(engine: Engine) -> list[type[KVCacheSpec]]:
    missing = engine.unsupported_kinds()
    return [k for k in reference.SPEC_KINDS if k not in missing and k is not reference.MambaSpec]


class _Pair:
    """The engine and reference functions of one operation on one kind."""

    def __init__(self, engine: Engine, kind: type[KVCacheSpec], operation: str) -> None:
        self.engine, self.kind, self.operation = engine, kind, operation
        self.count = {"merge2": 2, "merge3": 3, "uniform2": 2, "page_size": 1}[operation]
        self.fields = symbolic_fields(kind, engine)
        hints = typing.get_type_hints(kind)
        params = [inspect.Parameter(f"{f.name}_{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    annotation=hints[f.name])
                  for i in range(self.count) for f in self.fields]
        self.signature = inspect.Signature(params)
        self.engine_fn = self._function(self._engine_behaviour)
        self.reference_fn = self._function(self._reference_behaviour)

    def _function(self, behaviour: Callable[[list[KVCacheSpec]], Any]) -> Callable[..., Any]:
        signature = self.signature

        def fn(*args: Any, **kwargs: Any) -> Any:
            return behaviour(self.specs(signature.bind(*args, **kwargs).arguments))

        fn.__signature__ = signature  # type: ignore[attr-defined]
        fn.__name__ = f"{self.operation}_{self.kind.__name__}"
        return fn

    def specs(self, values: dict[str, Any]) -> list[KVCacheSpec]:
        return [self.kind(**{f.name: values[f"{f.name}_{i}"] for f in self.fields})
                for i in range(self.count)]

    @staticmethod
    def _fields(spec: KVCacheSpec) -> tuple[Any, ...]:
        return (type(spec).__name__, *(getattr(spec, f.name) for f in dataclasses.fields(spec)))

    def _engine_behaviour(self, specs: list[KVCacheSpec]) -> Any:
        e = self.engine
        objs = [e.to_engine(s) for s in specs]
        try:
            if self.operation in ("merge2", "merge3"):
                return self._fields(e.from_engine(e.merge(objs)))
            if self.operation == "uniform2":
                return bool(e.is_uniform({f"layer{i}": o for i, o in enumerate(objs)}))
            return int(e.page_size(objs[0]))
        except AssertionError:
            return REJECTED

    def _reference_behaviour(self, specs: list[KVCacheSpec]) -> Any:
        try:
            if self.operation in ("merge2", "merge3"):
                return self._fields(reference.merge(specs))
            if self.operation == "uniform2":
                return reference.is_uniform({f"layer{i}": s for i, s in enumerate(specs)})
            return specs[0].page_size_bytes
        except AssertionError:
            return REJECTED

    def outcome(self, fn: Callable[[list[KVCacheSpec]], Any], specs: list[KVCacheSpec]) -> tuple[str, Any]:
        try:
            return ("returns", fn(specs))
        except Exception as exc:  # noqa: BLE001 - the behaviour being compared
            return ("raises", type(exc).__name__)

    def differs(self, specs: list[KVCacheSpec]) -> bool:
        return self.outcome(self._engine_behaviour, specs) != self.outcome(self._reference_behaviour, specs)


_NAMESPACE = {c.__name__: c for c in (KVDtype, KVQuantMode, MambaType, SparseCacheRole)}


def _realize(args: dict[str, str]) -> dict[str, Any]:
    return {name: eval(text, dict(_NAMESPACE)) for name, text in args.items()}


def near_misses_of(pair: _Pair, specs: list[KVCacheSpec]) -> list[tuple[str, list[KVCacheSpec]]]:
    """Explain a difference field by field: for each field in which a member
    differs from the first, the first member twice (or thrice) with only that
    field changed, kept when the difference survives. Falls back to the input."""
    base = specs[0]
    found = []
    for i in range(1, len(specs)):
        for f in pair.fields:
            value = getattr(specs[i], f.name)
            if value == getattr(base, f.name) or any(name == f.name for name, _ in found):
                continue
            try:
                odd = dataclasses.replace(base, **{f.name: value})
            except ValueError:
                continue
            candidate = [base] * len(specs)
            candidate[i] = odd
            if pair.differs(candidate):
                found.append((f.name, candidate))
    return found or [("", specs)]


def classify(pair: _Pair, specs: list[KVCacheSpec]) -> str:
    """The clause a difference breaks."""
    engine_out = pair.outcome(pair._engine_behaviour, specs)
    reference_out = pair.outcome(pair._reference_behaviour, specs)
    if pair.operation == "page_size":
        return "SPEC-PAGE-1"
    if pair.operation == "uniform2":
        return "UNIFORM-NORAISE-1" if engine_out[0] == "raises" else "UNIFORM-MERGE-1"
    if engine_out[0] == "raises":
        return "ERROR-TYPE-1" if reference_out == ("returns", REJECTED) else "MERGE-AGREE-1"
    if reference_out == ("returns", REJECTED):
        return "ERROR-TYPE-1" if engine_out == ("returns", REJECTED) else "ERROR-DETECT-1"
    if engine_out == ("returns", REJECTED):
        return "MERGE-UNION-1" if all(
            role_of(f) is Role.CAPABILITY for f in pair.fields
            if len({getattr(s, f.name) for s in specs}) > 1) else "MERGE-AGREE-1"
    got, want = engine_out[1], reference_out[1]
    for f, g, w in zip(dataclasses.fields(specs[0]), got[1:], want[1:], strict=False):
        if g != w:
            return {Role.CAPABILITY: "MERGE-UNION-1", Role.ANNOTATION: "MERGE-ANNOTATION-1"}.get(
                role_of(f), "MERGE-AGREE-1")
    return "MERGE-KIND-1"


def _snippet(engine: Engine, clause: str, specs: list[KVCacheSpec], operation: str) -> str:
    if clause == "SPEC-PAGE-1":
        example = Example(specs=tuple(specs))
        violation = Violation(
            "page size differs from the contract's",
            f"if specs[0].page_size_bytes != {specs[0].page_size_bytes}:\n"
            f"    raise SystemExit(f'VIOLATION of SPEC-PAGE-1: page {{specs[0].page_size_bytes}} != "
            f"{specs[0].page_size_bytes}')")
        return render_snippet(engine, law("MERGE-PAGE-1"), example, violation, bool(sys.flags.optimize))
    if operation == "uniform2":
        example = Example(table=tuple((f"layer{i}", s) for i, s in enumerate(specs)))
    else:
        different = [f.name for f in dataclasses.fields(specs[0])
                     if len({repr(getattr(s, f.name)) for s in specs}) > 1]
        example = Example(specs=tuple(specs), field=different[0] if different else None)
    try:
        law(clause).check(engine, example)
    except Violation as violation:
        return render_snippet(engine, law(clause), example, violation, bool(sys.flags.optimize))
    except KeyError:
        pass
    generic = Violation("behaviour differs from the reference",
                        "print(MERGE(specs))" if operation.startswith("merge") else "print(UNIFORM(table))")
    return render_snippet(engine, law("MERGE-AGREE-1"), example, generic, bool(sys.flags.optimize))


def search(engine_name: str, budget_s: float, operations: Sequence[str] = OPERATIONS,
           kinds: Sequence[str] | None = None, progress: Callable[[str], None] | None = None) -> SymbolicReport:
    """Run CrossHair's behaviour diff for every (operation, kind) within ``budget_s``."""
    import crosshair.core_and_libs  # noqa: F401 - registers CrossHair's patches
    from crosshair.diff_behavior import ExceptionEquivalenceType, diff_behavior
    from crosshair.fnutil import FunctionInfo
    from crosshair.options import DEFAULT_OPTIONS, AnalysisOptionSet

    from kvcontract.conformance.registry import resolve_engine

    engine = resolve_engine(engine_name)
    chosen = [k for k in searchable_kinds(engine) if kinds is None or k.__name__ in kinds]
    findings: list[Finding] = []
    searched = []
    total_share = sum(SHARES[o] for o in operations)
    for operation in operations:
        per_kind = budget_s * SHARES[operation] / total_share / max(1, len(chosen))
        for kind in chosen:
            pair = _Pair(engine, kind, operation)
            options = DEFAULT_OPTIONS.overlay(AnalysisOptionSet(
                per_condition_timeout=per_kind, per_path_timeout=max(1.0, per_kind / 4)))
            options.stats = Counter()
            start = time.perf_counter()
            diffs = diff_behavior(FunctionInfo.from_fn(pair.engine_fn), FunctionInfo.from_fn(pair.reference_fn),
                                  options, ExceptionEquivalenceType.SAME_TYPE)
            seconds = time.perf_counter() - start
            seen: set[tuple[str, str]] = set()
            for diff in [] if isinstance(diffs, str) else diffs:
                try:
                    raw = pair.specs(_realize(diff.args))
                except Exception:  # noqa: BLE001, S112 - an input the reference rejects is no finding
                    continue
                if not pair.differs(raw):
                    continue  # not reproducible outside the symbolic run
                for field_name, specs in near_misses_of(pair, raw):
                    clause = classify(pair, specs)
                    if (clause, field_name) in seen:
                        continue
                    seen.add((clause, field_name))
                    findings.append(Finding(
                        operation, kind.__name__, clause, field_name,
                        [_spec_json(s) for s in specs],
                        repr(pair.outcome(pair._engine_behaviour, specs)),
                        repr(pair.outcome(pair._reference_behaviour, specs)),
                        _snippet(engine, clause, specs, operation), round(seconds, 2)))
            searched.append({"operation": operation, "kind": kind.__name__,
                             "paths": options.stats.get("num_paths", 0), "seconds": round(seconds, 2),
                             "differences": len(seen)})
            if progress:
                progress(f"[symbolic{' -O' if sys.flags.optimize else ''}] {operation} {kind.__name__}: "
                         f"{len(seen)} difference(s), {options.stats.get('num_paths', 0)} paths, {seconds:.1f}s")
    return SymbolicReport(engine.name, engine.version, bool(sys.flags.optimize), budget_s, findings, searched)


def _spec_json(spec: KVCacheSpec) -> dict[str, Any]:
    from kvcontract.conformance.codec import spec_to_json

    return spec_to_json(spec)


def symbolic_task(args: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The search as a worker task (:mod:`kvcontract.conformance.worker`)."""
    report = search(str(args["engine"]), float(args["budget"]), list(args["operations"]),
                    args.get("kinds"), lambda line: emit({"progress": line}))
    return report.to_json()


def run_symbolic(engine_name: str, budget_s: float, optimize: str, operations: Sequence[str] = OPERATIONS,
                 kinds: Sequence[str] | None = None, progress: Callable[[str], None] | None = None,
                 timeout_s: float | None = None) -> SymbolicReport:
    """The search in a supervised worker (``python -O`` for ``optimize="on"``);
    the engine's hang or crash ends it with an error, not the kit."""
    from kvcontract.conformance.worker import Worker

    def relay(event: Any) -> None:
        if progress is not None and "progress" in event:
            progress(str(event["progress"]))

    with Worker(optimized=optimize == "on") as worker:
        result = worker.run("kvcontract.conformance.symbolic:symbolic_task",
                            {"engine": engine_name, "budget": budget_s, "operations": list(operations),
                             "kinds": list(kinds) if kinds else None},
                            timeout=timeout_s or budget_s * 4 + 300, on_event=relay)
    if not result.ok:
        raise RuntimeError(f"the symbolic search did not finish: {result.error}")
    data = dict(result.value)
    data["findings"] = [Finding(**f) for f in data["findings"]]
    return SymbolicReport(**data)


def render(report: SymbolicReport) -> str:
    mode = "python -O" if report.optimized else "python"
    lines = [f"kvcontract symbolic: {report.engine} {report.engine_version} ({mode}, budget {report.budget_s:.0f}s)",
             "", f"{'operation':<10} {'kind':<26} {'paths':>6} {'time':>7} {'differences':>11}"]
    for s in report.searched:
        lines.append(f"{s['operation']:<10} {s['kind']:<26} {s['paths']:>6} {s['seconds']:>6.1f}s "
                     f"{s['differences']:>11}")
    if not report.findings:
        lines += ["", "no difference from the reference found within the budget"]
    for f in report.findings:
        differ = f" differing in {f.field}" if f.field else ""
        lines += ["", f"=== {f.clause}: {f.operation} of {f.kind}{differ}",
                  f"engine:    {f.engine_behaviour}", f"reference: {f.reference_behaviour}",
                  "--- repro ---", f.snippet.rstrip()]
    return "\n".join(lines)
