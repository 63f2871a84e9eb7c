"""Structured repros: the snippet's vocabulary and the one renderer that turns a
finding into a self-contained Python program.

An oracle raises :class:`~kvcontract.conformance.contract.model.Violation` with an
:class:`Expectation` (the catalogue: :mod:`kvcontract.conformance.contract.expectations`),
what the engine must do on the example. :func:`render_snippet` writes the header (the
clause, the interpreter, the finding's signature and message), the engine's imports and
the example built with the engine's own classes, and then the expectation's own check
lines. On the engine, a snippet ends in a line ``VIOLATION of <CLAUSE>: ...``
(``SystemExit``, exit status 1) while the engine still misbehaves, and prints a
``no violation`` line otherwise.

The snippet's vocabulary: ``specs`` (the example's specs), ``table`` (layer name ->
spec), ``request`` (a routing request); ``_merge(specs)``, ``_uniform(table)``,
``_groups(table)``, ``_group_pairs(groups)`` (``[(layer_names, spec), ...]``),
``_plan(table, memory, hybrid, block_outermost=False)``, ``_plan_view(plan)`` and ``ROUTE(request)`` call the engine. The engine calls an expectation names are
:class:`Call` records (:class:`MergeOf`, :class:`UniformOf`, :class:`GroupsOf`,
:class:`RouteOf`); a value it reads is a :data:`Subject`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvcontract.conformance.engines.protocol import Engine, Planning, RoutingEngine
from kvcontract.reference import KVCacheSpec, RoutingRequest

if TYPE_CHECKING:
    from kvcontract.conformance.contract.model import Example, Law, Violation


def esc(text: str) -> str:
    """``text`` as it must appear inside a single-quoted f-string of a snippet."""
    return (text.replace("\\", "\\\\").replace("'", "\\'").replace("{", "{{").replace("}", "}}")
            .replace("\n", "\\n"))


def indent(lines: Sequence[str]) -> list[str]:
    return ["    " + line for line in lines]


@dataclasses.dataclass(frozen=True)
class Context:
    """What an expectation renders against: the engine and the clause."""

    engine: Engine
    clause: str

    def fail(self, text: str) -> str:
        """A statement ending the snippet with ``VIOLATION of <clause>: `` and the
        snippet expression ``text``."""
        return f"raise SystemExit({f'VIOLATION of {self.clause}: '!r} + {text})"

    def spec(self, spec: KVCacheSpec) -> str:
        return self.engine.render_spec(spec)

    def page(self, obj_expr: str) -> str:
        return self.engine.render_page_size(obj_expr)


# -- the engine calls a snippet makes ---------------------------------------------------


class Call:
    """One engine call in the snippet's vocabulary."""

    label = "the call"
    promise = "it answers"
    uses_table = False

    def source(self) -> str:
        raise NotImplementedError

    def show(self, var: str) -> str:
        """An expression printing the call's result held in ``var``."""
        return var


@dataclasses.dataclass(frozen=True)
class MergeOf(Call):
    """``merge`` of the example's specs: as drawn, in ``order``, in two steps cut at
    ``cut`` (the merge of the halves' merges), or of no spec at all (``empty``)."""

    order: tuple[int, ...] = ()
    cut: int = 0
    empty: bool = False
    promise = "these specs merge"

    @property
    def label(self) -> str:  # type: ignore[override]
        return "merge([])" if self.empty else "merge"

    def source(self) -> str:
        if self.empty:
            return "_merge([])"
        if self.cut:
            return f"_merge([_merge(specs[:{self.cut}]), _merge(specs[{self.cut}:])])"
        if self.order:
            return f"_merge([specs[i] for i in {list(self.order)!r}])"
        return "_merge(specs)"


@dataclasses.dataclass(frozen=True)
class UniformOf(Call):
    """The engine's uniformity check of ``table`` (of no layer with ``empty``)."""

    empty: bool = False
    label = "is_uniform"
    promise = "uniformity answers"
    uses_table = True

    def source(self) -> str:
        return "_uniform({})" if self.empty else "_uniform(table)"


@dataclasses.dataclass(frozen=True)
class GroupsOf(Call):
    """The engine's grouping of ``table``."""

    label = "grouping"
    promise = "these layers group"
    uses_table = True

    def source(self) -> str:
        return "_groups(table)"

    def show(self, var: str) -> str:
        return f"_group_pairs({var})"


@dataclasses.dataclass(frozen=True)
class PlanOf(Call):
    """The engine's plan of ``table`` within ``memory`` bytes (chapter PLAN)."""

    memory: int
    hybrid: bool = True
    block_outermost: bool = False
    label = "planning"
    promise = "these layers are planned"
    uses_table = True

    def source(self) -> str:
        return f"_plan(table, {self.memory!r}, {self.hybrid!r}{', True' * self.block_outermost})"

    def show(self, var: str) -> str:
        return f"_plan_view({var})"


@dataclasses.dataclass(frozen=True)
class RouteOf(Call):
    """The engine's routing of ``request``."""

    label = "routing"
    promise = "it routes this invocation"

    def source(self) -> str:
        return "ROUTE(request)"


@dataclasses.dataclass(frozen=True)
class GroupSpec:
    """The spec of the engine's group of exactly the layers ``names`` (absent: no finding)."""

    names: tuple[str, ...]


Subject = MergeOf | GroupSpec
"""What a value expectation reads: a merge's result or one group's spec."""

GROUP_SETUP = ["groups = _groups(table)", "pairs = _group_pairs(groups)"]


