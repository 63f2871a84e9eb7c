"""The law model: what a clause is, as the runner sees it.

A :class:`Law` is one declarative record per engine-checkable clause: the
example type it draws, its *systematic* enumerator (the finite structure of
the contract, run first and deterministically), its hypothesis strategy (run
after, at random), its oracle (``check``: raises :class:`Violation`), what it
requires of the engine (else it skips, with the reason), and its snippet
renderer. A :class:`Violation` carries a *signature*: what went wrong in
engine terms (kinds, fields, outcome class), so that a finding is
clause x mode x signature, and every distinct one is reported.

Exceptions raised by the kit's own code while judging (a conversion, an
adapter) are :class:`KitFailure`: the runner reports them as ``error``
records, never as engine findings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract.codec import spec_from_json, spec_to_json
from kvcontract.conformance.contract.repro import Expectation, render_snippet
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.reference import KVCacheSpec
from kvcontract.spec import clause as catalogue_clause


@dataclasses.dataclass(frozen=True)
class Example:
    """One drawn input: a spec list (with an optional permutation, cut point or
    odd field), or a layer table. JSON-serialisable as a pinned witness."""

    specs: tuple[KVCacheSpec, ...] = ()
    table: tuple[tuple[str, KVCacheSpec], ...] = ()
    field: str | None = None
    order: tuple[int, ...] = ()
    cut: int = 0
    model: str = ""
    """The real model whose layer table (or layer specs) this is; empty for a drawn input."""
    rebuilt: bool = False
    """The members after the first hold their own value objects, equal values included (as
    values read back from a config do); a repro rebuilds them at run time, where equal literals
    would be one object."""

    def to_json(self, spec_json: Callable[[KVCacheSpec], dict[str, Any]] = spec_to_json) -> dict[str, Any]:
        """The JSON form; ``spec_json``: each spec's (:func:`spec_to_json`, or a cache of it)."""
        data: dict[str, Any] = {}
        if self.specs:
            data["specs"] = [spec_json(s) for s in self.specs]
        if self.table:
            data["table"] = {n: spec_json(s) for n, s in self.table}
        if self.field is not None:
            data["field"] = self.field
        if self.order:
            data["order"] = list(self.order)
        if self.cut:
            data["cut"] = self.cut
        if self.model:
            data["model"] = self.model
        if self.rebuilt:
            data["rebuilt"] = True
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Example:
        return cls(
            specs=tuple(spec_from_json(s) for s in data.get("specs", [])),
            table=tuple((n, spec_from_json(s)) for n, s in data.get("table", {}).items()),
            field=data.get("field"),
            order=tuple(data.get("order", ())),
            cut=int(data.get("cut", 0)),
            model=str(data.get("model", "")),
            rebuilt=bool(data.get("rebuilt", False)),
        )

    def kinds(self) -> list[str]:
        """The spec kinds in the example, sorted, each once."""
        return sorted({type(s).__name__ for s in self.specs} | {type(s).__name__ for _, s in self.table})


class Violation(Exception):
    """The engine broke a clause on an example.

    ``signature`` names the defect in engine terms (``outcome:kinds:fields``);
    two examples with one signature are one finding. ``expect`` is what the
    engine must do on the example (an
    :class:`~kvcontract.conformance.contract.repro.Expectation`): the repro
    snippet renders it as the check that ends in ``VIOLATION of <CLAUSE>`` while
    the engine still misbehaves.
    """

    def __init__(self, message: str, expect: Expectation, signature: str | list[str] = "") -> None:
        super().__init__(message)
        self.message = message
        self.expect = expect
        self.signatures: list[str] = ([signature] if isinstance(signature, str) else list(signature)) \
            or ["violation"]
        self.signatures = [s or "violation" for s in self.signatures]
        self.example: Example | None = None

    @property
    def signature(self) -> str:
        """The first (for one field, the only) signature of the finding."""
        return self.signatures[0]


class KitFailure(Exception):
    """The kit could not judge an example: its own code (an adapter's
    conversion, a strategy) raised. Reported as an ``error`` record."""


def signature(outcome: str, kinds: Iterable[str] = (), fields: Iterable[str] = ()) -> str:
    """``outcome:Kind+Kind:field,field`` — the canonical form of a finding's signature."""
    kind_part = "+".join(sorted(set(kinds)))
    field_part = ",".join(sorted(set(fields)))
    return ":".join(p for p in (outcome, kind_part, field_part) if p)


def per_field(outcome: str, kinds: Iterable[str], fields: Iterable[str]) -> list[str]:
    """One signature per field: a wrong value in two fields is two findings, each
    of which an example with only that field wrong also shows."""
    kinds = list(kinds)
    return [signature(outcome, kinds, [f]) for f in sorted(set(fields))] or [signature(outcome, kinds)]


