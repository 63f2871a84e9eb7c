"""What the chapters' oracles share: calling the engine, reading its answers, and
naming what went wrong.

The engine's exceptions are findings; the adapter's are the kit's own
(:class:`~kvcontract.conformance.contract.model.KitFailure`, reported as ``error``
records). A result that no valid spec can be (SPEC-VALID-1) is the engine's
finding, raised as :class:`~kvcontract.conformance.contract.model.Violation`.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from kvcontract import reference
from kvcontract.conformance.contract.expectations import Invalid, Raised
from kvcontract.conformance.contract.model import (
    Example,
    KitFailure,
    Violation,
    domain_of,
    signature,
)
from kvcontract.conformance.contract.repro import Call, MergeOf
from kvcontract.conformance.engines.protocol import Engine, FreshObjects, MergeAvailability
from kvcontract.reference import InvalidSpec, KVCacheSpec, Role, is_advisory, role_of


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


_KIND_NAMES = re.compile(r"\b(" + "|".join(sorted({k.__name__ for k in reference.SPEC_KINDS}, key=len,
                                                   reverse=True)) + r")\b")
_ATTRIBUTE = re.compile(r"has no attribute '(\w+)'")


def raised_signature(exc: BaseException, kinds: Sequence[str] | None, prefix: str = "raised") -> str:
    """The signature of an engine exception: its type, and — when its message names
    them — the kind and the attribute it tripped on (``'X' object has no attribute
    'f'``); else the example's ``kinds``, or with ``kinds=None`` the message's
    words (numbers dropped). The message decides, not the drawn values, so one
    defect is one finding however it was reached."""
    text = str(exc)
    named = sorted(set(_KIND_NAMES.findall(text)))
    attribute = _ATTRIBUTE.findall(text)
    outcome = f"{prefix}-{type(exc).__name__}"
    if named and attribute:
        return signature(outcome, named, attribute)
    if kinds is None:
        words = " ".join(re.sub(r"[^A-Za-z_ ]+", " ", text.splitlines()[0] if text else "").split()[:12])
        return f"{outcome}:{words}" if words else outcome
    return signature(outcome, kinds)


A = TypeVar("A")


class EngineAnswers(Generic[A]):
    """The engine's answer per input (or what it raised), asked once per worker: a chapter's
    clauses judge one answer (the grouping, plan and routing clauses share theirs). An entry
    holds its engine, so another engine object asks again; :func:`forget_answers` drops every
    entry, so that a finding is located while the engine runs, not from a remembered answer."""

    def __init__(self, kept: int = 1 << 14) -> None:
        self.kept = kept
        self._held: dict[Hashable, tuple[Engine, A]] = {}
        _ALL_ANSWERS.append(self)

    def ask(self, engine: Engine, key: Hashable, answer_of: Callable[[], A]) -> A:
        held = self._held.get(key)
        if held is not None and held[0] is engine:
            return held[1]
        answer = answer_of()
        if len(self._held) >= self.kept:
            self._held.clear()
        self._held[key] = (engine, answer)
        return answer

    def forget(self) -> None:
        self._held.clear()


_ALL_ANSWERS: list[EngineAnswers[Any]] = []


def forget_answers() -> None:
    """Drop every remembered engine answer: the next judgement asks the engine again."""
    for answers in _ALL_ANSWERS:
        answers.forget()


_FRESH: dict[int, tuple[Engine, bool]] = {}


def fresh_objects(engine: Engine) -> bool:
    """Whether ``engine``'s adapter builds fresh objects (:class:`FreshObjects`), asked once."""
    held = _FRESH.get(id(engine))
    if held is None or held[0] is not engine:
        held = _FRESH[id(engine)] = (engine, isinstance(engine, FreshObjects) and bool(engine.builds_fresh_objects()))
    return held[1]


def to_engine(engine: Engine, spec: KVCacheSpec) -> Any:
    """The engine's object for ``spec``, converted from a copy of it: the engine never holds
    one of the kit's own specs (an adapter may hand the spec itself over, or wrap it), so an
    engine that writes into its inputs cannot rewrite the example, which later clauses judge
    again, nor the symbolic search's building blocks (CrossHair then could not replay a path).
    A spec's fields are immutable values: a shallow copy is a separate spec. An adapter that
    declares :class:`~kvcontract.conformance.engines.protocol.FreshObjects` gets the spec itself."""
    try:
        return engine.to_engine(spec if fresh_objects(engine) else copy.copy(spec))
    except Exception as exc:
        raise KitFailure(f"{engine.name} adapter could not convert {type(spec).__name__}: "
                         f"{describe(exc)}") from exc


