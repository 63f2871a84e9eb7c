"""The JSON boundary: a model's per-layer spec table, validated with pydantic.

A table file looks like::

    {"model": "deepseek-v3-dspark", "description": "...",
     "layers": [{"names": ["model.layers.{0..60}.self_attn.attn"],
                 "spec": {"kind": "MLAAttentionSpec", "block_size": 64, ...}}]}

``names`` entries may use one ``{a..b}`` range (inclusive). Each spec is one of
:data:`kvcontract.reference.SPEC_KINDS`, with that kind's fields only; dtypes
by name (``"bfloat16"``), other enums by value. Errors name the offending
entry and field (SPEC-VALID-1).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import pydantic

from kvcontract.reference.dtypes import KVDtype
from kvcontract.reference.specs import SPEC_KINDS, InvalidSpec, KVCacheSpec

_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")


class LayerTableError(ValueError):
    """A layer table that cannot be loaded; the message points at the bad entry."""


def _boundary_type(tp: Any) -> Any:
    """The JSON-side type of a dataclass field type."""
    if tp is KVDtype:
        return Literal[tuple(m.type_name for m in KVDtype)]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return Literal[tuple(m.value for m in tp)]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return Union[tuple(_boundary_type(a) for a in args)]  # noqa: UP007
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple[_boundary_type(args[0]), ...]  # type: ignore[misc]
        return tuple[tuple(_boundary_type(a) for a in args)]  # type: ignore[misc]
    if tp is int:
        return pydantic.StrictInt
    if tp is bool:
        return pydantic.StrictBool
    return tp


def _to_reference(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    if tp is KVDtype:
        return KVDtype.from_name(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _to_reference(inner[0], value) if len(inner) == 1 else value
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple(_to_reference(args[0], v) for v in value)
    return value


@cache
def _entry_model(kind: type[KVCacheSpec]) -> Any:
    hints = typing.get_type_hints(kind)
    field_defs: dict[str, Any] = {"kind": (Literal[kind.__name__], ...)}
    for f in dataclasses.fields(kind):
        required = f.default is dataclasses.MISSING
        field_defs[f.name] = (_boundary_type(hints[f.name]), ... if required else f.default)

    def build(self: Any) -> KVCacheSpec:
        values = {
            f.name: _to_reference(hints[f.name], getattr(self, f.name))
            for f in dataclasses.fields(kind)
        }
        return kind(**values)

    def check(self: Any) -> Any:
        try:
            build(self)
        except InvalidSpec as exc:
            raise ValueError(str(exc)) from None
        return self

    model: Any = pydantic.create_model(
        f"{kind.__name__}Entry",
        __config__=pydantic.ConfigDict(extra="forbid", frozen=True),
        __validators__={"check": pydantic.model_validator(mode="after")(check)},  # type: ignore[dict-item]
        **field_defs,
    )
    model.to_spec = build
    return model


def _spec_union() -> Any:
    members = tuple(_entry_model(k) for k in SPEC_KINDS)  # type: ignore[arg-type]  # classes hash
    return Annotated[Union[members], pydantic.Field(discriminator="kind")]  # noqa: UP007


def expand_names(pattern: str) -> list[str]:
    """``"l.{0..2}.attn"`` -> ``["l.0.attn", "l.1.attn", "l.2.attn"]``."""
    match = _RANGE.search(pattern)
    if match is None:
        return [pattern]
    lo, hi = int(match.group(1)), int(match.group(2))
    if hi < lo:
        raise ValueError(f"empty range in layer name pattern {pattern!r}")
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [f"{head}{i}{tail}" for i in range(lo, hi + 1)]


@cache
def _table_model() -> Any:
    entry: Any = pydantic.create_model(
        "LayerEntry",
        __config__=pydantic.ConfigDict(extra="forbid"),
        names=(list[str], pydantic.Field(min_length=1)),
        spec=(_spec_union(), ...),
    )
    return pydantic.create_model(
        "LayerTable",
        __config__=pydantic.ConfigDict(extra="forbid"),
        model=(str, ...),
        description=(str, ""),
        layers=(list[entry], pydantic.Field(min_length=1)),
    )


@dataclasses.dataclass(frozen=True)
class LayerTable:
    """A model's layers and their specs, in layer order."""

    model: str
    description: str
    specs_by_layer: dict[str, KVCacheSpec]


def _format_errors(exc: pydantic.ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        lines.append(f"{source}: {loc}: {err['msg']}")
    return "\n".join(lines)


def parse_layer_table(data: Any, source: str = "<table>") -> LayerTable:
    """Validate a decoded JSON layer table; :class:`LayerTableError` on bad input."""
    try:
        table: Any = _table_model().model_validate(data)
    except pydantic.ValidationError as exc:
        raise LayerTableError(_format_errors(exc, source)) from None
    specs: dict[str, KVCacheSpec] = {}
    for index, entry in enumerate(table.layers):
        spec = entry.spec.to_spec()
        for pattern in entry.names:
            try:
                names = expand_names(pattern)
            except ValueError as exc:
                raise LayerTableError(f"{source}: layers.{index}.names: {exc}") from None
            for name in names:
                if name in specs:
                    raise LayerTableError(
                        f"{source}: layers.{index}.names: layer {name!r} is listed twice"
                    )
                specs[name] = spec
    return LayerTable(table.model, table.description, specs)


def load_layer_table(path: str | Path) -> LayerTable:
    """Load and validate a layer-table JSON file (SPEC-VALID-1)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise LayerTableError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise LayerTableError(f"{path}: not JSON: {exc}") from None
    return parse_layer_table(data, str(path))


EXAMPLES_DIR = Path(__file__).parent / "examples"


def example_tables() -> dict[str, Path]:
    """The layer tables shipped with the kit, by file stem."""
    return {p.stem: p for p in sorted(EXAMPLES_DIR.glob("*.json"))}
