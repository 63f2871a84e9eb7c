"""The reference model: the KV-cache spec merge contract stated as code.

``from kvcontract.reference import MLAAttentionSpec, merge`` — spec kinds whose
fields declare their roles, one generic :func:`merge` over those roles, and the
uniformity, grouping and planning built on it. Pure Python: no torch, no pydantic.
Every public object names the ``spec/SPEC.md`` clause it states.
"""

from __future__ import annotations

from typing import Any

from kvcontract.reference.dispatch import (
    DispatchError,
    InvalidRoutingRequest,
    QueryLenSupport,
    Routing,
    RoutingRequest,
    decode_threshold_of,
    route,
)
from kvcontract.reference.dtypes import KVDtype, KVQuantMode, MambaType, SparseCacheRole
from kvcontract.reference.merge import (
    Disagreement,
    GroupingError,
    IncompatibleSpecs,
    KVCacheGroup,
    full_allocation_form,
    group_layers,
    is_uniform,
    merge,
    unify_page_sizes,
)
from kvcontract.reference.planning import PlanGroup, is_uniform_type, plan_groups, unify_hybrid
from kvcontract.reference.roles import (
    AnnotationRule,
    Role,
    advisory_reason,
    is_advisory,
    relied_on_by,
    role_of,
    rule_of,
)
from kvcontract.reference.sizing import KVCachePlan, PlanTensor, plan, size_plan
from kvcontract.reference.specs import (
    BASE_KINDS,
    CONTAINER_KINDS,
    KINDS_BY_NAME,
    SPEC_KINDS,
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    InvalidSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    spec_fields,
)

__all__ = [
    "BASE_KINDS", "CONTAINER_KINDS", "KINDS_BY_NAME", "SPEC_KINDS", "AnnotationRule",
    "AttentionSpec", "ChunkedLocalAttentionSpec", "CircularBufferSpec", "CrossAttentionSpec",
    "Disagreement", "HiSparseHotSpec", "HiSparseResidentSpec", "HiddenStateCacheSpec",
    "EncoderOnlyAttentionSpec", "FullAttentionSpec", "GroupingError", "IncompatibleSpecs",
    "InvalidSpec", "KVCacheGroup", "KVCacheSpec", "KVDtype", "KVQuantMode", "MLAAttentionSpec",
    "MambaSpec", "MambaType", "RSWASpec", "Role", "SinkFullAttentionSpec", "SlidingWindowMLASpec",
    "SlidingWindowSpec", "SparseCacheRole", "group_layers", "is_uniform", "load_layer_table",
    "advisory_reason", "full_allocation_form", "is_advisory", "relied_on_by", "merge", "role_of", "rule_of", "spec_fields", "unify_page_sizes",
    # planning (spec chapter PLAN)
    "KVCachePlan", "PlanGroup", "PlanTensor", "is_uniform_type", "plan", "plan_groups", "size_plan",
    "unify_hybrid",
    # runtime dispatch (spec chapter DISPATCH)
    "DispatchError", "InvalidRoutingRequest", "QueryLenSupport", "Routing", "RoutingRequest",
    "decode_threshold_of", "route",
]


def __getattr__(name: str) -> Any:
    # The JSON boundary needs pydantic; import it only when asked for.
    if name == "load_layer_table":
        from kvcontract.reference.schema import load_layer_table

        return load_layer_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
