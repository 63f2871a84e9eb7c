"""The values the systematic phase sets fields to: a base value for each field
without a default, realistic alternatives per field name, and alternatives
derived from a field's default where no table lists it; all within the
engine's domain and the field's declared type."""

from __future__ import annotations

import enum
import typing
from typing import Any

from kvcontract.conformance.contract.strategies import ENUM_TYPES, Domain
from kvcontract.reference import KVCacheSpec, KVDtype

REQUIRED: dict[str, Any] = {
    "block_size": 16,
    "num_kv_heads": 1,
    "head_size": 64,
    "dtype": KVDtype.BFLOAT16,
    "sliding_window": 128,
    "attention_chunk_size": 256,
    "rswa_window": 512,
    "shapes": ((4, 256),),
    "dtypes": (KVDtype.BFLOAT16,),
    "page_size": 4096,
    "blocks_per_request": 4,
}
"""Values for fields without a default (the base spec of each kind)."""

ALTERNATIVES: dict[str, tuple[Any, ...]] = {
    "block_size": (32, 64),
    "num_kv_heads": (2, 8),
    "head_size": (128, 576),
    "dtype": (KVDtype.FLOAT16, KVDtype.FLOAT32, KVDtype.FLOAT8_E4M3),
    "head_size_v": (32, 128),
    "block_stride_alignment": (256, 4096),
    "max_tp_shards": (2, 8),
    "num_head_slots": (2, 16),
    "state_content_bytes": (128, 656),
    "tokens_per_state": (4, 2),
    "sliding_window": (4096, 256),
    "attention_chunk_size": (8192, 512),
    "cache_dtype_str": ("fp8_ds_mla", "auto"),
    "topk_buffer_width": (2048, 1024),
    "alignment": (4096, 576),
    "model_version": ("deepseek_v4", "other"),
    "rswa_window": (2048, 1024),
    "sink_len": (16, 64),
    "extra_retained_tokens": (3, 1),
    "shapes": (((3, 1024), (16, 64, 64)), ((2, 64, 32),)),
    "dtypes": ((KVDtype.FLOAT32,), (KVDtype.FLOAT16,)),
    "state_alignment": (128, 3),
    "mamba_cache_mode": ("align", "all"),
    "num_speculative_blocks": (2, 1),
    "page_size": (8192, 2048),
    "blocks_per_request": (8, 2),
}
"""Realistic other values per field name; a field not listed derives its own."""


def in_domain(value: Any, domain: Domain) -> bool:
    """Whether the engine accepts ``value`` (enumerated types: its value set)."""
    if isinstance(value, tuple):
        return all(in_domain(v, domain) for v in value)
    key = type(value).__name__
    return not (isinstance(value, enum.Enum) and key in ENUM_TYPES) or value in domain.values_of(key)


def derived_alternatives(default: Any) -> tuple[Any, ...]:
    """Other values for a field no table lists, derived from its default."""
    if isinstance(default, bool):
        return (not default,)
    if isinstance(default, enum.Enum):
        return tuple(m for m in type(default) if m is not default)
    if isinstance(default, int):
        return (default * 2 or 1, default + 1)
    if isinstance(default, str):
        return (f"{default}_other", "other")
    if default is None:
        return (64, 128, "other", True)
    return ()


def fits(kind: type[KVCacheSpec], name: str, value: Any) -> bool:
    """Whether ``value`` may stand in field ``name``: a derived alternative of an unset
    field (``64``, ``"other"``, ``True``) that is a bool is offered only where the
    declared type takes a bool, so a witness always loads back (``True`` is no
    ``int | None``, though Python's bool subclasses int)."""
    if not isinstance(value, bool):
        return True
    declared = _hints(kind).get(name)
    return declared is None or declared is bool or bool in typing.get_args(declared)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(kind: type[KVCacheSpec]) -> dict[str, Any]:
    """The declared field types of a kind (resolved once: the systematic phase asks per value)."""
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]


# -- equal values that are other objects -------------------------------------------------


def fresh_value(value: Any) -> Any:
    """``value`` as a new object of equal value, as a value read back from JSON or a config is:
    a string or an int beyond the interpreter's small-int cache, rebuilt (tuples of them too).
    Enum members, bools, None and floats are what they are."""
    if value is None or isinstance(value, bool | enum.Enum | float):
        return value
    if isinstance(value, str):
        return "".join(list(value)) if len(value) > 1 else value  # one-character strings are cached
    if isinstance(value, int):
        return int(str(value))
    if isinstance(value, tuple):
        return tuple(fresh_value(v) for v in value)
    return value


def holds_fresh_values(spec: KVCacheSpec) -> bool:
    """Whether :func:`fresh_value` gives some field of ``spec`` another object (a string field
    set, or an int beyond the small-int cache)."""
    return any(fresh_value(v) is not v for v in vars(spec).values())


def rebuilt(spec: KVCacheSpec) -> KVCacheSpec:
    """A spec equal to ``spec`` whose field values are other objects (:func:`fresh_value`)."""
    copy = object.__new__(type(spec))
    for name, value in vars(spec).items():
        object.__setattr__(copy, name, fresh_value(value))
    return copy
