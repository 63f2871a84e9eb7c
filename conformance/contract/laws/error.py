"""The laws of chapter ERROR: specs that must not merge are rejected, with an
``AssertionError`` that survives ``python -O`` and names what disagrees.

ERROR-OPTIMIZE-1 has no oracle of its own: it is judged from the ``-O`` findings of
the laws that feed it (``feeds``)."""

from __future__ import annotations

import enum
from typing import Any

from kvcontract.conformance.contract import shapes
from kvcontract.conformance.contract.expectations import Accepted, Message, Raised
from kvcontract.conformance.contract.laws.common import (
    advisory_field,
    describe,
    engine_objects,
    fields_of,
    from_engine,
    merging,
    needs_merge,
    raised_signature,
)
from kvcontract.conformance.contract.model import Example, KitFailure, Law, Violation, signature
from kvcontract.conformance.contract.repro import MergeOf
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.reference import KVDtype


def expect_rejection(engine: Engine, ex: Example) -> BaseException | None:
    """The engine's exception for specs that must not merge; None when it merged
    them (into a valid spec or, equally accepted, an invalid one)."""
    objs = engine_objects(engine, ex.specs)
    try:
        merged = engine.merge(objs)
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:  # noqa: BLE001 - the exception is what is judged
        return exc
    try:
        from_engine(engine, merged, ex)
    except Violation:
        pass  # an invalid merged spec: accepted all the same
    return None


def _what(ex: Example) -> str:
    if ex.field:
        return f"differ in {ex.field}"
    return "are of different kinds" if len(ex.kinds()) > 1 else "differ in more than one field"


def _must_raise(ex: Example) -> Raised:
    """The repro of ERROR-TYPE-1 and ERROR-KIND-1: the merge raises an AssertionError."""
    return Raised(MergeOf(), "AssertionError", f"specs that {_what(ex)}")


def check_detect(engine: Engine, ex: Example) -> None:
    if advisory_field(ex):
        return  # nothing reads the field's merged value: MERGE-ANNOTATION-2 judges it, a SHOULD
    outcome = expect_rejection(engine, ex)
    if outcome is None:
        raise Violation(f"merge accepted specs that {_what(ex)}", Accepted(MergeOf(), f"specs that {_what(ex)}"),
                        signature("accepted", ex.kinds(), fields_of(ex)))


def check_type(engine: Engine, ex: Example) -> None:
    outcome = expect_rejection(engine, ex)
    if outcome is None and advisory_field(ex):
        return  # accepting an advisory disagreement is MERGE-ANNOTATION-2's; a wrong error type is not
    if outcome is None:
        raise Violation(f"merge accepted specs that {_what(ex)} (no error at all)", _must_raise(ex),
                        signature("accepted", ex.kinds(), fields_of(ex)))
    if not isinstance(outcome, AssertionError):
        raise Violation(f"incompatible specs raised {describe(outcome)}, not an AssertionError", _must_raise(ex),
                        signature(f"raised-{type(outcome).__name__}", ex.kinds(), fields_of(ex)))


def check_kind_error(engine: Engine, ex: Example) -> None:
    outcome = expect_rejection(engine, ex)
    if not isinstance(outcome, AssertionError):
        got = "accepted them" if outcome is None else f"raised {describe(outcome)}"
        pair = [f"{type(ex.specs[0]).__name__}>{type(ex.specs[1]).__name__}"]
        sig = signature("accepted", pair) if outcome is None else raised_signature(outcome, pair)
        raise Violation(f"merge of {type(ex.specs[0]).__name__} and {type(ex.specs[1]).__name__} {got}",
                        _must_raise(ex), sig)


def value_forms(value: Any) -> list[str]:
    """How a message may spell a field's value: ``repr``/``str``, a dtype's
    name with or without ``torch.``, an enum's name or value."""
    if isinstance(value, KVDtype):
        return [value.type_name, value.name, repr(value)]
    if isinstance(value, enum.Enum):
        return [value.name, str(value.value), repr(value)]
    if isinstance(value, tuple):
        return [str(value), repr(value), repr(list(value))]
    return [str(value), repr(value)]


