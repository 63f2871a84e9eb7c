"""Where in the engine a finding comes from: its witness replayed under a tracer.

A finding is evidence; the *defect* is the engine code that causes it. :func:`locate`
replays a finding's witness in the normal interpreter (a supervised worker) with a
tracer on the engine's own source files (:func:`engine_roots`), active while the engine's
operations run (the kit's own work between them untraced: tracing it made locating five
times as slow as replaying), and answers one location per finding, mechanically:

- the engine raised (``raised-X``, an error message judged by ERROR-MESSAGE-1): the
  innermost engine frame where that exception arose;
- the finding is ``python -O``-only: the engine ``assert`` statement that fires when
  the same witness runs without ``-O`` (under ``-O`` it is gone, so the finding);
- a wrong answer: the engine function that decides it (:class:`Locatable`'s
  ``deciders``: e.g. the ``merge`` that ran on the finding's kind), else the engine
  function the kit called.

:mod:`kvcontract.conformance.reports.defects` turns the locations into defects.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import linecache
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import Any

from kvcontract.conformance.contract.laws import DERIVED, law
from kvcontract.conformance.contract.laws.common import forget_answers
from kvcontract.conformance.contract.model import Violation
from kvcontract.conformance.engines.protocol import Engine, Locatable, Planning
from kvcontract.conformance.run.facts import judged_example
from kvcontract.conformance.run.worker import Emit, begin

WRONG_ANSWER_DECIDERS: tuple[str, ...] = ("merge",)
"""What decides a wrong answer for an engine that does not say (:class:`Locatable`)."""


@dataclasses.dataclass(frozen=True)
class Frame:
    """One engine frame: file (relative to the engine's root's parent), line, function."""

    file: str
    line: int
    function: str
    receiver: str = ""
    """The class of ``self`` / ``cls`` in the frame (a merge run on which kind)."""

    @property
    def statement(self) -> str:
        return linecache.getline(self.file_abs, self.line).strip() if self.file_abs else ""

    file_abs: str = ""


def engine_roots(engine: Engine) -> tuple[str, ...]:
    """The directories whose files are the engine's own code."""
    if isinstance(engine, Locatable):
        return tuple(os.path.realpath(r) for r in engine.source_roots())
    module = sys.modules.get(type(engine).__module__)
    path = getattr(module, "__file__", None)
    return (os.path.realpath(os.path.dirname(path)),) if path else ()


class Tracer:
    """Engine calls and the origin of every exception raised in engine code, while active."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = tuple(r.rstrip(os.sep) + os.sep for r in roots)
        self._calls: list[tuple[str, int, str, str, str]] = []
        """Each engine call as :class:`Frame`'s fields (a frame built per call cost a fifth of a trace)."""
        self.raised: list[tuple[BaseException, Frame]] = []
        self._seen: set[int] = set()
        self._files: dict[str, str | None] = {}

    def _relative(self, filename: str) -> str | None:
        if filename not in self._files:
            real = os.path.realpath(filename)
            self._files[filename] = next(
                (os.path.relpath(real, os.path.dirname(root.rstrip(os.sep))) for root in self.roots
                 if real.startswith(root)), None)
        return self._files[filename]

    @property
    def calls(self) -> list[Frame]:
        """The engine calls, in order."""
        return [Frame(*c) for c in self._calls]

    def first_call(self) -> Frame | None:
        """The first engine call (the function the kit called), if any."""
        return Frame(*self._calls[0]) if self._calls else None

    def calls_of(self, name: str) -> list[Frame]:
        """The engine calls of functions named ``name`` (a method: its own name), in order."""
        return [Frame(*c) for c in self._calls if c[2].rsplit(".", 1)[-1] == name]

    def _fields(self, frame: FrameType, line: int, rel: str) -> tuple[str, int, str, str, str]:
        code = frame.f_code
        receiver = None
        if code.co_argcount and code.co_varnames[0] in ("self", "cls"):  # f_locals only then: it copies them all
            receiver = frame.f_locals.get(code.co_varnames[0])
        name = receiver.__name__ if isinstance(receiver, type) else type(receiver).__name__ if receiver is not None \
            else ""
        return rel, line, code.co_qualname, name, code.co_filename

    def _frame(self, frame: FrameType, line: int, rel: str) -> Frame:
        return Frame(*self._fields(frame, line, rel))

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        filename = frame.f_code.co_filename
        rel = self._files[filename] if filename in self._files else self._relative(filename)
        if rel is None:
            return None
        self._calls.append(self._fields(frame, frame.f_code.co_firstlineno, rel))
        frame.f_trace_lines = False  # exceptions only: a line event per engine line cost most of a trace
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception":
            exc = arg[1]
            if id(exc) not in self._seen:  # the first event is where it arose; outer frames re-see it
                self._seen.add(id(exc))
                rel = self._relative(frame.f_code.co_filename)
                if rel is not None:
                    self.raised.append((exc, self._frame(frame, frame.f_lineno, rel)))
        return self._local

    def __enter__(self) -> Tracer:
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._previous)

    def traced(self, operation: Callable[..., Any]) -> Callable[..., Any]:
        """``operation`` run under this tracer (and the code between two calls not)."""
        def run(*args: Any, **kwargs: Any) -> Any:
            if sys.gettrace() == self._global:  # an operation calling another (a new bound method each time)
                return operation(*args, **kwargs)
            with self:
                return operation(*args, **kwargs)
        return run


