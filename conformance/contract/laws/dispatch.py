"""The dispatch laws: one per engine-checkable clause of spec chapter DISPATCH.

Each law draws routing requests (hypothesis; they shrink to a small batch),
routes them with the engine's router (:func:`~kvcontract.conformance.engines.dispatch.router_for`)
and compares with the reference's :func:`~kvcontract.reference.route`. Engines
without a router skip with a reason. Examples are :class:`DispatchExample`
(an :class:`~kvcontract.conformance.contract.model.Example` carrying a routing request);
violations render as a self-contained repro
(:func:`~kvcontract.conformance.contract.repro.render_snippet`, with the engine's router).

The suite (:mod:`kvcontract.conformance.contract.laws`) composes them with the merge laws.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hypothesis import strategies as st

from kvcontract import reference
from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract.codec import spec_to_json
from kvcontract.conformance.contract.expectations import (
    Accepted,
    CapabilityNeutral,
    DecodeRows,
    Message,
    Raised,
    Routed,
    RoutingPartition,
)
from kvcontract.conformance.contract.laws.common import EngineAnswers
from kvcontract.conformance.contract.model import (
    Example,
    KitFailure,
    Law,
    Shape,
    Violation,
    signature,
)
from kvcontract.conformance.contract.repro import RouteOf
from kvcontract.conformance.engines.dispatch import needs_router, router_for
from kvcontract.conformance.engines.protocol import Engine, Router
from kvcontract.reference import QueryLenSupport, Routing, RoutingRequest


@dataclasses.dataclass(frozen=True)
class DispatchExample(Example):
    """One drawn invocation (a :class:`RoutingRequest`); JSON-serialisable as a pinned witness."""

    request: RoutingRequest | None = None

    def to_json(self, spec_json: Callable[[reference.KVCacheSpec], dict[str, Any]] = spec_to_json) -> dict[str, Any]:
        """The request as JSON (it holds no spec: ``spec_json`` is not asked)."""
        r = self.request
        if r is None:
            return {}
        return {"dispatch": {"query_lens": list(r.query_lens), "seq_lens": list(r.seq_lens),
                             "causal": r.causal, "capability": r.capability,
                             "backend_non_causal": r.backend_non_causal,
                             "decode_threshold": r.decode_threshold,
                             "query_len_support": r.query_len_support.value}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DispatchExample:
        d = data.get("dispatch")
        if d is None:
            return cls()
        return cls(request=RoutingRequest(
            tuple(int(n) for n in d["query_lens"]), tuple(int(n) for n in d["seq_lens"]),
            causal=bool(d["causal"]), capability=bool(d["capability"]),
            backend_non_causal=bool(d["backend_non_causal"]), decode_threshold=int(d["decode_threshold"]),
            query_len_support=QueryLenSupport(d["query_len_support"])))


# -- strategies ---------------------------------------------------------------------------

_SUPPORTS = st.sampled_from(list(QueryLenSupport))
_FLAG = st.booleans()


@st.composite
def _requests(draw: st.DrawFn, lens: st.SearchStrategy[tuple[int, ...]], causal: bool,
              capability: st.SearchStrategy[bool] = _FLAG,
              backend: st.SearchStrategy[bool] = _FLAG) -> DispatchExample:
    query_lens = draw(lens)
    seq_lens = tuple(n + draw(st.integers(0, 40)) if n or draw(st.booleans()) else 0 for n in query_lens)
    return DispatchExample(request=RoutingRequest(
        query_lens, seq_lens, causal=causal, capability=draw(capability), backend_non_causal=draw(backend),
        decode_threshold=draw(st.sampled_from([1, 2, 3, 4, 6, 8])), query_len_support=draw(_SUPPORTS)))


def _causal_lens() -> st.SearchStrategy[tuple[int, ...]]:
    """Reordered-looking causal batches: a run of one length first (decodes, verify blocks or
    short prefills), then anything, then trailing padding."""
    head = st.tuples(st.integers(1, 12), st.integers(0, 3)).map(lambda t: (t[0],) * t[1])
    tail = st.lists(st.integers(0, 20), max_size=4).map(tuple)
    pad = st.integers(0, 2).map(lambda k: (0,) * k)
    return st.tuples(head, tail, pad).map(lambda t: t[0] + t[1] + t[2]).filter(bool)


def _uniform_block_lens() -> st.SearchStrategy[tuple[int, ...]]:
    return st.tuples(st.integers(1, 16), st.integers(1, 4), st.integers(0, 3)).map(
        lambda t: (t[0],) * t[1] + (0,) * t[2])


def _bad_block_lens() -> st.SearchStrategy[tuple[int, ...]]:
    """Non-causal query lengths DISPATCH-UNIFORM-1 forbids: mixed lengths, padding before an
    active request, or no active request."""
    mixed = st.lists(st.integers(1, 16), min_size=2, max_size=5).filter(lambda ls: len(set(ls)) > 1)
    interleaved = st.tuples(st.integers(1, 16), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2)).map(
        lambda t: (t[0],) * t[1] + (0,) * t[2] + (t[0],) + (0,) * t[3])
    leading = st.tuples(st.integers(1, 2), st.integers(1, 16), st.integers(1, 3)).map(
        lambda t: (0,) * t[0] + (t[1],) * t[2])
    empty = st.integers(1, 3).map(lambda k: (0,) * k)
    return st.one_of(mixed.map(tuple), interleaved, leading, empty)


def _causal(_domain: strat.Domain) -> Any:
    return _requests(_causal_lens(), causal=True)


def _missing_support(_domain: strat.Domain) -> Any:
    flags = st.sampled_from([(False, False), (False, True), (True, False)])
    return flags.flatmap(lambda f: _requests(st.one_of(_uniform_block_lens(), _bad_block_lens()), causal=False,
                                             capability=st.just(f[0]), backend=st.just(f[1])))


def _bad_block(_domain: strat.Domain) -> Any:
    return _requests(_bad_block_lens(), causal=False, capability=st.just(True), backend=st.just(True))


def _good_block(_domain: strat.Domain) -> Any:
    return _requests(_uniform_block_lens(), causal=False, capability=st.just(True), backend=st.just(True))


def _valid(domain: strat.Domain) -> Any:
    return st.one_of(_causal(domain), _good_block(domain))


# -- the systematic phase: a small grid of invocations ----------------------------------------

CAUSAL_GRID: tuple[tuple[int, ...], ...] = (
    (1,), (1, 1), (4,), (1, 4), (4, 1), (2, 2), (2, 2, 5), (3, 3, 0), (5, 5), (1, 1, 0), (8, 2), (16,),
    (2, 0, 0, 1), (1, 0, 2),
)
"""Causal query lengths: decodes, verify blocks, short and long prefills, padding; lengths on
both sides of every decode threshold (1, 2, 4)."""
GOOD_BLOCKS: tuple[tuple[int, ...], ...] = ((1,), (4,), (4, 4), (16, 16, 0), (3, 3, 3, 0, 0), (2,), (17, 17, 0),
                                            (64,))
"""Valid non-causal blocks, among them blocks longer than a kernel tile (16 rows)."""
BAD_BLOCKS: tuple[tuple[int, ...], ...] = ((2, 3), (4, 0, 4), (0, 4), (0,), (4, 4, 1), (1, 0, 1, 0), (2, 1, 3),
                                           (4, 3, 5, 0))
"""Invalid ones, among them mixed lengths whose sum is count x first ([2, 1, 3]: a sum test passes them)."""
FLAGS: tuple[tuple[bool, bool], ...] = ((True, True), (True, False), (False, True), (False, False))


def _grid(lens_set: tuple[tuple[int, ...], ...], causal: bool,
          flags: tuple[tuple[bool, bool], ...] = FLAGS) -> Iterator[DispatchExample]:
    """Every length pattern x capability/backend flags x query-length support x threshold
    x context (a cached prefix of 100 tokens, or none: the query is the whole sequence)."""
    for lens in lens_set:
        for capability, backend in flags:
            for support in QueryLenSupport:
                for threshold in (1, 2, 4):
                    for context in (100, 0):
                        seq = tuple(n + context if n else 0 for n in lens)
                        yield DispatchExample(request=RoutingRequest(
                            lens, seq, causal=causal, capability=capability, backend_non_causal=backend,
                            decode_threshold=threshold, query_len_support=support))


def _sys_causal(_domain: strat.Domain) -> Iterator[DispatchExample]:
    yield from _grid(CAUSAL_GRID, causal=True)


def _sys_missing_support(_domain: strat.Domain) -> Iterator[DispatchExample]:
    yield from _grid(GOOD_BLOCKS + BAD_BLOCKS, causal=False, flags=FLAGS[1:])


def _sys_bad_block(_domain: strat.Domain) -> Iterator[DispatchExample]:
    yield from _grid(BAD_BLOCKS, causal=False, flags=FLAGS[:1])


def _sys_good_block(_domain: strat.Domain) -> Iterator[DispatchExample]:
    yield from _grid(GOOD_BLOCKS, causal=False, flags=FLAGS[:1])


def _sys_valid(domain: strat.Domain) -> Iterator[DispatchExample]:
    yield from _sys_causal(domain)
    yield from _sys_good_block(domain)


# -- engine calls ---------------------------------------------------------------------------

def _router(engine: Engine) -> Router:
    router = router_for(engine)
    if router is None:
        raise KitFailure(f"{engine.name} offers no router")
    return router


_ANSWERS: EngineAnswers[Routing | Exception] = EngineAnswers()
"""The engine's answer per request: the chapter's clauses judge the same batches."""


def _outcome(engine: Engine, request: RoutingRequest) -> Routing | Exception:
    return _ANSWERS.ask(engine, request, lambda: _route(engine, request))


def _route(engine: Engine, request: RoutingRequest) -> Routing | Exception:
    router = _router(engine)
    try:
        return router(request)
    except KitFailure:  # the adapter could not drive the engine: the kit's error, not a finding
        raise
    except Exception as exc:  # noqa: BLE001 - the exception is what is judged
        return exc


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def _routed(engine: Engine, request: RoutingRequest) -> Routing:
    got = _outcome(engine, request)
    if isinstance(got, Exception):
        raise Violation(f"routing a valid invocation raised {_describe(got)}", Raised(RouteOf()),
                        _sig(f"raised-{type(got).__name__}", request))
    return got


# -- checks -----------------------------------------------------------------------------------

def _sig(outcome: str, request: RoutingRequest) -> str:
    """A dispatch finding's signature: the outcome, the path's query-length support,
    causal or not, and which of the capability / backend flags were set."""
    flags = [name for name, on in (("capability", request.capability),
                                   ("backend_non_causal", request.backend_non_causal)) if on]
    mode = "causal" if request.causal else "non-causal"
    return signature(outcome, [f"{request.query_len_support.name}/{mode}"], flags)


def _req(ex: Example) -> RoutingRequest:
    request = getattr(ex, "request", None)
    if not isinstance(request, RoutingRequest):
        raise TypeError(f"a dispatch law needs a DispatchExample, got {type(ex).__name__}")
    return request


def check_causal(engine: Engine, ex: Example) -> None:
    """DISPATCH-CAUSAL-1: a causal invocation routes the same with and without the capability."""
    request = _req(ex)
    plain = dataclasses.replace(request, capability=False, backend_non_causal=False)
    marked = dataclasses.replace(request, capability=True, backend_non_causal=True)
    a, b = _outcome(engine, plain), _outcome(engine, marked)
    show = [x.as_tuple() if isinstance(x, Routing) else _describe(x) for x in (a, b)]
    if show[0] != show[1]:
        raise Violation(f"the capability changed a causal routing: without it {show[0]}, with it {show[1]}",
                        CapabilityNeutral(), _sig("capability-changes-causal", request))


def check_noncausal(engine: Engine, ex: Example) -> None:
    """DISPATCH-NONCAUSAL-1: no capability or no backend support -> an explicit error."""
    request = _req(ex)
    got = _outcome(engine, request)
    if isinstance(got, Routing):
        missing = "the group's capability" if not request.capability else "the backend's support"
        raise Violation(f"a non-causal invocation without {missing} was routed: {got.as_tuple()}",
                        Accepted(RouteOf(), f"a non-causal invocation without {missing}"), _sig("routed", request))


def _names_lengths(message: str, lens: tuple[int, ...]) -> bool:
    numbers = set(re.findall(r"\d+", message))
    return str(list(lens)) in message or all(str(n) in numbers for n in set(lens))


def check_uniform(engine: Engine, ex: Example) -> None:
    """DISPATCH-UNIFORM-1: a non-uniform block or non-trailing padding -> an error naming the lengths."""
    request = _req(ex)
    got = _outcome(engine, request)
    lens = list(request.query_lens)
    if isinstance(got, Routing):
        raise Violation(f"a non-causal invocation with query lengths {lens} was routed: {got.as_tuple()}",
                        Accepted(RouteOf(), f"a non-causal invocation with query lengths {lens}"),
                        _sig("routed", request))
    if not _names_lengths(str(got), request.query_lens):
        raise Violation(f"the error does not name the query lengths {lens}: {_describe(got)}",
                        Message(RouteOf(), ((str(lens), (str(lens),)),)), _sig("message-omits-lengths", request))


def check_block(engine: Engine, ex: Example) -> None:
    """DISPATCH-BLOCK-1: a valid non-causal invocation is one decode block, padding included."""
    request = _req(ex)
    got = _routed(engine, request)
    want = Routing(request.num_reqs, 0, request.num_tokens, 0)
    if got != want:
        raise Violation(f"non-causal block routed as {got.as_tuple()}, contract: {want.as_tuple()}",
                        Routed(want, "non-causal block"), _sig("not-one-block", request))


def check_partition(engine: Engine, ex: Example) -> None:
    """DISPATCH-PARTITION-1: requests and tokens are split, decode requests are a prefix."""
    request = _req(ex)
    got = _routed(engine, request)
    lens = request.query_lens
    problems = []
    if not (0 <= got.num_decodes <= len(lens)) or got.num_decodes + got.num_prefills != len(lens):
        problems.append(f"{got.num_decodes} decodes + {got.num_prefills} prefills != {len(lens)} requests")
    if got.num_decode_tokens + got.num_prefill_tokens != sum(lens):
        problems.append(f"{got.num_decode_tokens} + {got.num_prefill_tokens} tokens != {sum(lens)}")
    elif 0 <= got.num_decodes <= len(lens) and got.num_decode_tokens != sum(lens[: got.num_decodes]):
        problems.append(f"{got.num_decode_tokens} decode tokens are not the rows of the first "
                        f"{got.num_decodes} requests ({sum(lens[: got.num_decodes])})")
    if problems:
        raise Violation("routing is not a partition: " + "; ".join(problems), RoutingPartition(),
                        _sig("not-a-partition", request))


def check_rows(engine: Engine, ex: Example) -> None:
    """DISPATCH-ROWS-1: the decode path of a causal invocation gets only requests it accepts."""
    request = _req(ex)
    got = _routed(engine, request)
    limit = reference.decode_threshold_of(request)
    decoded = request.query_lens[: max(0, got.num_decodes)]
    problems = [f"request {r} has {n} rows > {limit}" for r, n in enumerate(decoded) if n > limit]
    if request.query_len_support is not QueryLenSupport.VARLEN and len({n for n in decoded if n}) > 1:
        problems.append(f"mixed lengths {sorted({n for n in decoded if n})} on a "
                        f"{request.query_len_support.name} path")
    if problems:
        raise Violation(
            f"causal decode requests the {request.query_len_support.name} decode path cannot serve "
            f"(threshold {limit}): " + "; ".join(problems),
            DecodeRows(limit, 1 if request.query_len_support is not QueryLenSupport.VARLEN else len(request.query_lens)),
            _sig("decode-path-overrun", request))


def check_split(engine: Engine, ex: Example) -> None:
    """DISPATCH-SPLIT-1: the causal split equals the reference's."""
    request = _req(ex)
    got = _routed(engine, request)
    want = reference.route(request)
    if got != want:
        raise Violation(f"causal routing {got.as_tuple()}, contract: {want.as_tuple()}",
                        Routed(want, "causal routing"), _sig("split-differs", request))


