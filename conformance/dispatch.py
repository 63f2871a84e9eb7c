"""Routing as an optional engine capability, and routed end-to-end attention (spec chapter DISPATCH).

An engine that routes attention invocations offers ``route(request) ->
Routing`` (:class:`RoutingEngine`); the dispatch laws find its router with
:func:`router_for`, which also knows the builtin engines by name (``reference``,
``vllm``) so that their adapters need no change. Engines without a router skip
the dispatch clauses with a reason.

:class:`RoutedBackend` is the end-to-end check: a kernels backend (see
:mod:`kvcontract.kernels.backends`) that splits a mixed batch into its causal
and non-causal invocations, routes each with an engine's router, runs each
routed part with the kernel of the path it was routed to, and writes every
row, so that :func:`kvcontract.kernels.check_batch` compares every row with
the ground truth. A misrouted causal block fails there numerically
(DISPATCH-ROWS-1, NUM-DISPATCH-1).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kvcontract import reference
from kvcontract.reference import QueryLenSupport, Routing, RoutingRequest

if TYPE_CHECKING:
    import torch

    from kvcontract.kernels import Backend, MLABatch

Router = Callable[[RoutingRequest], Routing]
"""Routes one invocation, or raises for an invocation the engine rejects."""


@runtime_checkable
class RoutingEngine(Protocol):
    """An engine that routes attention invocations (DISPATCH-PARTITION-1).

    Optional: the merge protocol (:class:`~kvcontract.conformance.engine.Engine`)
    does not require it. ``route`` raises (any ``Exception``) for an invocation
    the engine refuses (DISPATCH-NONCAUSAL-1, DISPATCH-UNIFORM-1).
    """

    name: str

    def route(self, request: RoutingRequest) -> Routing: ...


@functools.cache
def _vllm_router() -> Router:
    from kvcontract.conformance.vllm_dispatch import VllmRouter

    router: Router = VllmRouter().route
    return router


def router_for(engine: Any) -> Router | None:
    """The router of ``engine``, or None when it has none (DISPATCH-PARTITION-1).

    An engine's own ``route`` method wins (third-party adapters, dispatch
    mutants); otherwise the builtin engines are recognised by name: the
    reference routes with :func:`kvcontract.reference.route`, vLLM with its MLA
    metadata builder (:class:`~kvcontract.conformance.vllm_dispatch.VllmRouter`).
    """
    own = getattr(engine, "route", None)
    if callable(own):
        router: Router = own
        return router
    name = getattr(engine, "name", "")
    if name == "reference":
        return reference.route
    if name == "vllm":
        return _vllm_router()
    return None


def needs_router(engine: Any) -> str | None:
    """A law's ``requires``: the reason to skip when ``engine`` cannot route."""
    try:
        router = router_for(engine)
    except Exception as exc:  # noqa: BLE001 - an engine whose router cannot load skips, with the cause
        return f"{getattr(engine, 'name', engine)}'s router cannot be loaded: {type(exc).__name__}: {exc}"
    if router is None:
        return f"{getattr(engine, 'name', engine)} offers no router (no route method)"
    return None


# -- end to end: routed attention over a mixed batch ---------------------------------------


@dataclasses.dataclass(frozen=True)
class GroupSetting:
    """The group and backend an invocation runs on (everything but the batch)."""

    capability: bool = True
    backend_non_causal: bool = True
    decode_threshold: int = 4
    query_len_support: QueryLenSupport = QueryLenSupport.SINGLE_ONLY

    def request(self, query_lens: Sequence[int], seq_lens: Sequence[int], causal: bool) -> RoutingRequest:
        """The routing request of one invocation on this group."""
        return RoutingRequest(tuple(query_lens), tuple(seq_lens), causal=causal, capability=self.capability,
                              backend_non_causal=self.backend_non_causal,
                              decode_threshold=self.decode_threshold,
                              query_len_support=self.query_len_support)


class PathMismatch(RuntimeError):
    """A path was given requests it cannot serve (a uniform path, mixed lengths)."""


def _decode_kinds(support: QueryLenSupport, causal: bool, lens: Sequence[int]) -> list[Any]:
    """What the decode path computes for each request it was given (DISPATCH-ROWS-1).

    A SINGLE_ONLY path has no per-row causal extent: it flattens a multi-row
    request into rows that all see the request's keys (the non-causal
    visibility), right for a non-causal block and wrong for a causal one. A
    UNIFORM or VARLEN path computes a causal block causally; a UNIFORM path
    refuses mixed lengths.
    """
    from kvcontract.kernels import Kind

    if support is QueryLenSupport.UNIFORM and len({n for n in lens if n > 0}) > 1:
        raise PathMismatch(f"the uniform decode path was given query lengths {list(lens)}")
    kinds = []
    for n in lens:
        if n == 0:
            kinds.append(Kind.PADDING)
        elif n == 1:
            kinds.append(Kind.DECODE)
        elif causal and support is not QueryLenSupport.SINGLE_ONLY:
            kinds.append(Kind.VERIFY)
        else:
            kinds.append(Kind.DRAFT)
    return kinds


def _prefill_kinds(lens: Sequence[int]) -> list[Any]:
    """The prefill path is causal (NUM-PREFILL-1): a non-causal row routed there is computed causally."""
    from kvcontract.kernels import Kind

    return [Kind.PREFILL if n > 0 else Kind.PADDING for n in lens]


