"""Reference specs to and from plain JSON data, and as Python source.

Used for pinned witnesses in expectation files, for JSON reports, and for
repro snippets. The JSON form is the layer-table form of
:mod:`kvcontract.reference.schema` (``{"kind": ..., field: value}``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

from kvcontract.reference import KINDS_BY_NAME, KVCacheSpec, KVDtype


def value_to_json(value: Any) -> Any:
    if isinstance(value, KVDtype):
        return value.type_name
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return [value_to_json(v) for v in value]
    return value


def spec_to_json(spec: KVCacheSpec, *, full: bool = False) -> dict[str, Any]:
    """``{"kind": ..., field: value}``; only non-default fields unless ``full``."""
    data: dict[str, Any] = {"kind": type(spec).__name__}
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if full or f.default is dataclasses.MISSING or value != f.default:
            data[f.name] = value_to_json(value)
    return data


def spec_from_json(data: dict[str, Any]) -> KVCacheSpec:
    """The inverse of :func:`spec_to_json`, validated at the boundary."""
    from kvcontract.reference.schema import LayerTableError, _entry_model

    kind = KINDS_BY_NAME.get(data.get("kind", ""))
    if kind is None:
        raise LayerTableError(f"unknown spec kind in {data!r}")
    return _entry_model(kind).model_validate(data).to_spec()  # type: ignore[arg-type, no-any-return]


def render_call(
    class_name: str, spec: KVCacheSpec, render_value: Callable[[str, Any], str],
    skip: frozenset[str] = frozenset(),
) -> str:
    """``Kind(field=value, ...)`` with the non-default fields, values rendered by
    ``render_value(field_name, value)``."""
    args = []
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING and value == f.default:
            continue
        if f.name == "head_size_v" and value == getattr(spec, "head_size", None) and f.default is None:
            continue
        args.append(f"{f.name}={render_value(f.name, value)}")
    return f"{class_name}({', '.join(args)})"
