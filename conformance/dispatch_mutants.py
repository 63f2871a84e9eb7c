"""Dispatch mutants: the reference engine with one realistic routing defect each (spec chapter DISPATCH).

Each is a :class:`~kvcontract.conformance.reference_engine.ReferenceEngine`
whose ``route`` (found by :func:`~kvcontract.conformance.dispatch.router_for`)
carries one defect; merge, uniformity and grouping are the reference's. Names
are ``mutant:dispatch-<x>``. Each declares ``description``, ``imitates`` and
``expected_clauses`` like the merge catalogue's mutants, so that
:data:`DISPATCH_MUTANTS` can be registered there.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from kvcontract import reference
from kvcontract.conformance.reference_engine import ReferenceEngine
from kvcontract.reference import DispatchError, QueryLenSupport, Routing, RoutingRequest

SPEC_BLOCK_LEN = 16
"""The DSpark draft block length the threshold mutant widens the decode path to."""


def _causal_split(request: RoutingRequest, threshold: int) -> Routing:
    """The reference's causal split (DISPATCH-SPLIT-1) with another decode threshold."""
    lens = request.query_lens
    uniform = request.query_len_support is not QueryLenSupport.VARLEN
    if max(lens) <= threshold and (not uniform or threshold <= 1):
        decodes = len(lens)
    elif lens[0] > threshold:
        decodes = 0
    else:
        decodes = 0
        for n in lens:
            if not ((n == lens[0] or n == 0) if uniform else n <= threshold):
                break
            decodes += 1
    tokens = sum(lens[:decodes])
    return Routing(decodes, len(lens) - decodes, tokens, sum(lens) - tokens)


class DispatchMutant(ReferenceEngine):
    """Base: the reference engine with a broken ``route``."""

    key: ClassVar[str] = ""
    description: ClassVar[str] = ""
    imitates: ClassVar[str] = ""
    expected_clauses: ClassVar[tuple[str, ...]] = ()
    gap: ClassVar[str] = ""

    def __init__(self) -> None:
        self.name = f"mutant:{self.key}"

    def route(self, request: RoutingRequest) -> Routing:
        return reference.route(request)


class CapabilityThreshold(DispatchMutant):
    """DISPATCH-CAUSAL-1: the group's capability widens the causal decode path."""

    key = "dispatch-capability-threshold"
    description = ("the router raises its decode threshold to the spec block length when the group has "
                   "the non_causal_multi_token_decode capability, for causal invocations too")
    imitates = ("the engine commit after the seed: MLAAttentionSpec.merge ORs non_causal_multi_token_decode, "
                "so the target's group got the capability and TritonMLA raised reorder_batch_threshold to "
                "the spec block length; short prefills and verify blocks went to the one-row decode path "
                "(NaN logits)")
    expected_clauses = ("DISPATCH-CAUSAL-1", "DISPATCH-ROWS-1", "DISPATCH-SPLIT-1")

    def route(self, request: RoutingRequest) -> Routing:
        if not (request.causal and request.capability):
            return reference.route(request)
        threshold = max(reference.decode_threshold_of(request), SPEC_BLOCK_LEN)
        return _causal_split(request, threshold)


class NonTrailingPadding(DispatchMutant):
    """DISPATCH-UNIFORM-1: zero-length requests are accepted anywhere in a non-causal block."""

    key = "dispatch-nontrailing-padding"
    description = "a non-causal block's uniformity is checked over its non-empty requests only"
    imitates = ""
    expected_clauses = ("DISPATCH-UNIFORM-1",)

    def route(self, request: RoutingRequest) -> Routing:
        if not request.causal and request.capability and request.backend_non_causal:
            active = {n for n in request.query_lens if n > 0}
            if len(active) == 1:
                return Routing(request.num_reqs, 0, request.num_tokens, 0)
        return reference.route(request)


class IgnoresCapability(DispatchMutant):
    """DISPATCH-NONCAUSAL-1: a non-causal invocation is served when only the backend supports it."""

    key = "dispatch-ignores-capability"
    description = "a non-causal invocation is routed when the backend supports it, whatever the group advertises"
    imitates = ""
    expected_clauses = ("DISPATCH-NONCAUSAL-1",)

    def route(self, request: RoutingRequest) -> Routing:
        if not request.causal and request.backend_non_causal:
            return reference.route(dataclasses.replace(request, capability=True))
        return reference.route(request)


class NonCausalSplit(DispatchMutant):
    """DISPATCH-BLOCK-1: a non-causal invocation is split by the causal threshold."""

    key = "dispatch-noncausal-split"
    description = "a valid non-causal block is split like a causal batch (long blocks go to the prefill path)"
    imitates = ""
    expected_clauses = ("DISPATCH-BLOCK-1",)

    def route(self, request: RoutingRequest) -> Routing:
        routing = reference.route(request)
        if not request.causal:
            return reference.route(dataclasses.replace(request, causal=True))
        return routing


class PaddingUncounted(DispatchMutant):
    """DISPATCH-PARTITION-1: trailing padding requests are routed nowhere."""

    key = "dispatch-padding-uncounted"
    description = "trailing zero-length padding requests are counted neither as decodes nor as prefills"
    imitates = ""
    expected_clauses = ("DISPATCH-PARTITION-1", "DISPATCH-BLOCK-1")

    def route(self, request: RoutingRequest) -> Routing:
        routing = reference.route(request)
        lens = request.query_lens
        padding = len(lens) - max((r + 1 for r, n in enumerate(lens) if n > 0), default=0)
        if routing.num_prefills:
            return dataclasses.replace(routing, num_prefills=routing.num_prefills - padding)
        return dataclasses.replace(routing, num_decodes=routing.num_decodes - padding)


DISPATCH_MUTANTS: dict[str, type[DispatchMutant]] = {
    cls.key: cls for cls in (CapabilityThreshold, NonTrailingPadding, IgnoresCapability, NonCausalSplit,
                             PaddingUncounted)
}
"""Dispatch mutant key (``dispatch-<x>``, without ``mutant:``) -> class; each class is its own factory."""


def load_dispatch_mutant(name: str) -> DispatchMutant:
    """The dispatch mutant called ``name`` (``mutant:`` prefix optional)."""
    key = name.removeprefix("mutant:")
    if key not in DISPATCH_MUTANTS:
        raise DispatchError(f"unknown dispatch mutant {name!r}; known: {', '.join(DISPATCH_MUTANTS)}")
    return DISPATCH_MUTANTS[key]()
