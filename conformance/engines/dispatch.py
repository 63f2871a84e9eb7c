"""Routing as an optional engine capability (spec chapter DISPATCH).

An adapter that implements :class:`~kvcontract.conformance.engines.protocol.RoutingEngine`
(``router()``, ``router_unavailable()``, ``router_source()``) is checked
against the DISPATCH clauses; :func:`router_for` returns its router, and
:func:`needs_router` is the laws' requirement (skip with the reason). The
routed end-to-end numerics live in :mod:`kvcontract.kernels.routed`.
"""

from __future__ import annotations

from typing import Any

from kvcontract.conformance.engines.protocol import Router, RoutingEngine


def router_for(engine: Any) -> Router | None:
    """The router of ``engine``, or None when it has none (DISPATCH-PARTITION-1)."""
    if not isinstance(engine, RoutingEngine):
        return None
    return engine.router()


def needs_router(engine: Any) -> str | None:
    """A law's ``requires``: the reason to skip when ``engine`` cannot route."""
    try:
        router = router_for(engine)
    except Exception as exc:  # noqa: BLE001 - an engine whose router cannot load skips, with the cause
        return f"{getattr(engine, 'name', engine)}'s router cannot be loaded: {type(exc).__name__}: {exc}"
    if router is None:
        if isinstance(engine, RoutingEngine):
            return engine.router_unavailable()
        return f"{getattr(engine, 'name', engine)}'s adapter offers no router (it does not implement RoutingEngine)"
    return None
