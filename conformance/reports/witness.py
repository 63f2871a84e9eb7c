"""The JSON shape of a witness: the example a finding is shown on, as reports and
expectation files carry it.

A witness is what :meth:`kvcontract.conformance.contract.model.Example.to_json` (or a
dispatch law's example) writes: a spec list (``specs``, each ``{"kind": ..., field:
value}``) with an optional odd ``field``, input ``order`` and ``cut`` point; a layer
``table`` (name -> spec); or one routing request (``dispatch``). ``{}`` is the empty
input (``merge([])``). :class:`Witness` checks that shape where a witness enters a
report or an expectations file; the spec fields themselves are validated when the
witness is replayed (:func:`kvcontract.conformance.contract.codec.spec_from_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import pydantic

from kvcontract.reference import KINDS_BY_NAME, QueryLenSupport

__all__ = ["DispatchWitness", "PinnedWitness", "SpecWitness", "Witness", "WitnessData", "describe_errors",
           "validate_witness"]


class SpecWitness(pydantic.BaseModel):
    """One spec: its kind and the fields that differ from their defaults."""

    model_config = pydantic.ConfigDict(extra="allow")

    kind: str

    @pydantic.field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS_BY_NAME:
            raise ValueError(f"unknown spec kind {kind!r}")
        return kind


class DispatchWitness(pydantic.BaseModel):
    """One routing request (chapter DISPATCH)."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)

    query_lens: list[int]
    seq_lens: list[int]
    causal: bool
    capability: bool
    backend_non_causal: bool
    decode_threshold: int
    query_len_support: str

    @pydantic.field_validator("query_len_support")
    @classmethod
    def _known_support(cls, value: str) -> str:
        known = [s.value for s in QueryLenSupport]
        if value not in known:
            raise ValueError(f"query_len_support must be one of {', '.join(known)}, not {value!r}")
        return value


class Witness(pydantic.BaseModel):
    """A pinned example, as JSON (see the module's docstring)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    specs: list[SpecWitness] = []
    table: dict[str, SpecWitness] = {}
    field: str | None = None
    order: list[int] = []
    cut: int = 0
    model: str = ""
    """The real model whose layer table or layer specs these are (its tables ship with the adapter)."""
    rebuilt: bool = False
    """The members after the first equal it, as other value objects (a repro builds them at run time)."""
    dispatch: DispatchWitness | None = None


def describe_errors(exc: pydantic.ValidationError, numbered: Sequence[str] = ()) -> str:
    """``exc`` in one line: ``where: what`` per error, ``; ``-separated. A list index after
    a name in ``numbered`` reads ``finding #2`` (1-based, as a person counts tables)."""
    parts = []
    for error in exc.errors():
        where: list[str] = []
        for item in error["loc"]:
            if isinstance(item, int) and where and where[-1] in numbered:
                where[-1] = f"{where[-1]} #{item + 1}"
            elif isinstance(item, int) and where:
                where[-1] = f"{where[-1]}[{item}]"
            else:
                where.append(str(item))
        message = str(error["msg"]).removeprefix("Value error, ")
        path = "".join((": " if i and " #" in where[i - 1] else "." if i else "") + w
                       for i, w in enumerate(where))
        parts.append(f"{path}: {message}" if path else message)
    return "; ".join(parts)


def validate_witness(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """``value`` unchanged when it has a witness's shape (None: no witness); else a
    :class:`ValueError` saying where it departs from :class:`Witness`."""
    if value is not None:
        try:
            Witness.model_validate(value)
        except pydantic.ValidationError as exc:
            raise ValueError(describe_errors(exc)) from None
    return value


WitnessData = Annotated[dict[str, Any] | None, pydantic.AfterValidator(validate_witness)]
"""A report's ``witness`` field: plain JSON data (written back exactly as read), checked
against :class:`Witness`."""

PinnedWitness = Annotated[dict[str, Any], pydantic.AfterValidator(validate_witness)]
"""An expectations file's ``witness``: required, checked against :class:`Witness`."""