class Renderer(Protocol):
    def __call__(self, engine: Engine, law_: Law, ex: Example, violation: Violation,
                 optimized: bool) -> str: ...


def no_requirement(_engine: Engine) -> str | None:
    return None


ENGINE_OPERATIONS: tuple[str, ...] = ("to_engine", "from_engine", "merge", "is_uniform", "group_layers",
                                      "plan_layers", "page_size", "route", "router", "introspect")
"""The engine operations a law's oracle may call (what a mutant may override);
``introspect`` is reading the engine's classes (ROLE-COVER-1)."""

SEARCH_OPERATIONS: tuple[str, ...] = ("merge", "mixed", "empty", "uniform", "group", "route")
"""The symbolic search's operation groups (``kvcontract symbolic --ops``): each
builds one family of inputs and judges the laws that declare it in ``searched``."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """An input shape: the examples a law judges, as a hypothesis strategy and a
    systematic enumerator over the engine's domain. Laws that judge the same
    inputs share a shape; the symbolic search's probes name the shapes of the
    examples they build, and judge every law of those shapes."""

    name: str
    strategy: Callable[[strat.Domain], Any]
    """Hypothesis strategy of examples, given the engine's domain."""
    systematic: Callable[[strat.Domain], Iterable[Example]] | None = None
    """The finite part of the input space, enumerated deterministically."""
    answers: Callable[[Sequence[Example]], tuple[Callable[[Any], None], Any]] | None = None
    """The reference's answers for a batch of the shape's examples, which its laws would each
    work out (they depend on no engine): ``(adopt, answers)``, ``adopt(answers)`` remembering
    them in a process that judges those examples (a check's worker hands them to the other,
    :mod:`kvcontract.conformance.run.share`)."""


@dataclasses.dataclass(frozen=True)
class Law:
    """A clause as a property over examples: the single record of what a clause is
    to the kit (its shape, oracle, requirement, the engine operations it calls, the
    symbolic operation groups that search it, the clauses derived from it)."""

    clause: str
    shape: Shape
    check: Callable[[Engine, Example], None]
    """The oracle: returns when the engine conforms, raises :class:`Violation` otherwise."""
    requires: Callable[[Engine], str | None] = no_requirement
    """The reason the law cannot run on an engine (it skips), or None."""
    operations: frozenset[str] = frozenset()
    """The engine operations the oracle calls (:data:`ENGINE_OPERATIONS`): a mutant
    that overrides none of them cannot fail this law."""
    searched: frozenset[str] = frozenset()
    """The symbolic operation groups (:data:`SEARCH_OPERATIONS`) whose probes build
    this law's shape; empty only with :attr:`not_searched`."""
    not_searched: str = ""
    """Why the symbolic search does not judge this law (its input is not a value)."""
    feeds: tuple[str, ...] = ()
    """Clauses judged from this law's findings (ERROR-OPTIMIZE-1 from its -O findings)."""
    reads_values: bool = False
    """The oracle reads the differing field's values (a message must name them): the
    symbolic search judges it only on members that all set the field."""
    engine_examples: Callable[[Engine], Iterable[Example]] | None = None
    """Examples that depend on the engine itself (its classes), run with the systematic ones."""
    example_type: type[Example] = Example
    render: Renderer | None = None
    """Snippet renderer; None: the one renderer of structured repros
    (:func:`kvcontract.conformance.contract.repro.render_snippet`)."""

    def __post_init__(self) -> None:
        unknown = (self.operations - set(ENGINE_OPERATIONS)) | (self.searched - set(SEARCH_OPERATIONS))
        if unknown:
            raise ValueError(f"law {self.clause}: unknown operations {sorted(unknown)}")
        if not self.searched and not self.not_searched:
            raise ValueError(f"law {self.clause}: no symbolic operation searches it and no reason is given")

    @property
    def strategy(self) -> Callable[[strat.Domain], Any]:
        return self.shape.strategy

    @property
    def systematic(self) -> Callable[[strat.Domain], Iterable[Example]] | None:
        return self.shape.systematic

    @property
    def chapter(self) -> str:
        return self.clause.split("-", 1)[0]

    @property
    def title(self) -> str:
        return catalogue_clause(self.clause).title

    @property
    def level(self) -> str:
        return catalogue_clause(self.clause).level

    def snippet(self, engine: Engine, ex: Example, violation: Violation, optimized: bool) -> str:
        renderer = self.render or render_snippet
        return renderer(engine, self, ex, violation, optimized)


def domain_of(engine: Engine) -> strat.Domain:
    """The strategies' domain for an engine: its kinds, its missing fields pinned,
    its own value sets (:func:`kvcontract.conformance.contract.strategies.domain_for`)."""
    return strat.domain_for(engine)