# -- the laws ------------------------------------------------------------------------------

CAUSAL = Shape("causal", _causal, _sys_causal)
MISSING_SUPPORT = Shape("missing-support", _missing_support, _sys_missing_support)
BAD_BLOCK = Shape("bad-block", _bad_block, _sys_bad_block)
GOOD_BLOCK = Shape("good-block", _good_block, _sys_good_block)
VALID = Shape("valid", _valid, _sys_valid)
DISPATCH_OPS = frozenset({"route", "router"})


def _dispatch_law(clause: str, shape: Shape, check: Any) -> Law:
    return Law(clause, shape, check, needs_router, operations=DISPATCH_OPS, searched=frozenset({"route"}),
               example_type=DispatchExample)


DISPATCH_LAWS: tuple[Law, ...] = (
    _dispatch_law("DISPATCH-CAUSAL-1", CAUSAL, check_causal),
    _dispatch_law("DISPATCH-NONCAUSAL-1", MISSING_SUPPORT, check_noncausal),
    _dispatch_law("DISPATCH-UNIFORM-1", BAD_BLOCK, check_uniform),
    _dispatch_law("DISPATCH-BLOCK-1", GOOD_BLOCK, check_block),
    _dispatch_law("DISPATCH-PARTITION-1", VALID, check_partition),
    _dispatch_law("DISPATCH-ROWS-1", CAUSAL, check_rows),
    _dispatch_law("DISPATCH-SPLIT-1", CAUSAL, check_split),
)
"""Every engine-checkable clause of chapter DISPATCH, in draft order."""