def engine_objects(engine: Engine, specs: Sequence[KVCacheSpec]) -> list[Any]:
    return [to_engine(engine, s) for s in specs]


def invalid_signature(exc: InvalidSpec, ex: Example) -> str:
    """What is invalid about the engine's result: its kind and the fields at fault (the
    example's kinds only where the rule names no kind), never the rest of the example."""
    return signature("invalid-result", [exc.kind] if exc.kind else ex.kinds(), exc.fields)


def from_engine(engine: Engine, obj: Any, ex: Example, call: Call | None = None) -> KVCacheSpec:
    """The engine's result of ``call`` (a merge) as a reference spec. A result that no
    valid spec can be (SPEC-VALID-1) is the engine's finding; any other failure is the kit's."""
    call = call or MergeOf()
    try:
        return engine.from_engine(obj)
    except InvalidSpec as exc:
        raise Violation(f"{call.label} returned an invalid spec: {exc}", Invalid(call, str(exc)),
                        invalid_signature(exc, ex)) from exc
    except Exception as exc:
        raise KitFailure(f"{engine.name} adapter could not read back {type(obj).__name__}: "
                         f"{describe(exc)}") from exc


def merge(engine: Engine, specs: Sequence[KVCacheSpec], ex: Example, call: MergeOf | None = None) -> KVCacheSpec:
    """The engine's merge of ``specs`` (compatible: they must merge), read back; ``call``
    is that merge in the snippet's terms (default: the example's specs as drawn)."""
    objs = engine_objects(engine, specs)
    call = call or MergeOf()
    try:
        merged = engine.merge(objs)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge of compatible specs raised {describe(exc)}", Raised(call),
                        signature(f"raised-{type(exc).__name__}", ex.kinds())) from exc
    return from_engine(engine, merged, ex, call)


def fields_differ(got: KVCacheSpec, want: KVCacheSpec, roles: set[Role] | None = None,
                  advisory: bool | None = False) -> list[str]:
    """Fields (of ``roles``) in which ``got`` differs from ``want``: ``["kind"]`` for
    another kind. Advisory fields (nothing reads their merged value) count only with
    ``advisory`` (then only they do): they are MERGE-ANNOTATION-2's alone, a SHOULD
    (ROLE-TABLE-1); ``advisory=None`` counts every field (a SHOULD clause's own check)."""
    if type(got) is not type(want):
        return ["kind"]
    return [f.name for f in dataclasses.fields(want)
            if (roles is None or role_of(f) in roles) and (advisory is None or is_advisory(f) == advisory)
            and getattr(got, f.name) != getattr(want, f.name)]


def advisory_field(ex: Example) -> bool:
    """Whether the example's odd field is advisory (nothing reads its merged value): a near
    miss on it is MERGE-ANNOTATION-2's, a SHOULD, not ERROR-DETECT-1's."""
    if not ex.field or not ex.specs:
        return False
    return any(f.name == ex.field and is_advisory(f) for f in dataclasses.fields(ex.specs[0]))


def fields_of(ex: Example) -> list[str]:
    """The example's odd field, as a signature's field list."""
    return [ex.field] if ex.field else []


# -- requirements ----------------------------------------------------------------------


def has_role(engine: Engine, role: Role) -> bool:
    domain = domain_of(engine)
    return any(role_of(f) is role and f.name not in domain.pinned_fields(kind)
               for kind in domain.kinds for f in dataclasses.fields(kind))


def needs_merge(engine: Engine) -> str | None:
    """The laws that merge: the engine's spec merge exists here (a release whose specs have no
    ``merge`` declares it, :class:`MergeAvailability`; its absence is not the engine's answer)."""
    return engine.merge_unavailable() if isinstance(engine, MergeAvailability) else None


def merging(requires: Callable[[Engine], str | None] | None = None) -> Callable[[Engine], str | None]:
    """``requires`` (the law's own requirement) after :func:`needs_merge`."""
    def both(engine: Engine) -> str | None:
        return needs_merge(engine) or (requires(engine) if requires is not None else None)
    return both


def needs_capability(engine: Engine) -> str | None:
    return None if has_role(engine, Role.CAPABILITY) else "the engine has no capability field"