def bind(subject: Subject, body: list[str]) -> list[str]:
    """``got = <subject>`` then ``body``; a group nobody built passes."""
    if isinstance(subject, MergeOf):
        return [f"got = {subject.source()}", *body]
    return [*GROUP_SETUP,
            f"got = next((spec for names, spec in pairs if set(names) == set({sorted(subject.names)!r})), None)",
            "if got is None:", f"    print('no violation: no {esc(label_of(subject))}')",
            "else:", *indent(body)]


def label_of(subject: Subject) -> str:
    return subject.label if isinstance(subject, MergeOf) else f"group of {', '.join(sorted(subject.names))}"


# -- the base of every expectation -------------------------------------------------------


class Expectation:
    """What the engine must do on the example; renders the snippet's check lines
    (the catalogue: :mod:`kvcontract.conformance.contract.expectations`)."""

    @property
    def uses_table(self) -> bool:
        """The check reads ``table`` (a spec example then gets one, a layer per spec)."""
        call = getattr(self, "call", None)
        subject = getattr(self, "subject", None)
        return bool(call is not None and call.uses_table) or isinstance(subject, GroupSpec)

    def lines(self, ctx: Context) -> list[str]:
        raise NotImplementedError


# -- the renderer ------------------------------------------------------------------------


def router_source(engine: Engine) -> list[str]:
    """Lines defining ``ROUTE`` for ``engine`` in a repro snippet."""
    if isinstance(engine, RoutingEngine):
        return engine.router_source()
    return ["raise SystemExit('this engine offers no router')"]


def render_request(request: RoutingRequest) -> str:
    """Source constructing ``request``."""
    return (f"RoutingRequest(query_lens={request.query_lens!r}, seq_lens={request.seq_lens!r}, "
            f"causal={request.causal!r}, capability={request.capability!r}, "
            f"backend_non_causal={request.backend_non_causal!r}, decode_threshold={request.decode_threshold!r}, "
            f"query_len_support=QueryLenSupport.{request.query_len_support.name})")


FRESH_SOURCE = [
    "def _fresh(spec):  # equal field values as new objects, as values read back from a config are",
    "    import dataclasses, enum",
    "    def new(v):",
    "        if v is None or isinstance(v, (bool, enum.Enum, float)): return v",
    "        if isinstance(v, str): return ''.join(list(v)) if len(v) > 1 else v",
    "        if isinstance(v, int): return int(str(v))",
    "        return tuple(new(x) for x in v) if isinstance(v, tuple) else v",
    "    copy = object.__new__(type(spec))",
    "    for name, value in vars(spec).items(): object.__setattr__(copy, name, new(value))",
    "    return copy",
]
"""The repro's :func:`~kvcontract.conformance.contract.values.rebuilt`, in the engine's classes."""


def _spec_setup(engine: Engine, ex: Example, uses_table: bool) -> list[str]:
    """The engine's imports, ``specs`` and ``table`` in its own classes, and its calls."""
    kinds = sorted({type(s) for s in ex.specs} | {type(s) for _, s in ex.table}, key=lambda k: k.__name__)
    lines = list(engine.snippet_imports(kinds))
    if ex.specs and ex.rebuilt:  # equal values as other objects: built at run time, not as literals
        lines += FRESH_SOURCE
        lines += ["specs = [", *(f"    {'_fresh(' if i else ''}{engine.render_spec(s)}{')' if i else ''},"
                                 for i, s in enumerate(ex.specs)), "]"]
    elif ex.specs:
        lines += ["specs = [", *(f"    {engine.render_spec(s)}," for s in ex.specs), "]"]
    if ex.table or uses_table:
        lines += ["table = {", *(f"    {n!r}: {engine.render_spec(s)}," for n, s in ex.table)]
        if not ex.table and ex.specs:
            lines += [f"    'layers.{i}': specs[{i}]," for i in range(len(ex.specs))]
        lines.append("}")
    lines += [f"def _merge(specs): return {engine.render_merge('specs')}",
              f"def _uniform(table): return {engine.render_is_uniform('table')}",
              f"def _groups(table): return {engine.render_group_layers('table')}",
              f"def _group_pairs(groups): return {engine.render_group_pairs('groups')}"]
    if isinstance(engine, Planning):
        try:
            call = engine.render_plan('table', 'memory', 'hybrid', 'block_outermost')
        except TypeError:  # an adapter that renders the layer-outermost layout only
            call = engine.render_plan('table', 'memory', 'hybrid')
        lines += [f"def _plan(table, memory, hybrid, block_outermost=False): return {call}",
                  f"def _plan_view(plan): return {engine.render_plan_view('plan')}"]
    return lines


def render_snippet(engine: Engine, law_: Law, ex: Example, violation: Violation, optimized: bool) -> str:
    """A self-contained Python program that reproduces ``violation`` on ``engine``."""
    interpreter = "python -O" if optimized else "python"
    lines = [f"# kvcontract repro: {law_.clause} ({law_.title}) on {engine.name} {engine.version}",
             f"# run with: {interpreter} repro.py",
             f"# finding [{violation.signature}]: {violation.message}"]
    request = getattr(ex, "request", None)
    if isinstance(request, RoutingRequest):
        lines += ["from kvcontract.reference import QueryLenSupport, RoutingRequest", *router_source(engine),
                  f"request = {render_request(request)}"]
    else:
        lines += _spec_setup(engine, ex, violation.expect.uses_table)
    lines += violation.expect.lines(Context(engine, law_.clause))
    return "\n".join(lines) + "\n"