ENGINE_OPERATIONS = ("to_engine", "from_engine", "merge", "is_uniform", "group_layers", "page_size")
"""The engine's operations (:class:`~kvcontract.conformance.engines.protocol.Engine`) a replay
traces, with :class:`~kvcontract.conformance.engines.protocol.Planning`'s ``plan_layers``: the
kit's own work between them (the reference's answers, most of a replay) runs untraced."""
WHOLE_REPLAY_CHAPTERS = ("DISPATCH-",)
"""Clauses whose engine code runs outside those operations (a router's calls): traced whole."""


@contextlib.contextmanager
def _operations_traced(engine: Engine, tracer: Tracer, clause: str) -> Iterator[None]:
    """``tracer`` active while the engine's operations run (``engine``'s own attributes replaced
    for the while), or around the whole replay for a clause in :data:`WHOLE_REPLAY_CHAPTERS`."""
    if clause.startswith(WHOLE_REPLAY_CHAPTERS):
        with tracer:
            yield
        return
    names = [*ENGINE_OPERATIONS, *(("plan_layers",) if isinstance(engine, Planning) else ())]
    patched = []
    try:
        for name in names:
            if name in vars(engine):
                continue  # an instance attribute already: left as it is, traced from its callers
            setattr(engine, name, tracer.traced(getattr(engine, name)))
            patched.append(name)
        yield
    finally:
        for name in patched:
            delattr(engine, name)


def _outcome(signature: str) -> str:
    return signature.split(":", 1)[0]


def _kinds(signature: str) -> set[str]:
    parts = signature.split(":")
    return set(parts[1].replace(">", "+").split("+")) if len(parts) > 1 else set()


_STATEMENTS: dict[str, list[tuple[int, int, bool]]] = {}
_INNERMOST: dict[tuple[str, int], tuple[int, bool] | None] = {}


