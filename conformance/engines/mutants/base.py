"""The catalogue's base: :class:`Mutant` (the reference engine plus the catalogue entry),
the registry (:data:`MUTANTS`, :data:`KNOWN_SURVIVORS`, ``@_register``) and loading by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import kvcontract
from kvcontract import reference
from kvcontract.conformance.engines.protocol import Router, UnknownEngine
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.reference import KVCacheSpec, Role, Routing, RoutingRequest, role_of


def _names(spec: KVCacheSpec, role: Role) -> list[str]:
    """Fields of ``spec`` with ``role``."""
    return [f.name for f in dataclasses.fields(spec) if role_of(f) is role]


class Mutant(ReferenceEngine):
    """Base of the catalogue: the reference engine, plus the catalogue entry.

    Subclasses override one operation. Repro snippets build the mutant with
    :func:`load_mutant` and call its operations, so a killed mutant's snippet
    reproduces the finding when run.
    """

    key: ClassVar[str] = ""
    description: ClassVar[str] = ""
    """The defect, in one line."""
    imitates: ClassVar[str] = ""
    """The real-world change the defect reproduces; empty when none is on record."""
    expected_clauses: ClassVar[tuple[str, ...]] = ()
    """Clauses the defect violates; the suite must fail at least one of them."""
    gap: ClassVar[str] = ""
    """For a known survivor: why the suite misses the defect, and what would catch it."""
    version = kvcontract.__version__

    def snippet_imports(self, kinds: Sequence[type[KVCacheSpec]]) -> list[str]:
        return [*super().snippet_imports(kinds),
                "from kvcontract.conformance.engines.mutants import load_mutant",
                f"_mutant = load_mutant({self.key!r})"]

    def render_merge(self, specs_expr: str) -> str:
        return f"_mutant.merge({specs_expr})"

    def render_is_uniform(self, table_expr: str) -> str:
        return f"_mutant.is_uniform({table_expr})"

    def render_group_layers(self, table_expr: str) -> str:
        return f"_mutant.group_layers({table_expr})"

    def render_page_size(self, obj_expr: str) -> str:
        return f"_mutant.page_size({obj_expr})"

    def render_plan(self, table_expr: str, memory_expr: str, hybrid_expr: str,
                    block_outermost_expr: str = "False") -> str:
        return (f"_mutant.plan_layers({table_expr}, {memory_expr}, hybrid={hybrid_expr}, "
                f"block_outermost={block_outermost_expr})")

    def render_plan_view(self, plan_expr: str) -> str:
        return (f"({plan_expr}.num_blocks, [(t.layer_names, t.size_bytes, t.offset, t.layer_stride, t.block_stride) "
                f"for t in {plan_expr}.tensors], [(g.layer_names, g.spec if g.spec is not None else "
                f"__import__('types').SimpleNamespace(kv_cache_specs=dict(g.member_specs or {{}}))) "
                f"for g in {plan_expr}.groups])")

    # -- routing: a mutant's router is its ``route`` (the reference's unless overridden)
    def route(self, request: RoutingRequest) -> Routing:
        return reference.route(request)

    def router(self) -> Router | None:
        return self.route

    def router_source(self) -> list[str]:
        return ["from kvcontract.conformance.engines.mutants import load_mutant",
                f"ROUTE = load_mutant({self.key!r}).route"]


MUTANTS: dict[str, type[Mutant]] = {}
"""The catalogue: mutant name (without the ``mutant:`` prefix) -> mutant class, in
catalogue order. The default profile kills every one of them (a test guards it)."""

KNOWN_SURVIVORS: dict[str, type[Mutant]] = {}
"""Mutants of real defects that the suite does not kill yet; each says why in
``gap`` (the law or strategy that would be needed). Loadable and runnable like
the catalogue, but not in the default run."""


def _register(cls: type[Mutant]) -> type[Mutant]:
    if not cls.key or not cls.description or not cls.expected_clauses \
            or cls.key in MUTANTS or cls.key in KNOWN_SURVIVORS:
        raise TypeError(f"{cls.__name__}: a mutant needs a unique key, a description and "
                        "expected clauses")
    cls.name = f"mutant:{cls.key}"
    (KNOWN_SURVIVORS if cls.gap else MUTANTS)[cls.key] = cls
    return cls


def mutant_class(name: str) -> type[Mutant]:
    """The class of mutant ``name`` (catalogue or known survivor; ``mutant:`` prefix optional).

    Raises :class:`~kvcontract.conformance.engines.protocol.UnknownEngine` listing the names.
    """
    key = name.removeprefix("mutant:")
    cls = MUTANTS.get(key) or KNOWN_SURVIVORS.get(key)
    if cls is None:
        raise UnknownEngine(f"unknown mutant {name!r}; known: {', '.join([*MUTANTS, *KNOWN_SURVIVORS])}")
    return cls


def load_mutant(name: str) -> Mutant:
    """The mutant engine called ``name`` (with or without the ``mutant:`` prefix).

    Raises :class:`~kvcontract.conformance.engines.protocol.UnknownEngine` listing the
    catalogue for an unknown name.
    """
    return mutant_class(name)()
