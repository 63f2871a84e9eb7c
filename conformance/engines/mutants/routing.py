"""Mutants of routing (``route``, spec chapter DISPATCH)."""

from __future__ import annotations

import dataclasses

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _register
from kvcontract.reference import QueryLenSupport, Routing, RoutingRequest

SPEC_BLOCK_LEN = 16
"""The DSpark draft block length the threshold mutant widens the decode path to."""


@_register
class CapabilityThreshold(Mutant):
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
        support = request.query_len_support
        if support is QueryLenSupport.SINGLE_ONLY:
            support = QueryLenSupport.UNIFORM  # a one-row path widened: same-length requests only
        return reference.route(dataclasses.replace(request, decode_threshold=threshold,
                                                   query_len_support=support))


@_register
class NonTrailingPadding(Mutant):
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


@_register
class IgnoresCapability(Mutant):
    """DISPATCH-NONCAUSAL-1: a non-causal invocation is served when only the backend supports it."""

    key = "dispatch-ignores-capability"
    description = "a non-causal invocation is routed when the backend supports it, whatever the group advertises"
    imitates = ""
    expected_clauses = ("DISPATCH-NONCAUSAL-1",)

    def route(self, request: RoutingRequest) -> Routing:
        if not request.causal and request.backend_non_causal:
            return reference.route(dataclasses.replace(request, capability=True))
        return reference.route(request)


@_register
class NonCausalSplit(Mutant):
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


@_register
class PaddingUncounted(Mutant):
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


KERNEL_TILE_ROWS = 16
"""The rows of one tile of a decode kernel: the block length the long-block mutant serves."""


@_register
class LongBlockToPrefill(Mutant):
    """DISPATCH-BLOCK-1: a valid non-causal block longer than a kernel tile goes to the causal prefill path."""

    key = "dispatch-long-block"
    description = (f"a valid non-causal block whose requests are longer than {KERNEL_TILE_ROWS} rows (one "
                   "kernel tile) is routed like a causal batch: to the prefill path")
    imitates = ""
    expected_clauses = ("DISPATCH-BLOCK-1",)

    def route(self, request: RoutingRequest) -> Routing:
        if (not request.causal and request.capability and request.backend_non_causal
                and max(request.query_lens, default=0) > KERNEL_TILE_ROWS):
            return reference.route(dataclasses.replace(request, causal=True))
        return reference.route(request)


@_register
class UniformBySum(Mutant):
    """DISPATCH-UNIFORM-1: a non-causal block counts as uniform when its lengths add up to count x first."""

    key = "dispatch-uniform-by-sum"
    description = ("a non-causal block's uniformity is tested as sum(lengths) == count * first, which "
                   "[2, 1, 3] passes")
    imitates = ""
    expected_clauses = ("DISPATCH-UNIFORM-1",)

    def route(self, request: RoutingRequest) -> Routing:
        lens = request.query_lens
        active = lens[: max((r + 1 for r, n in enumerate(lens) if n > 0), default=0)]
        if (not request.causal and request.capability and request.backend_non_causal and active
                and all(n > 0 for n in active) and sum(active) == len(active) * active[0]):
            return Routing(request.num_reqs, 0, request.num_tokens, 0)  # the defect: one uniform block
        return reference.route(request)