def _statements(file_abs: str) -> list[tuple[int, int, bool]]:
    """``(first line, last line, is an assert)`` of every statement of a file (parsed once)."""
    if file_abs not in _STATEMENTS:
        try:
            tree = ast.parse("".join(linecache.getlines(file_abs)))
        except (SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        _STATEMENTS[file_abs] = [(n.lineno, n.end_lineno or n.lineno, isinstance(n, ast.Assert))
                                 for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    return _STATEMENTS[file_abs]


def _innermost(frame: Frame) -> tuple[int, bool] | None:
    """The first line of the innermost statement ``frame``'s line is part of, and whether it is an
    ``assert``; None outside any (worked out once per file and line: findings share a few)."""
    key = (frame.file_abs, frame.line)
    if key not in _INNERMOST:
        spans = [(first, last, is_assert) for first, last, is_assert in _statements(frame.file_abs)
                 if first <= frame.line <= last]
        first, _, is_assert = min(spans, key=lambda span: span[1] - span[0]) if spans else (0, 0, False)
        _INNERMOST[key] = (first, is_assert) if spans else None
    return _INNERMOST[key]


def _statement_start(frame: Frame) -> Frame:
    """The frame at the first line of the innermost statement its line is part of."""
    found = _innermost(frame)
    return frame if found is None else dataclasses.replace(frame, line=found[0])


def _enclosing_assert(frame: Frame) -> Frame | None:
    """The frame at the first line of the ``assert`` statement its line is part of (an assert's
    condition may span lines; the exception names the line being evaluated), or None."""
    found = _innermost(frame)
    return dataclasses.replace(frame, line=found[0]) if found is not None and found[1] else None


def _prefer(frames: Sequence[Frame], kinds: set[str]) -> Frame | None:
    """The frame run on one of the finding's kinds, else the most frequent location, first seen first."""
    if not frames:
        return None
    on_kind = [f for f in frames if f.receiver in kinds]
    pool = on_kind or list(frames)
    counts: dict[tuple[str, int], int] = {}
    for f in pool:
        counts[(f.file, f.line)] = counts.get((f.file, f.line), 0) + 1
    return max(pool, key=lambda f: counts[(f.file, f.line)])


def _decider(tracer: Tracer, names: Sequence[str], kinds: set[str]) -> Frame | None:
    """The last call of the first of ``names`` that ran (on one of ``kinds`` if any did), else
    the engine function the kit called first."""
    for name in names:
        deciding = tracer.calls_of(name)
        on_kind = [f for f in deciding if f.receiver in kinds]
        if on_kind or deciding:
            return (on_kind or deciding)[-1]
    return tracer.first_call()


def _at_def(frame: Frame) -> Frame:
    """A function's frame at its ``def`` line (``co_firstlineno`` is its first decorator's)."""
    for line in range(frame.line, frame.line + 12):
        text = linecache.getline(frame.file_abs, line).strip()
        if text.startswith(("def ", "async def ")):
            return dataclasses.replace(frame, line=line)
    return frame


def _answer(frame: Frame | None, outcome: str, how: str) -> dict[str, Any]:
    if frame is not None and frame.statement.startswith("@"):
        frame = _at_def(frame)
    if frame is None:
        return {"outcome": outcome, "how": how, "location": "", "function": "", "statement": ""}
    return {"outcome": outcome, "how": how, "location": f"{frame.file}:{frame.line}", "function": frame.function,
            "statement": frame.statement[:160]}


Traced = tuple[Tracer, Violation | None, str]
"""A witness replayed under the tracer: the tracer, the violation (None: the clause held),
and why the replay could not be judged ("" when it could)."""


_DECODED: dict[str, Any] = {}
"""Witnesses decoded, by example type and JSON: the clauses of a shape share witnesses (an
example is immutable, and what the engine gets is converted from it afresh)."""


def _decoded(example_type: Any, witness: Any) -> Any:
    judged = judged_example(witness)  # the pass's own object, where this worker judged it
    if isinstance(judged, example_type):
        return judged
    key = json.dumps([example_type.__qualname__, witness], sort_keys=True, default=str)
    if key not in _DECODED:
        if len(_DECODED) >= 1 << 14:
            _DECODED.clear()
        _DECODED[key] = example_type.from_json(witness)
    return _DECODED[key]


def _trace(engine: Engine, roots: Sequence[str], clause: str, witness: Any) -> Traced:
    law_ = law(clause)
    example = _decoded(law_.example_type, witness)  # shared, as the passes share theirs: a law reads its example
    tracer = Tracer(roots)
    violation: Violation | None = None
    forget_answers()
    with _operations_traced(engine, tracer, clause):
        try:
            law_.check(engine, example)
        except Violation as v:
            violation = v
        except Exception as exc:  # noqa: BLE001 - the kit could not judge it: no location
            return tracer, None, f"{type(exc).__name__}: {exc}"
    return tracer, violation, ""


def locate(engine: Engine, roots: Sequence[str], item: Mapping[str, Any],
           traces: dict[str, Traced] | None = None) -> dict[str, Any]:
    """The engine location of one finding (``clause``, ``mode``, ``signature``, ``witness``).
    ``traces``: replays already traced, by clause and witness (the modes, and the findings of one
    witness, share one replay)."""
    clause, mode, signature = str(item["clause"]), str(item["mode"]), str(item["signature"])
    if clause in DERIVED:  # ERROR-OPTIMIZE-1: optimized-only:<source clause>:<source signature>
        _, clause, signature = signature.split(":", 2)
    key = json.dumps([clause, item["witness"]], sort_keys=True, default=str)
    traced = traces.get(key) if traces is not None else None
    if traced is None:
        traced = _trace(engine, roots, clause, item["witness"])
        if traces is not None:
            traces[key] = traced
    tracer, violation, failed = traced
    if failed:
        return {"outcome": _outcome(signature), "how": f"replay failed: {failed}",
                "location": "", "function": "", "statement": ""}
    outcome, kinds = _outcome(signature), _kinds(signature)
    same = violation is not None and signature in violation.signatures
    if mode == "optimized" and not same:
        asserts = [a for a in (_enclosing_assert(f) for exc, f in tracer.raised if isinstance(exc, AssertionError))
                   if a is not None]
        if asserts:
            return _answer(_prefer(asserts, kinds), "assert-only",
                           "the assert that fires on this witness without -O")
    if "raised-" in outcome or outcome == "message-omits":
        wanted = outcome.split("raised-", 1)[-1]
        cause = violation.__cause__ if violation is not None else None
        origins = [f for exc, f in tracer.raised if exc is cause] or \
                  [f for exc, f in tracer.raised if type(exc).__name__ == wanted] or [f for _, f in tracer.raised]
        if origins:
            return _answer(_statement_start(origins[-1]), outcome if outcome == "message-omits" else f"raises-{wanted}",
                           "the innermost engine frame of the exception")
    deciders = engine.deciders(outcome) if isinstance(engine, Locatable) else WRONG_ANSWER_DECIDERS
    return _answer(_decider(tracer, deciders, kinds), outcome, "the engine function that decided the answer")


_TRACES: dict[int, tuple[Engine, dict[str, Traced]]] = {}
"""Per engine (kept alive beside its entry), the replays traced so far in this worker: the modes,
the findings and the tasks of one worker share them (a check traces in parts, :class:`EarlyTracing`)."""
_TRACES_KEPT = 1 << 13


def locate_items(engine: Engine, items: Sequence[Mapping[str, Any]], emit: Emit | None = None) -> list[dict[str, Any]]:
    """:func:`locate` for each finding, one progress event each."""
    roots = engine_roots(engine)
    out = []
    held = _TRACES.get(id(engine))
    if held is None or held[0] is not engine or len(held[1]) > _TRACES_KEPT:
        held = _TRACES[id(engine)] = (engine, {})
    traces = held[1]  # one replay per clause and witness
    for item in items:
        begin(emit, {"clause": item["clause"], "phase": "locate"}, item["witness"])
        try:
            out.append(locate(engine, roots, item, traces))
        except Exception as exc:  # noqa: BLE001 - one unreadable witness does not stop the rest
            out.append({"outcome": _outcome(str(item["signature"])), "how": f"not located: {type(exc).__name__}: "
                        f"{exc}", "location": "", "function": "", "statement": ""})
    return out


def reach_tables(engine: Engine, tables: Sequence[Mapping[str, Any]], functions: Sequence[str],
                 emit: Emit | None = None) -> dict[str, dict[str, Any]]:
    """Which of ``functions`` (engine qualnames) the engine calls while it plans each corpus table
    (``{"name", "table": [[layer, spec JSON], ...], "hybrid", "block_outermost"}``), and which
    methods of those functions' classes it calls instead: where a latent defect's path stops."""
    from kvcontract.conformance.contract.codec import spec_from_json
    from kvcontract.conformance.contract.laws.common import to_engine

    if not isinstance(engine, Planning):
        return {}
    roots = engine_roots(engine)
    wanted = set(functions)
    owners = {f.rsplit(".", 1)[0] for f in functions if "." in f}
    out: dict[str, dict[str, Any]] = {}
    for item in tables:
        name = str(item["name"])
        begin(emit, {"clause": "reach", "phase": "plan"}, {"table": name})
        specs = {str(n): spec_from_json(s) for n, s in item["table"]}
        tracer = Tracer(roots)
        try:
            with tracer:
                engine.plan_layers({n: to_engine(engine, s) for n, s in specs.items()}, 1 << 34,
                                   hybrid=bool(item.get("hybrid", True)),
                                   block_outermost=bool(item.get("block_outermost", False)))
            failed = ""
        except Exception as exc:  # noqa: BLE001 - a table the engine cannot plan still says what ran
            failed = f"{type(exc).__name__}: {exc}"[:160]
        called = {f.function for f in tracer.calls}
        out[name] = {"called": sorted(called & wanted), "failed": failed,
                     "siblings": sorted(f for f in called if "." in f and f.rsplit(".", 1)[0] in owners)}
    return out