def check_message(engine: Engine, ex: Example) -> None:
    """ERROR-MESSAGE-1: the message names the disagreeing field and both values."""
    outcome = expect_rejection(engine, ex)
    if outcome is None or not ex.field:
        return
    text = str(outcome)
    values: list[Any] = []
    for spec in ex.specs:
        value = getattr(spec, ex.field)
        if value is not None and all(repr(value) != repr(v) for v in values):
            values.append(value)  # a member that leaves a common annotation unset does not disagree
    missing = [] if ex.field in text else [f"the field {ex.field!r}"]
    missing += [f"the value {v!r}" for v in values if not any(form in text for form in value_forms(v))]
    if missing:
        wanted = ((ex.field, (ex.field,)), *((repr(v), tuple(value_forms(v))) for v in values))
        raise Violation(f"the error does not name {', '.join(missing)}: {describe(outcome)}",
                        Message(MergeOf(), wanted), signature("message-omits", ex.kinds(), fields_of(ex)))


EMPTY_MESSAGE_FORMS = ("at least one", "empty", "no spec", "no layer", "nothing to merge", "needs a layer",
                       "Empty", "No spec", "No layer")
"""Spellings of "a group needs a layer" an empty merge's message may use (ERROR-EMPTY-1)."""


def check_empty(engine: Engine, ex: Example) -> None:
    try:
        engine.merge([])
    except AssertionError as exc:
        if not any(form in str(exc) for form in EMPTY_MESSAGE_FORMS):
            raise Violation(f"merge([]) raised AssertionError({str(exc)!r}), which does not say that a group "
                            "needs a layer", Message(MergeOf(empty=True), (("that a group needs a layer",
                                                                            EMPTY_MESSAGE_FORMS),)),
                            signature("message-omits")) from exc
        return
    except KitFailure:  # the adapter's own failure: the kit's error, not a finding
        raise
    except Exception as exc:
        raise Violation(f"merge([]) raised {describe(exc)}, not an AssertionError",
                        Raised(MergeOf(empty=True), "AssertionError", "no specs"),
                        signature(f"raised-{type(exc).__name__}")) from exc
    raise Violation("merge([]) returned a spec", Raised(MergeOf(empty=True), "AssertionError", "no specs"),
                    signature("returned"))


def _needs_empty_merge(engine: Engine) -> str | None:
    return None if engine.supports_empty_merge else (
        f"{engine.name}'s adapter declares that its merge cannot be called with no spec")


ERROR_OPS = frozenset({"to_engine", "from_engine", "merge"})
_OPTIMIZE = ("ERROR-OPTIMIZE-1",)
_MERGE = frozenset({"merge"})

def _two_kinds(engine: Engine) -> str | None:
    """ERROR-KIND-1 merges two kinds: an engine with one (vLLM before 0.9) has none to merge."""
    from kvcontract.reference import SPEC_KINDS

    missing = set(engine.unsupported_kinds())
    kinds = [k.__name__ for k in SPEC_KINDS if k not in missing]
    return None if len(kinds) >= 2 else f"the engine has one spec kind ({', '.join(kinds) or 'none'}): no two to merge"


ERROR_LAWS: tuple[Law, ...] = (
    Law("ERROR-DETECT-1", shapes.NEAR_MISS, check_detect, needs_merge, operations=ERROR_OPS, searched=_MERGE, feeds=_OPTIMIZE),
    Law("ERROR-TYPE-1", shapes.NEAR_MISS, check_type, needs_merge, operations=ERROR_OPS, searched=_MERGE, feeds=_OPTIMIZE),
    Law("ERROR-MESSAGE-1", shapes.NEAR_MISS, check_message, needs_merge, operations=ERROR_OPS, searched=_MERGE,
        reads_values=True),
    Law("ERROR-KIND-1", shapes.MIXED_KINDS, check_kind_error, merging(_two_kinds), operations=ERROR_OPS,
        searched=frozenset({"mixed"}),
        feeds=_OPTIMIZE),
    Law("ERROR-EMPTY-1", shapes.NOTHING, check_empty, merging(_needs_empty_merge), operations=frozenset({"merge"}),
        searched=frozenset({"empty"})),
)
"""The laws of chapter ERROR, in SPEC.md order."""
