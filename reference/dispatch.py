"""The runtime dispatch contract: how one attention invocation is routed (spec chapter DISPATCH).

A KV-cache group's *capability* (``non_causal_multi_token_decode``, unioned by
merge, MERGE-UNION-1) says what the group's backend must be able to serve; the
*invocation* (``causal``, query lengths) says what is served now. :func:`route`
states the split between the two: it takes the group capability, the backend's
support, ``causal``, the query and sequence lengths, the configured decode
threshold and the backend's query-length support, and returns how many requests
and tokens go to the decode path and to the prefill path
(DISPATCH-PARTITION-1), or raises :class:`DispatchError` (DISPATCH-NONCAUSAL-1,
DISPATCH-UNIFORM-1). The batch is taken as reordered (decode candidates first),
as engines reorder it before routing; decode requests are a prefix of it.

Pure Python: no torch. Contracts in PEP 316 ``post:`` form are checked by
crosshair.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = [
    "DispatchError",
    "InvalidRoutingRequest",
    "QueryLenSupport",
    "Routing",
    "RoutingRequest",
    "decode_threshold_of",
    "route",
]


class QueryLenSupport(enum.Enum):
    """What a backend's decode path accepts per request (DISPATCH-ROWS-1).

    ``SINGLE_ONLY``: one query row per request; ``UNIFORM``: one multi-row
    block length shared by every active decode request; ``VARLEN``: any length
    up to the decode threshold. (vLLM 0.34.0's ``QueryLenSupport`` names.)
    """

    SINGLE_ONLY = "single_only"
    UNIFORM = "uniform"
    VARLEN = "varlen"


class DispatchError(ValueError):
    """An invocation the contract forbids routing (DISPATCH-NONCAUSAL-1, DISPATCH-UNIFORM-1).

    Raised explicitly, so also under ``python -O``; the message names the
    query lengths.
    """


class InvalidRoutingRequest(ValueError):
    """A routing request no engine could be given (negative lengths, no request)."""


@dataclasses.dataclass(frozen=True)
class RoutingRequest:
    """One attention invocation over one KV-cache group (DISPATCH-PARTITION-1).

    ``query_lens[r]`` query rows and ``seq_lens[r]`` keys for request ``r``
    (a zero-length request is padding, NUM-PAD-1); ``causal`` is the
    invocation's runtime metadata; ``capability`` the group's
    ``non_causal_multi_token_decode``; ``backend_non_causal`` whether the
    backend can flatten a non-causal block into decode rows;
    ``decode_threshold`` the configured widest decode request (vLLM: one plus
    the speculative tokens plus extra drafting slots); ``query_len_support``
    what the backend's decode path accepts.
    """

    query_lens: tuple[int, ...]
    seq_lens: tuple[int, ...]
    causal: bool = True
    capability: bool = False
    backend_non_causal: bool = False
    decode_threshold: int = 1
    query_len_support: QueryLenSupport = QueryLenSupport.SINGLE_ONLY

    def __post_init__(self) -> None:
        if not self.query_lens:
            raise InvalidRoutingRequest("an invocation needs at least one request")
        if len(self.query_lens) != len(self.seq_lens):
            raise InvalidRoutingRequest(
                f"{len(self.query_lens)} query lengths but {len(self.seq_lens)} sequence lengths")
        for r, (n, length) in enumerate(zip(self.query_lens, self.seq_lens, strict=True)):
            if n < 0 or length < 0:
                raise InvalidRoutingRequest(f"request {r}: negative length (query {n}, sequence {length})")
            if length < n:
                raise InvalidRoutingRequest(f"request {r}: {n} query rows but only {length} keys")
        if self.decode_threshold < 1:
            raise InvalidRoutingRequest(f"decode_threshold must be >= 1, got {self.decode_threshold}")

    @property
    def num_reqs(self) -> int:
        """Requests, padding included."""
        return len(self.query_lens)

    @property
    def num_tokens(self) -> int:
        """Query rows of the invocation."""
        return sum(self.query_lens)


@dataclasses.dataclass(frozen=True)
class Routing:
    """How an invocation is split: the first ``num_decodes`` requests (and their
    ``num_decode_tokens`` rows) take the decode path, the rest the prefill path
    (DISPATCH-PARTITION-1)."""

    num_decodes: int
    num_prefills: int
    num_decode_tokens: int
    num_prefill_tokens: int

    def as_tuple(self) -> tuple[int, int, int, int]:
        """``(decodes, prefills, decode tokens, prefill tokens)``."""
        return (self.num_decodes, self.num_prefills, self.num_decode_tokens, self.num_prefill_tokens)


def decode_threshold_of(request: RoutingRequest) -> int:
    """The widest request the decode path takes in a causal invocation (DISPATCH-ROWS-1,
    DISPATCH-CAUSAL-1): 1 for a single-row path, else the configured threshold.
    It depends neither on the group's capability nor on any non-causal block length.

    post: __return__ >= 1
    post: __return__ == 1 or request.query_len_support is not QueryLenSupport.SINGLE_ONLY
    """
    if request.query_len_support is QueryLenSupport.SINGLE_ONLY:
        return 1
    return request.decode_threshold


def _non_causal(request: RoutingRequest) -> Routing:
    lens = list(request.query_lens)
    if not request.capability:
        raise DispatchError(
            "non-causal multi-token invocation on a KV-cache group without the "
            f"non_causal_multi_token_decode capability (query lengths {lens})")
    if not request.backend_non_causal:
        raise DispatchError(
            "non-causal multi-token invocation on a backend that cannot flatten a non-causal "
            f"block into decode rows (query lengths {lens})")
    active = sum(1 for n in lens if n > 0)
    uniform = active > 0 and all(n == lens[0] for n in lens[:active])
    trailing = all(n == 0 for n in lens[active:])
    if not (uniform and trailing):
        raise DispatchError(
            "a non-causal invocation needs one uniform query block per active request, "
            f"followed only by zero-length padding requests; got query lengths {lens}")
    return Routing(request.num_reqs, 0, request.num_tokens, 0)


def _decode_prefix(request: RoutingRequest) -> int:
    """How many leading requests the decode path takes in a causal invocation (DISPATCH-SPLIT-1)."""
    lens = request.query_lens
    threshold = decode_threshold_of(request)
    uniform = request.query_len_support is not QueryLenSupport.VARLEN
    if max(lens) <= threshold and (not uniform or threshold <= 1):
        return len(lens)
    first = lens[0]
    if first > threshold:
        return 0
    count = 0
    for n in lens:
        fits = (n == first or n == 0) if uniform else n <= threshold
        if not fits:
            break
        count += 1
    return count


def route(request: RoutingRequest) -> Routing:
    """The contract's routing of one invocation (DISPATCH-CAUSAL-1 … DISPATCH-SPLIT-1).

    Causal: the decode path takes the longest prefix of requests it accepts —
    each at most :func:`decode_threshold_of` rows, and for a path that is not
    VARLEN all of one length (the first request's) or zero-length padding;
    the capability plays no part. Non-causal: needs the group's capability and
    the backend's support, and one uniform block per active request followed
    only by trailing padding; then every request, padding included, takes the
    decode path as one block. Anything else raises :class:`DispatchError`.

    raises: DispatchError
    post: __return__.num_decodes + __return__.num_prefills == len(request.query_lens)
    post: __return__.num_decode_tokens + __return__.num_prefill_tokens == sum(request.query_lens)
    post: __return__.num_decode_tokens == sum(request.query_lens[:__return__.num_decodes])
    post: __return__.num_decodes >= 0 and __return__.num_prefills >= 0
    post: request.causal or __return__.num_prefills == 0
    post: not request.causal or all(n <= decode_threshold_of(request) for n in request.query_lens[:__return__.num_decodes])
    """
    if not request.causal:
        return _non_causal(request)
    decodes = _decode_prefix(request)
    decode_tokens = sum(request.query_lens[:decodes])
    return Routing(decodes, request.num_reqs - decodes, decode_tokens, request.num_tokens - decode_tokens)
