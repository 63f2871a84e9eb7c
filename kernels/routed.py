"""Routed end-to-end attention: an engine's router in front of path kernels (DISPATCH-ROWS-1).

:class:`RoutedBackend` is a kernels backend (see :mod:`kvcontract.kernels.backends`)
that splits a mixed batch into its causal and non-causal invocations, routes
each with a router (``RoutingRequest -> Routing``: the reference's
:func:`kvcontract.reference.route`, or an engine adapter's router), runs each
routed part with the kernel of the path it was routed to, and writes every
row, so that :func:`kvcontract.kernels.check_batch` compares every row with the
ground truth. A misrouted causal block fails there numerically
(DISPATCH-ROWS-1, NUM-DISPATCH-1). This module depends on the reference and
the kernels only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kvcontract.reference import QueryLenSupport, Routing, RoutingRequest

if TYPE_CHECKING:
    import torch

    from kvcontract.kernels import Backend, MLABatch

Router = Callable[[RoutingRequest], Routing]
"""Routes one invocation, or raises for an invocation the engine rejects."""


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