def _sub_batch(batch: MLABatch, requests: Sequence[int], kinds: Sequence[Any]) -> tuple[MLABatch, list[int]]:
    """The requests ``requests`` of ``batch`` as their own batch, and their rows in ``batch``."""
    import torch

    rows = [row for r in requests for row in batch.rows(r)]
    index = torch.tensor(requests, dtype=torch.int64, device=batch.device)
    lens = [len(batch.rows(r)) for r in requests]
    starts = torch.tensor([0, *lens], dtype=torch.int64).cumsum(0).to(torch.int32).to(batch.device)
    q = batch.q.index_select(0, torch.tensor(rows, dtype=torch.int64, device=batch.device))
    sub = dataclasses.replace(batch, q=q, block_table=batch.block_table.index_select(0, index).contiguous(),
                              seq_lens=batch.seq_lens.index_select(0, index).contiguous(),
                              query_start_loc=starts, kinds=tuple(kinds))
    return sub, rows


class RoutedBackend:
    """An engine's router and path kernels behind the kernels' backend interface (DISPATCH-ROWS-1).

    ``run`` splits the batch into its causal invocation (decode, verify and
    prefill requests) and its non-causal invocation (draft blocks), appends
    the batch's trailing padding to each, reorders each as an engine does
    before routing (shortest queries first), routes it with ``router``, and
    computes the first ``num_decodes`` requests with ``decode_backend`` and
    the rest with ``prefill_backend``, each as its path serves them
    (:func:`_decode_kinds`). A router that refuses an invocation makes the
    whole batch fail (the harness records the exception).
    """

    modes = frozenset({"decode", "verify", "draft", "prefill", "padding"})

    def __init__(self, name: str, router: Router, setting: GroupSetting, *,
                 decode_backend: Backend, prefill_backend: Backend) -> None:
        self.name = name
        self.router = router
        self.setting = setting
        self.decode_backend = decode_backend
        self.prefill_backend = prefill_backend
        self.description = (f"routed by {name}; decode path {decode_backend.name}, "
                            f"prefill path {prefill_backend.name}")
        self.routings: list[tuple[bool, tuple[int, ...], Routing]] = []
        """Every routing of the last runs: (causal, reordered query lengths, routing)."""

    def unavailable_reason(self, dtype: str) -> str | None:
        """Why a path kernel cannot run ``dtype`` here, or None."""
        reason: str | None = self.decode_backend.unavailable_reason(dtype)
        return reason or self.prefill_backend.unavailable_reason(dtype)

    def run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        """Route and compute every row of ``batch`` into ``out`` / ``lse``."""
        from kvcontract.kernels import Kind

        padding = [r for r, k in enumerate(batch.kinds) if k is Kind.PADDING]
        causal = [r for r, k in enumerate(batch.kinds) if k is not Kind.PADDING and k.causal]
        non_causal = [r for r, k in enumerate(batch.kinds) if k is Kind.DRAFT]
        for is_causal, requests in ((True, causal), (False, non_causal)):
            if requests:
                self._invocation(batch, sorted(requests, key=lambda r: len(batch.rows(r))) + padding,
                                 is_causal, out, lse)

    def _invocation(self, batch: MLABatch, requests: list[int], causal: bool,
                    out: torch.Tensor, lse: torch.Tensor) -> None:
        lens = [len(batch.rows(r)) for r in requests]
        routing = self.router(self.setting.request(lens, [batch.seq_len(r) for r in requests], causal))
        self.routings.append((causal, tuple(lens), routing))
        cut = routing.num_decodes
        if not 0 <= cut <= len(requests):
            raise PathMismatch(f"the router sent {cut} of {len(requests)} requests to the decode path")
        parts = (
            (requests[:cut], self.decode_backend,
             _decode_kinds(self.setting.query_len_support, causal, lens[:cut])),
            (requests[cut:], self.prefill_backend, _prefill_kinds(lens[cut:])),
        )
        for part, backend, kinds in parts:
            if not part or all(n == 0 for n in (len(batch.rows(r)) for r in part)):
                continue
            sub, rows = _sub_batch(batch, part, kinds)
            from kvcontract.kernels import poisoned_outputs

            o, row_lse = poisoned_outputs(sub)
            backend.run(sub, o, row_lse)
            if rows:
                import torch

                index = torch.tensor(rows, dtype=torch.int64, device=out.device)
                out.index_copy_(0, index, o.to(out.dtype))
                lse.index_copy_(0, index, row_lse.to(lse.dtype))


def path_backends(engine: Any) -> tuple[Backend, Backend]:
    """The (decode path, prefill path) kernels of ``engine`` for the end-to-end check.

    An engine may offer ``path_backends()`` itself. vLLM's decode path is its
    Triton MLA kernels (through the interpreter without a GPU); its prefill
    runs in another backend, so the reference kernel stands in for it. The
    reference (and any other engine) uses the reference kernel for both.
    """
    own = getattr(engine, "path_backends", None)
    if callable(own):
        paths: tuple[Backend, Backend] = own()
        return paths
    from kvcontract.kernels import get_backend

    if getattr(engine, "name", "") == "vllm":
        return get_backend("vllm-triton"), get_backend("reference")
    return get_backend("reference"), get_backend("reference")
