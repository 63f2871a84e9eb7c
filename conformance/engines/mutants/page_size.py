"""A mutant of the page-size formula (the specs' ``page_size_bytes``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _register
from kvcontract.conformance.engines.protocol import EngineGroup
from kvcontract.reference import SPEC_KINDS, AttentionSpec, KVCacheSpec

_K_EQUALS_V_KINDS: dict[type[KVCacheSpec], type[KVCacheSpec]] = {}


def _k_equals_v_page(spec: KVCacheSpec, kind: type[KVCacheSpec]) -> int:
    if isinstance(spec, AttentionSpec) and spec.page_size_padded is None \
            and spec.state_content_bytes is None:
        itemsize: int = spec.dtype.itemsize
        return spec.num_heads * spec.num_states * 2 * spec.head_size * itemsize
    page: int = kind.page_size_bytes.__get__(spec)
    return page


def _k_equals_v_kind(kind: type[KVCacheSpec]) -> type[KVCacheSpec]:
    """``kind`` with the defective page-size formula (same name, fields and merge)."""
    if kind not in _K_EQUALS_V_KINDS:
        _K_EQUALS_V_KINDS[kind] = type(kind.__name__, (kind,), {
            "__module__": __name__, "__qualname__": kind.__qualname__,
            "page_size_bytes": property(lambda self: _k_equals_v_page(self, kind)),
        })
    return _K_EQUALS_V_KINDS[kind]


@_register
class WrongPageSize(Mutant):
    """MERGE-PAGE-1, GROUP-PAGE-1: the page size assumes K and V heads of equal size."""

    key = "wrong-page-size"
    description = ("the specs' page size is 2 x head_size per token (K = V), ignoring "
                   "head_size_v; grouping unifies pages with that formula")
    imitates = ("vLLM's early v1 AttentionSpec.page_size_bytes "
                "(2 * block_size * num_kv_heads * head_size * dtype_size), before head_size_v")
    expected_clauses = ("MERGE-PAGE-1", "GROUP-PAGE-1")

    def to_engine(self, spec: KVCacheSpec) -> Any:
        kind = _k_equals_v_kind(type(spec))
        return kind(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})

    def from_engine(self, obj: Any) -> KVCacheSpec:
        kind = next(k for k in type(obj).__mro__ if k in SPEC_KINDS)
        spec: KVCacheSpec = kind(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(kind)})
        return spec

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        return [EngineGroup(g.layer_names, self.from_engine(g.spec))
                for g in reference.group_layers(objs_by_layer)]

    def render_spec(self, spec: KVCacheSpec) -> str:
        return f"_mutant.to_engine({super().render_spec(spec)})"
