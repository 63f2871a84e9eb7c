"""Symbolic checking: CrossHair's path search over the contract's input space,
judged by the clause oracles of ``kvcontract check``.

Inputs are valid by construction. Every input the search explores is a
sequence of *symbolic choices* (CrossHair branch decisions, one fresh boolean
per fork, kept in CrossHair's path tree) over the systematic phase's valid
building blocks (:mod:`kvcontract.conformance.contract.systematic`):

- per kind, its base spec and its *atoms*: one field set to another value the
  constructor accepts (the realistic alternatives, every value of the engine's
  own value set for an enumerated field — dtypes, quantisation modes, cache
  roles —, strings such as ``cache_dtype_str``, None-or-value for optional
  fields, dependent fields such as page padding derived by the kind itself);
- a *template*: the base, the base with one atom, or with two atoms that
  combine (pairs precomputed);
- a member: the template again, the template with a flag (a capability or an
  any-annotation) set, or the template with one more atom valid on it;
- the operation's shape: member count 0–4, permutations and cut points,
  kinds side by side, tables of several layers of one or two kinds, routing
  batches.

Each choice is a balanced binary tree of CrossHair forks, so the path tree
enumerates the space without repetition and every decision point gets its
share (a 4-member list, a rare enum member, the odd member in third position
are as likely as any other branch). A path builds an :class:`Example` and
calls the law oracles (``suite.law(clause).check``): a
:class:`~kvcontract.conformance.contract.model.Violation` is a finding, keyed by its
signature exactly as in ``check``, with the same witness and snippet.

Engine code runs on realized values (the choices are resolved before any
engine call), so native code and torch internals are no obstacle; the
search's symbolic part is the structure of the input, not the engine's
arithmetic. A value outside the building blocks (say block_size 48) is not
generated.

Search groups: ``merge:<Kind>`` (1–4 members of one kind), ``mixed`` (two
kinds), ``empty`` (``merge([])``, ``is_uniform({})``), ``uniform`` and
``group`` (layer tables of one or two kinds) and ``route`` (routing
batches). Each group keeps its own CrossHair path tree across batches; the
scheduler gives more of the next round to groups whose last batch still
discovered new coverage and drops groups whose tree is exhausted. The budget
is CPU seconds of the worker (``--budget``) and/or a number of paths
(``--iterations``), so a loaded machine does not silently search less.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
import sys
import threading
import time
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pydantic

from kvcontract import reference
from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.laws import (
    DERIVED,
    LAWS,
    OPERATION_CLAUSES,
    SEARCHED_CLAUSES,
    clauses_for,
    law,
)
from kvcontract.conformance.contract.model import (
    SEARCH_OPERATIONS,
    Example,
    KitFailure,
    Violation,
    domain_of,
)
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.conformance.reports.check import (
    FAILING,
    Mode,
    Record,
    Summary,
    render_findings,
    summarize,
)
from kvcontract.reference import (
    AnnotationRule,
    InvalidSpec,
    KVCacheSpec,
    QueryLenSupport,
    Role,
    RoutingRequest,
    role_of,
    rule_of,
)
from kvcontract.reports import ReportHeader, write_atomic

OPERATIONS = SEARCH_OPERATIONS
"""The operation groups a run can select (``--ops``)."""

DEFAULT_BUDGET_S = 120.0
"""CPU seconds of search per interpreter mode (the modes run concurrently)."""
FIRST_BATCH = 6
"""Paths per group in the first round: every group is tried early."""
BATCH = 24
"""Paths per group and round at full weight."""


class SearchError(ValueError):
    """A search that cannot run as asked (an unknown kind or operation): a usage error."""


# -- symbolic choices ---------------------------------------------------------------------------


class Chooser:
    """Symbolic choices on one CrossHair path: each ``choose(n)`` is a balanced
    tree of forks (fresh booleans in CrossHair's path tree), so the search
    explores every option of every decision without repeating a path."""

    def __init__(self, space: Any) -> None:
        self.space = space
        self.trail: list[tuple[str, int, int]] = []

    def choose(self, n: int, what: str) -> int:
        if n <= 0:
            raise ValueError(f"no option for {what}")
        lo, hi = 0, n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.space.smt_fork(desc=what, probability_true=(mid - lo) / (hi - lo)):
                hi = mid
            else:
                lo = mid
        self.trail.append((what, lo, n))
        return lo

    def pick(self, options: Sequence[Any], what: str) -> Any:
        return options[self.choose(len(options), what)]

    def flag(self, what: str) -> bool:
        return self.choose(2, what) == 1


class Rejected(Exception):
    """The input a path chose could not be built (counted: it should never happen)."""


# -- the building blocks: valid specs only -------------------------------------------------------


def _enum_values(kind: type[KVCacheSpec], name: str, domain: strat.Domain) -> tuple[Any, ...]:
    """Every value of the engine's own value set for an enumerated field ("" when not enumerated)."""
    key = strat._enum_key(kind, name)
    if key is None:
        return ()
    hints = typing.get_type_hints(kind)
    tp = hints.get(name)
    if typing.get_origin(tp) is tuple:
        return ()  # a tuple of enum values (Mamba state dtypes): realistic alternatives only
    return tuple(domain.values_of(key))


def _is_optional(kind: type[KVCacheSpec], name: str) -> bool:
    tp = typing.get_type_hints(kind).get(name)
    return type(None) in typing.get_args(tp)


@dataclasses.dataclass
class KindBlocks:
    """One kind's valid building blocks in an engine's domain."""

    kind: type[KVCacheSpec]
    base: KVCacheSpec
    atoms: list[tuple[str, Any]]
    """(field, value) pairs that the base accepts."""
    flags: list[str]
    """Capability and any-annotation fields (toggled on a template)."""
    templates: list[KVCacheSpec]
    """The base, the base with each atom, with each pair of atoms that combine."""
    singles: int
    """``templates[1:1 + singles]`` are the one-atom templates."""

    def with_atom(self, spec: KVCacheSpec, atom: tuple[str, Any]) -> KVCacheSpec | None:
        return _replace(spec, {atom[0]: atom[1]})


def _replace(spec: KVCacheSpec, changes: dict[str, Any]) -> KVCacheSpec | None:
    if "shapes" in changes and "dtypes" not in changes:
        current = getattr(spec, "dtypes", ())
        first = current[0] if current else reference.KVDtype.BFLOAT16
        changes = {**changes, "dtypes": tuple(first for _ in changes["shapes"])}
    try:
        out = dataclasses.replace(spec, **changes)
    except (InvalidSpec, TypeError, ValueError):
        return None
    try:
        if out.page_size_bytes <= 0:
            return None
    except (InvalidSpec, TypeError, ValueError, ArithmeticError):
        return None
    return out


class Blocks:
    """The building blocks of every kind of an engine's domain (computed once per kind)."""

    def __init__(self, domain: strat.Domain, accepts: Callable[[KVCacheSpec], Any] | None = None) -> None:
        self.domain = domain
        self.accepts = accepts
        self._accepted: dict[KVCacheSpec, bool] = {}
        self._kinds: dict[type[KVCacheSpec], KindBlocks | None] = {}
        self._valid: dict[tuple[type[KVCacheSpec], KVCacheSpec], list[tuple[str, Any]]] = {}

    def ok(self, spec: KVCacheSpec | None) -> bool:
        """A spec the engine accepts too (its constructor may be stricter than the reference's)."""
        if spec is None:
            return False
        if self.accepts is None:
            return True
        if spec not in self._accepted:
            try:
                self.accepts(spec)
                self._accepted[spec] = True
            except Exception:  # noqa: BLE001 - the engine rejects the value: not a building block
                self._accepted[spec] = False
        return self._accepted[spec]

    def of(self, kind: type[KVCacheSpec]) -> KindBlocks | None:
        if kind not in self._kinds:
            self._kinds[kind] = self._build(kind)
        return self._kinds[kind]

    def _build(self, kind: type[KVCacheSpec]) -> KindBlocks | None:
        base = sysm.base_spec(kind, self.domain)
        if base is None or not self.ok(base):
            return None
        atoms: list[tuple[str, Any]] = []
        flags: list[str] = []
        for f in sysm._settable(kind, self.domain):
            current = getattr(base, f.name)
            values: list[Any] = [getattr(v, f.name) for v in sysm.variants(kind, f.name, self.domain)]
            values += [v for v in _enum_values(kind, f.name, self.domain)]
            if current is not None and _is_optional(kind, f.name):
                values.append(None)
            seen: list[Any] = []
            for value in values:
                if value == current or any(value == s and type(value) is type(s) for s in seen):
                    continue
                if not self.ok(_replace(base, {f.name: value})):
                    continue
                seen.append(value)
                atoms.append((f.name, value))
            if role_of(f) is Role.CAPABILITY or (role_of(f) is Role.ANNOTATION
                                                 and rule_of(f) is AnnotationRule.ANY):
                if isinstance(current, bool):
                    flags.append(f.name)
        templates: list[KVCacheSpec] = [base]
        for atom in atoms:
            spec = _replace(base, {atom[0]: atom[1]})
            if spec is not None:
                templates.append(spec)
        singles = len(templates) - 1
        for a, b in itertools.combinations(atoms, 2):
            if a[0] == b[0]:
                continue
            spec = _replace(base, {a[0]: a[1], b[0]: b[1]})
            if spec is not None and self.ok(spec):
                templates.append(spec)
        return KindBlocks(kind, base, atoms, flags, templates, singles)

    def valid_atoms(self, blocks: KindBlocks, template: KVCacheSpec) -> list[tuple[str, Any]]:
        """The atoms that ``template`` accepts (and that change it)."""
        key = (blocks.kind, template)
        if key not in self._valid:
            self._valid[key] = [a for a in blocks.atoms if getattr(template, a[0]) != a[1]
                                and blocks.with_atom(template, a) is not None]
        return self._valid[key]

    # -- choices over the blocks ---------------------------------------------------------------

    def template(self, c: Chooser, blocks: KindBlocks) -> KVCacheSpec:
        shape = c.choose(3, "template")
        if shape == 0 or len(blocks.templates) == 1:
            return blocks.base
        singles = blocks.templates[1:1 + blocks.singles]
        pairs = blocks.templates[1 + blocks.singles:]
        if shape == 1 or not pairs:
            if not singles:
                return blocks.base
            spec = blocks.with_atom(blocks.base, _pick_atom(c, self.valid_atoms(blocks, blocks.base), "template"))
            if spec is None:
                raise Rejected(f"{blocks.kind.__name__}: an atom did not apply")  # pragma: no cover
            return spec
        pair: KVCacheSpec = c.pick(pairs, "template-pair")
        return pair

    def member(self, c: Chooser, blocks: KindBlocks, template: KVCacheSpec, what: str) -> KVCacheSpec:
        """The template again, with a flag set, or with one more atom."""
        shape = c.choose(3, what)
        if shape == 0:
            return template
        if shape == 1:
            flags = [n for n in blocks.flags if not getattr(template, n)
                     and self.ok(_replace(template, {n: True}))]
            if flags:
                spec = _replace(template, {c.pick(flags, what + "-flag"): True})
                if spec is None:
                    raise Rejected(f"{blocks.kind.__name__}: a flag cannot be set on {template}")
                return spec
        atoms = self.valid_atoms(blocks, template)
        if not atoms:
            return template
        spec = blocks.with_atom(template, _pick_atom(c, atoms, what))
        if spec is None:
            raise Rejected(f"{blocks.kind.__name__}: an atom did not apply")  # pragma: no cover
        return spec


def _pick_atom(c: Chooser, atoms: Sequence[tuple[str, Any]], what: str) -> tuple[str, Any]:
    """A field first, then one of its values: every field gets its share of the paths
    however many values its domain has (14 quantisation modes, 2 block sizes)."""
    fields = list(dict.fromkeys(name for name, _ in atoms))
    name = c.pick(fields, what + "-field")
    atom: tuple[str, Any] = c.pick([a for a in atoms if a[0] == name], what + "-value")
    return atom


# -- examples per operation, and the clauses that judge them --------------------------------------


@dataclasses.dataclass
class Probe:
    """One path's input: the examples, each with the clauses that judge it."""

    cases: list[tuple[Example, tuple[str, ...]]]
    features: set[str]


def _disagreement(specs: Sequence[KVCacheSpec]) -> tuple[bool, list[str]]:
    """Whether the reference merges ``specs``, and the disagreeing fields when not."""
    try:
        reference.merge(list(specs))
    except reference.IncompatibleSpecs as exc:
        return False, sorted({d.field for d in exc.disagreements})
    return True, []


def _one_field(specs: Sequence[KVCacheSpec], fields: Sequence[str]) -> str | None:
    """The one field the members disagree in (an ``Example.field``), or None."""
    names = {f.name for f in dataclasses.fields(specs[0])}
    return fields[0] if len(fields) == 1 and fields[0] in names else None


def _merge_probe(c: Chooser, blocks: Blocks, kb: KindBlocks) -> Probe:
    n = 1 + c.choose(4, "members")
    template = blocks.template(c, kb)
    specs = [template] + [blocks.member(c, kb, template, f"member{i}") for i in range(1, n)]
    if n > 1 and c.flag("odd-first"):
        specs = specs[1:] + specs[:1]  # the odd member first, the template last
    ok, fields = _disagreement(specs)
    features = {f"n={n}", f"ok={ok}", *(f"differ:{f}" for f in fields)}
    features |= {f"{k}.{f}" for k, f in sysm.exercised(specs)}
    cases: list[tuple[Example, tuple[str, ...]]] = []
    if ok:
        base = Example(specs=tuple(specs))
        if n == 1:
            cases.append((base, clauses_for("merge", ["one-spec"])))
        else:
            order = tuple(reversed(range(n))) if c.flag("order") else tuple([*range(1, n), 0])
            cases.append((dataclasses.replace(base, order=order), clauses_for("merge", ["permuted"])))
            cases.append((dataclasses.replace(base, cut=1 + c.choose(n - 1, "cut")), clauses_for("merge", ["split"])))
        cases.append((base, clauses_for("merge", ["compatible", "advisory", "uniform-cases"])))
    else:
        field = _one_field(specs, fields)
        ex = Example(specs=tuple(specs), field=field)
        # members that leave a common annotation unset are not part of the disagreement:
        # a law that reads the field's values (a message naming them) is not judged then
        values_set = field is not None and all(getattr(s, field) is not None for s in specs)
        cases.append((ex, clauses_for("merge", ["near-miss", "uniform-cases", "incompatible"], values_set=values_set)))
    return Probe(cases, features)


def _mixed_probe(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]]) -> Probe:
    if len(kinds) < 2:
        raise Rejected("mixed kinds need two kinds")
    first_kind = c.pick(list(kinds), "kind-a")
    related = [k for k in kinds if k is not first_kind and (issubclass(k, first_kind) or issubclass(first_kind, k))]
    if related and c.flag("related"):  # kinds that derive from one another: the case a merge may admit
        second_kind = c.pick(related, "kind-b")
    else:
        second_kind = c.pick([k for k in kinds if k is not first_kind], "kind-b")
    a, b = blocks.of(first_kind), blocks.of(second_kind)
    if a is None or b is None:
        raise Rejected("a kind without a base spec")
    first = blocks.template(c, a)
    second = blocks.template(c, b)
    if c.flag("aligned"):  # the second agrees with the first on every field they share
        shared = {f.name for f in sysm._settable(second_kind, blocks.domain)} & \
            {f.name for f in dataclasses.fields(first)}
        aligned = _replace(second, {n: getattr(first, n) for n in shared if getattr(first, n) is not None
                                    or _is_optional(second_kind, n)})
        second = aligned if aligned is not None else second
    ex = Example(specs=(first, second))
    features = {f"kinds={first_kind.__name__}>{second_kind.__name__}"}
    return Probe([(ex, clauses_for("mixed", ["mixed-kinds", "uniform-cases", "incompatible"]))], features)


def _table_specs(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]], max_layers: int) -> list[KVCacheSpec]:
    n = 1 + c.choose(max_layers, "layers")
    chosen = [c.pick(kinds, "kind-a")]
    if n > 1 and c.flag("two-kinds"):
        chosen.append(c.pick(kinds, "kind-b"))
    templates = {}
    for kind in chosen:
        kb = blocks.of(kind)
        if kb is None:
            raise Rejected(f"{kind.__name__} has no base spec")
        templates[kind] = (kb, blocks.template(c, kb))
    specs = []
    for i in range(n):
        kind = chosen[c.choose(len(chosen), f"layer{i}-kind")] if len(chosen) > 1 else chosen[0]
        kb, template = templates[kind]
        specs.append(template if i == 0 else blocks.member(c, kb, template, f"layer{i}"))
    return specs


def _uniform_probe(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]]) -> Probe:
    specs = _table_specs(c, blocks, kinds, 5)
    ok, fields = _disagreement(specs)
    same_kind = len({type(s) for s in specs}) == 1
    field = _one_field(specs, fields) if same_kind else None
    ex = Example(specs=tuple(specs), field=field)
    features = {f"n={len(specs)}", f"ok={ok}", "+".join(sorted({type(s).__name__ for s in specs}))}
    shapes = ["uniform-cases"] if ok else ["uniform-cases", "incompatible"]
    return Probe([(ex, clauses_for("uniform", shapes))], features)


def _group_probe(c: Chooser, blocks: Blocks, kinds: Sequence[type[KVCacheSpec]]) -> Probe:
    specs = _table_specs(c, blocks, kinds, 4)
    table = tuple((f"layers.{i}", s) for i, s in enumerate(specs))
    ok, _fields = _disagreement(specs)
    clauses = clauses_for("group", ["table", "uniform-table"] if ok else ["table"])
    features = {f"n={len(specs)}", f"ok={ok}", "+".join(sorted({type(s).__name__ for s in specs}))}
    features |= {f"{k}.{f}" for k, f in sysm.exercised(specs)}
    return Probe([(Example(table=table), clauses)], features)


ROUTE_LENGTHS = (0, 1, 2, 3, 4, 5, 8, 16)
ROUTE_THRESHOLDS = (1, 2, 3, 4, 6, 8)
ROUTE_CONTEXT = (0, 1, 7, 40)


def _route_probe(c: Chooser) -> Probe:
    from kvcontract.conformance.contract.laws.dispatch import DispatchExample

    causal = c.flag("causal")
    capability = c.flag("capability")
    backend = c.flag("backend")
    n = 1 + c.choose(5, "requests")
    if not causal and c.flag("block"):  # a uniform block: one length, then trailing padding
        length = c.pick(ROUTE_LENGTHS[1:], "block-length")
        active = 1 + c.choose(n, "active")
        lens = (length,) * active + (0,) * (n - active)
    else:
        lens = tuple(c.pick(ROUTE_LENGTHS, f"len{i}") for i in range(n))
    seqs = tuple(q + c.pick(ROUTE_CONTEXT, f"ctx{i}") for i, q in enumerate(lens))
    request = RoutingRequest(lens, seqs, causal=causal, capability=capability, backend_non_causal=backend,
                             decode_threshold=c.pick(ROUTE_THRESHOLDS, "threshold"),
                             query_len_support=c.pick(list(QueryLenSupport), "support"))
    ex = DispatchExample(request=request)
    if causal:
        shapes = ["causal", "valid"]
    elif not (capability and backend):
        shapes = ["missing-support"]
    elif _valid_block(lens):
        shapes = ["good-block", "valid"]
    else:
        shapes = ["bad-block"]
    clauses = clauses_for("route", shapes)
    features = {f"clauses={','.join(clauses)}", f"n={n}", f"support={request.query_len_support.name}"}
    return Probe([(ex, clauses)], features)


def _valid_block(lens: tuple[int, ...]) -> bool:
    active = [n for n in lens if n > 0]
    if not active or len(set(active)) > 1:
        return False
    last = max(i for i, n in enumerate(lens) if n > 0)
    return all(n > 0 for n in lens[: last + 1])


# -- the search --------------------------------------------------------------------------------


@dataclasses.dataclass
class GroupStats:
    """What one search group explored (reported per operation)."""

    operation: str
    kind: str = ""
    paths: int = 0
    """Paths CrossHair explored in this group."""
    reached_engine: int = 0
    """Paths whose input was built and judged by at least one oracle (the engine was called)."""
    rejected: int = 0
    """Paths whose input could not be built (rejected before the engine: a search bug)."""
    skipped: int = 0
    """Paths whose clauses all skip on this engine (e.g. routing without a router)."""
    kit_errors: int = 0
    findings: int = 0
    exhausted: bool = False
    """CrossHair's path tree is fully explored: every input of the group was judged."""
    cpu_seconds: float = 0.0
    features: int = 0
    """Distinct coverage features seen (kinds x fields exercised, shapes, outcomes)."""
    first_finding_s: float | None = None

    @property
    def name(self) -> str:
        return f"{self.operation}:{self.kind}" if self.kind else self.operation


class _Proportional:
    """CrossHair pathing oracle that takes each fork with the probability the chooser
    asks for (the share of options on its side), so every option of a decision is
    equally likely until its subtree is exhausted. (CrossHair's default oracle favours
    the false side of a fresh fork 3:1, which starves the low options of a choice.)"""

    def pre_path_hook(self, space: Any) -> None:
        pass

    def post_path_hook(self, path: Any) -> None:
        pass

    def decide(self, root: Any, node: Any, engine_probability: float | None) -> float:
        return 0.5 if engine_probability is None else engine_probability


class Group:
    """One search group: its path tree (kept across batches), its builder, its stats."""

    def __init__(self, operation: str, kind: str, build: Callable[[Chooser], Probe], seed_value: int) -> None:
        from crosshair.statespace import RootNode

        self.stats = GroupStats(operation, kind)
        self.build = build
        self.root = RootNode()
        self.root._random = random.Random(f"{seed_value}:{operation}:{kind}")
        self.root.pathing_oracle = _Proportional()  # type: ignore[assignment]
        self.seen: set[str] = set()
        self.weight = 1.0
        self.quiet_rounds = 0
        self.new_features = 0


ALL_KINDS = {k.__name__: k for k in reference.SPEC_KINDS}


class Search:
    """The symbolic search against one engine in this interpreter."""

    def __init__(self, engine: Engine, *, operations: Sequence[str] = OPERATIONS,
                 kinds: Sequence[str] | None = None, clauses: Sequence[str] | None = None,
                 expectations: Any = None, seed_value: int = 0,
                 on_finding: Callable[[Record], None] | None = None,
                 on_stats: Callable[[list[GroupStats]], None] | None = None) -> None:
        unknown_ops = [o for o in operations if o not in OPERATIONS]
        if unknown_ops:
            raise SearchError(f"unknown operation(s) {', '.join(unknown_ops)}; choose from {', '.join(OPERATIONS)}")
        self.engine = engine
        self.domain = domain_of(engine)
        self.optimized = bool(sys.flags.optimize)
        self.mode = "optimized" if self.optimized else "normal"
        engine_kinds = {k.__name__: k for k in self.domain.kinds}
        if kinds:
            unknown = [k for k in kinds if k not in engine_kinds]
            if unknown:
                raise SearchError(f"unknown spec kind(s) {', '.join(unknown)} for {engine.name}; choose from "
                                  f"{', '.join(engine_kinds)}")
            self.kinds = [engine_kinds[k] for k in kinds]
        else:
            self.kinds = list(self.domain.kinds)
        wanted = set(clauses) if clauses else SEARCHED_CLAUSES
        self.skips = {c: law(c).requires(engine) for c in SEARCHED_CLAUSES if c in wanted}
        self.active = {c for c, why in self.skips.items() if not why}
        self.blocks = Blocks(self.domain, accepts=engine.to_engine)
        self.expectations = expectations
        self.on_finding = on_finding
        self.on_stats = on_stats
        self.records: dict[tuple[str, str], Record] = {}
        self.errors: dict[str, Record] = {}
        self.start_cpu = time.process_time()
        self.groups = self._groups(operations, seed_value)

    def _groups(self, operations: Sequence[str], seed_value: int) -> list[Group]:
        groups = []
        grouping = [k for k in strat.grouping_domain(self.domain).kinds if k in self.kinds]
        for op in operations:
            if not set(OPERATION_CLAUSES[op]) & self.active:
                continue
            if op == "merge":
                for kind in self.kinds:
                    kb = self.blocks.of(kind)
                    if kb is not None:
                        groups.append(Group(op, kind.__name__, functools.partial(
                            _merge_probe, blocks=self.blocks, kb=kb), seed_value))
            elif op == "mixed" and len(self.kinds) > 1:
                groups.append(Group(op, "", functools.partial(_mixed_probe, blocks=self.blocks,
                                                              kinds=self.kinds), seed_value))
            elif op == "empty":
                groups.append(Group(op, "", lambda c: Probe([(Example(), clauses_for("empty", ["nothing"]))], {"empty"}),
                                    seed_value))
            elif op == "uniform":
                groups.append(Group(op, "", functools.partial(_uniform_probe, blocks=self.blocks,
                                                              kinds=self.kinds), seed_value))
            elif op == "group" and grouping:
                groups.append(Group(op, "", functools.partial(_group_probe, blocks=self.blocks,
                                                              kinds=grouping), seed_value))
            elif op == "route":
                groups.append(Group(op, "", _route_probe, seed_value))
        return groups

    # -- one path ---------------------------------------------------------------------------------

    def _judge(self, group: Group, c: Chooser) -> None:
        stats = group.stats
        try:
            probe = group.build(c)
        except Rejected:
            stats.rejected += 1
            return
        judged = False
        for ex, clauses in probe.cases:
            for clause in clauses:
                if clause not in self.active:
                    continue
                judged = True
                self._check(group, clause, ex)
        if judged:
            stats.reached_engine += 1
        else:
            stats.skipped += 1
        new = probe.features - group.seen
        group.seen |= new
        stats.features = len(group.seen)
        group.new_features += len(new)

    def _check(self, group: Group, clause: str, ex: Example) -> None:
        law_ = law(clause)
        try:
            law_.check(self.engine, ex)
        except Violation as violation:
            violation.example = ex
            for sig in violation.signatures:
                if (clause, sig) not in self.records:
                    self._record(group, law_, clause, sig, ex, violation)
        except Exception as exc:  # noqa: BLE001 - the kit could not judge: an error, not a finding
            group.stats.kit_errors += 1
            from kvcontract.conformance.run.worker import last_frame

            key = f"{clause}: {type(exc).__name__}: {exc}" if isinstance(exc, KitFailure) else \
                f"{clause}: {type(exc).__name__} at {last_frame(exc)}"
            if key not in self.errors:
                self.errors[key] = Record(clause=clause, title=law_.title, level=law_.level,
                                          mode=self.mode, status="error",  # type: ignore[arg-type]
                                          signature=f"kit-error:{type(exc).__name__}", phase="symbolic",
                                          message=f"the kit could not judge an example: {key}",
                                          where=last_frame(exc), witness=ex.to_json() or None)

    def _record(self, group: Group, law_: Any, clause: str, sig: str, ex: Example, violation: Violation) -> None:
        seconds = round(time.process_time() - self.start_cpu, 3)
        entry = None
        if self.expectations is not None:
            entry = next((e for e in self.expectations.for_clause(clause, self.mode) if e.signature == sig), None)
        record = Record(clause=clause, title=law_.title, level=law_.level, mode=self.mode,  # type: ignore[arg-type]
                        status="xfail" if entry else "fail", signature=sig, examples=1, seconds=seconds,
                        message=f"{entry.reason} [symbolic: {violation.message}]" if entry else violation.message,
                        witness=ex.to_json(), phase="symbolic",
                        snippet=law_.snippet(self.engine, ex, violation, self.optimized))
        self.records[(clause, sig)] = record
        group.stats.findings += 1
        if group.stats.first_finding_s is None:
            group.stats.first_finding_s = seconds
        if self.on_finding is not None:
            self.on_finding(record)

    # -- batches and rounds -----------------------------------------------------------------------

    def _batch(self, group: Group, paths: int) -> None:
        from crosshair.core import PathOutcome, explore_loop
        from crosshair.options import DEFAULT_OPTIONS, AnalysisOptionSet
        from crosshair.statespace import CallAnalysis, VerificationStatus

        options = DEFAULT_OPTIONS.overlay(AnalysisOptionSet(
            max_iterations=paths, per_condition_timeout=3600.0, per_path_timeout=60.0,
            max_uninteresting_iterations=sys.maxsize))
        import collections

        options.stats = collections.Counter()

        def run_path(space: Any) -> Any:
            self._judge(group, Chooser(space))
            return PathOutcome(CallAnalysis(VerificationStatus.CONFIRMED))

        start = time.process_time()
        group.new_features = 0
        result = explore_loop(options, group.root, run_path)
        group.stats.paths += options.stats.get("num_paths", 0)
        group.stats.exhausted = bool(result.exhausted)
        group.stats.cpu_seconds = round(group.stats.cpu_seconds + time.process_time() - start, 3)

    def run(self, budget_s: float | None, iterations: int | None, stop_on_finding: bool = False) -> None:
        """Rounds over the live groups until the budget (CPU seconds of this process
        and/or paths), exhaustion of every group, or (``stop_on_finding``) a failure."""
        import crosshair.core_and_libs  # noqa: F401 - registers CrossHair's patches

        total = 0
        first = True

        def spent() -> bool:
            if budget_s is not None and time.process_time() - self.start_cpu >= budget_s:
                return True
            return iterations is not None and total >= iterations

        while not spent():
            live = [g for g in self.groups if not g.stats.exhausted]
            if not live:
                break
            for group in live:
                if spent():
                    break
                paths = FIRST_BATCH if first else max(2, round(BATCH * group.weight))
                if iterations is not None:
                    paths = min(paths, iterations - total)
                before = group.stats.paths
                self._batch(group, paths)
                total += group.stats.paths - before
                # coverage decides the next share: groups that still discover get more
                if group.new_features:
                    group.weight, group.quiet_rounds = min(2.0, group.weight * 1.5), 0
                else:
                    group.quiet_rounds += 1
                    group.weight = max(0.25, group.weight / 2)
                self._report_stats()
                if stop_on_finding and any(r.status == "fail" for r in self.records.values()):
                    return
            first = False
        self._report_stats()

    def _report_stats(self) -> None:
        if self.on_stats is not None:
            self.on_stats([g.stats for g in self.groups])


def _optional_expectations(path: str | None) -> Any:
    if not path:
        return None
    from kvcontract.conformance.reports.expectations import load_xfails

    return load_xfails(path)


# -- worker tasks ---------------------------------------------------------------------------------


def info_task(args: Mapping[str, Any], emit: Callable[[Mapping[str, Any]], None]) -> dict[str, Any]:
    """Load the engine: name, version, bundled expectations, the kinds it has."""
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.reports.expectations import default_xfails

    engine = resolve_engine(str(args["engine"]))
    found = default_xfails(engine.name, engine.version)
    return {"name": engine.name, "version": engine.version, "expectations": str(found) if found else None,
            "kinds": [k.__name__ for k in domain_of(engine).kinds]}


def symbolic_task(args: Mapping[str, Any], emit: Callable[[Mapping[str, Any]], None]) -> dict[str, Any]:
    """The search as a worker task: every finding and every round's stats are emitted as they come."""
    from kvcontract.conformance.engines.registry import resolve_engine

    engine = resolve_engine(str(args["engine"]))
    search = Search(engine, operations=list(args.get("operations") or OPERATIONS), kinds=args.get("kinds"),
                    clauses=args.get("clauses"), expectations=_optional_expectations(args.get("xfails")),
                    seed_value=int(args.get("seed", 0)),
                    on_finding=lambda r: emit({"finding": r.model_dump()}),
                    on_stats=lambda s: emit({"stats": [_stats_json(x) for x in s]}))
    budget = args.get("budget")
    iterations = args.get("iterations")
    search.run(float(budget) if budget is not None else None, int(iterations) if iterations is not None else None,
               bool(args.get("stop_on_finding", False)))
    return {"records": [r.model_dump() for r in search.records.values()],
            "errors": [r.model_dump() for r in search.errors.values()],
            "stats": [_stats_json(g.stats) for g in search.groups],
            "skipped_clauses": {c: why for c, why in search.skips.items() if why}}


def _stats_json(stats: GroupStats) -> dict[str, Any]:
    return {**dataclasses.asdict(stats), "name": stats.name}


# -- the command line's side: supervised modes, one report written as findings come -------------


class OperationStats(pydantic.BaseModel):
    """One search group in one mode: how many paths reached the engine."""

    mode: Mode
    operation: str
    kind: str = ""
    paths: int = 0
    reached_engine: int = 0
    rejected: int = 0
    skipped: int = 0
    kit_errors: int = 0
    findings: int = 0
    exhausted: bool = False
    cpu_seconds: float = 0.0
    features: int = 0
    first_finding_s: float | None = None


class SymbolicReport(ReportHeader):
    """A ``kvcontract symbolic`` run (schema ``symbolic`` version 2).

    ``records`` are findings in the model of ``check`` (clause x mode x
    signature, status ``fail``/``xfail``/``error``, witness, snippet, phase
    ``symbolic``). The file is rewritten after every new finding with
    ``complete`` false, so a run that is stopped leaves a valid partial report.
    """

    schema_version: str = "2"
    kind: str = "symbolic"
    modes: list[Mode]
    budget_s: float | None
    """CPU seconds of search per mode (None: paths only)."""
    iterations: int | None
    """Paths per mode (None: seconds only)."""
    operations: list[str]
    kinds: list[str] | None = None
    expectations: str | None = None
    complete: bool = False
    stopped: str = ""
    """Why the run ended early (interrupted, a worker's hang or crash), or ""."""
    records: list[Record] = []
    searched: list[OperationStats] = []
    skipped_clauses: dict[str, str] = {}
    summary: Summary

    @property
    def failing(self) -> list[Record]:
        return [r for r in self.records if r.status in FAILING]


Progress = Callable[[str], None]


class _Live:
    """The report as it grows: findings from both modes' workers, written on every change."""

    def __init__(self, report: SymbolicReport, path: str | None, progress: Progress | None) -> None:
        self.report = report
        self.path = path
        self.progress = progress
        self.lock = threading.Lock()
        self.start = time.perf_counter()
        self.stats: dict[str, list[OperationStats]] = {}
        self.write()

    def write(self) -> None:
        r = self.report
        r.searched = [s for mode in ("normal", "optimized") for s in self.stats.get(mode, [])]
        r.summary = summarize(r.records, time.perf_counter() - self.start)
        if self.path:
            write_atomic(self.path, r.model_dump_json(indent=2) + "\n")

    def event(self, mode: Mode, event: Mapping[str, Any]) -> None:
        with self.lock:
            if "finding" in event:
                record = Record(**event["finding"])
                self.report.records.append(record)
                if self.progress:
                    self.progress(f"[symbolic {mode}] {record.status} {record.clause} [{record.signature}] "
                                  f"after {record.seconds:.1f}s")
                self.write()
            elif "stats" in event:
                self.stats[mode] = [_op_stats(mode, s) for s in event["stats"]]

    def add(self, records: Iterable[Record]) -> None:
        with self.lock:
            for record in records:
                if not any((r.clause, r.mode, r.signature) == (record.clause, record.mode, record.signature)
                           for r in self.report.records):
                    self.report.records.append(record)
            self.write()


def _op_stats(mode: Mode, data: Mapping[str, Any]) -> OperationStats:
    return OperationStats(mode=mode, **{k: v for k, v in data.items() if k in OperationStats.model_fields
                                        and k != "mode"})


def run_symbolic(engine_name: str, *, budget_s: float | None = DEFAULT_BUDGET_S, iterations: int | None = None,
                 optimize: str = "both", operations: Sequence[str] = OPERATIONS,
                 kinds: Sequence[str] | None = None, clauses: Sequence[str] | None = None,
                 xfails: str | None = None, use_default_xfails: bool = True, seed_value: int = 0,
                 json_path: str | None = None, progress: Progress | None = None,
                 stop_on_finding: bool = False) -> SymbolicReport:
    """The search in one supervised worker per mode (``python -O`` for the optimized
    one), concurrently. Raises :class:`SearchError` for an unknown kind or
    operation, :class:`RuntimeError` when the engine cannot be loaded."""
    import kvcontract
    from kvcontract.conformance.reports.expectations import XfailsError, load_xfails
    from kvcontract.conformance.run.worker import Worker

    unknown_ops = [o for o in operations if o not in OPERATIONS]
    if unknown_ops:
        raise SearchError(f"unknown operation(s) {', '.join(unknown_ops)}; choose from {', '.join(OPERATIONS)}")
    modes: list[Mode] = []
    if optimize in ("off", "both"):
        modes.append("normal")
    if optimize in ("on", "both"):
        modes.append("optimized")
    workers = {m: Worker(optimized=m == "optimized") for m in modes}
    try:
        info_result = workers[modes[0]].run("kvcontract.conformance.run.symbolic.search:info_task", {"engine": engine_name},
                                            timeout=180.0)
        if not info_result.ok:
            raise RuntimeError(f"cannot load engine {engine_name!r}: {info_result.error}")
        info = info_result.value
        unknown = [k for k in kinds or [] if k not in info["kinds"]]
        if unknown:
            raise SearchError(f"unknown spec kind(s) {', '.join(unknown)} for {info['name']}; choose from "
                              f"{', '.join(info['kinds'])}")
        bundled = xfails is None
        if use_default_xfails and xfails is None and info.get("expectations"):
            xfails = str(info["expectations"])
        expectations = None
        if xfails:
            try:
                expectations = load_xfails(xfails)
            except XfailsError as exc:
                if not bundled:
                    raise SearchError(str(exc)) from None
                if progress:
                    progress(f"warning: the bundled expectations cannot be used, every finding is a failure: {exc}")
                xfails = None
        report = SymbolicReport(
            kit_version=kvcontract.__version__, engine=info["name"], engine_version=info["version"],
            profile="symbolic", seed=seed_value, modes=modes, budget_s=budget_s, iterations=iterations,
            operations=list(operations), kinds=list(kinds) if kinds else None,
            expectations=expectations.path if expectations else None, summary=summarize([], 0.0))
        live = _Live(report, json_path, progress)
        results: dict[str, Any] = {}
        args = {"engine": engine_name, "budget": budget_s, "iterations": iterations, "operations": list(operations),
                "kinds": list(kinds) if kinds else None, "clauses": list(clauses) if clauses else None,
                "xfails": xfails, "seed": seed_value, "stop_on_finding": stop_on_finding}
        # the CPU budget is the search's; the wall limit only catches a hung engine
        wall = (budget_s or 0) * 6 + (iterations or 0) * 2.0 + 300

        def one(mode: Mode) -> None:
            results[mode] = workers[mode].run("kvcontract.conformance.run.symbolic.search:symbolic_task", args, timeout=wall,
                                              heartbeat=120.0, on_event=lambda e: live.event(mode, e))

        threads = [threading.Thread(target=one, args=(m,), name=f"kvcontract-symbolic-{m}") for m in modes]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            report.stopped = "interrupted"
            live.write()
            raise
        problems = []
        for mode in modes:
            result = results.get(mode)
            if result is None or not result.ok:
                why = result.error if result is not None else "no result"
                problems.append(f"{mode}: {why}")
                continue
            live.add(Record(**r) for r in result.value["errors"])
            with live.lock:
                live.stats[mode] = [_op_stats(mode, s) for s in result.value["stats"]]
                report.skipped_clauses.update(result.value["skipped_clauses"])
        if "optimized" in modes and "normal" in results and results["normal"].ok:
            live.add(_optimize_only(engine_name, report, workers["normal"], expectations))
        with live.lock:
            report.stopped = "; ".join(problems)
            report.complete = not problems
            order = {law_.clause: i for i, law_ in enumerate(LAWS)}
            report.records.sort(key=lambda r: (order.get(r.clause, len(order)), r.mode, r.signature))
            live.write()
        return report
    finally:
        for w in workers.values():
            w.close()


OPTIMIZE_SOURCES = DERIVED["ERROR-OPTIMIZE-1"]


def _optimize_only(engine_name: str, report: SymbolicReport, normal: Any, expectations: Any) -> list[Record]:
    """ERROR-OPTIMIZE-1, as ``check`` derives it: an optimized finding of a source
    clause whose witness holds in the normal interpreter."""
    out: list[Record] = []
    for evidence in [r for r in report.records if r.mode == "optimized" and r.clause in OPTIMIZE_SOURCES
                     and r.status in ("fail", "xfail")]:
        sig = f"optimized-only:{evidence.clause}:{evidence.signature}"
        result = normal.run("kvcontract.conformance.run.session:replay_task",
                            {"engine": engine_name, "clause": evidence.clause, "witness": evidence.witness or {}},
                            timeout=120.0)
        if not result.ok or (result.value["violation"] and evidence.signature in result.value["signatures"]):
            continue
        entry = None
        if expectations is not None:
            entry = next((e for e in expectations.for_clause("ERROR-OPTIMIZE-1", "optimized")
                          if e.signature == sig), None)
        message = (f"{evidence.clause} holds in the normal interpreter but fails under python -O on its "
                   f"witness: {evidence.message}")
        from kvcontract.spec import clause as catalogue_clause

        c = catalogue_clause("ERROR-OPTIMIZE-1")
        out.append(Record(clause="ERROR-OPTIMIZE-1", title=c.title, level=c.level, mode="optimized",
                          status="xfail" if entry else "fail", signature=sig, examples=1, phase="symbolic",
                          seconds=evidence.seconds, message=f"{entry.reason} [{message}]" if entry else message,
                          snippet=evidence.snippet, witness=evidence.witness))
    return out


def render(report: SymbolicReport) -> str:
    """Per mode and operation group: paths, reached the engine, rejected; then each failure."""
    budget = " and ".join(x for x in (f"{report.budget_s:g} CPU s" if report.budget_s else "",
                                      f"{report.iterations} paths" if report.iterations else "") if x)
    lines = [f"kvcontract symbolic: {report.engine} {report.engine_version} "
             f"(modes {'+'.join(report.modes)}, budget {budget or 'none'} per mode)"]
    if report.expectations:
        lines.append(f"expectations: {report.expectations}")
    header = (f"{'mode':<9} {'group':<36} {'paths':>6} {'engine':>6} {'rejected':>8} {'exhausted':>9} "
              f"{'findings':>8} {'cpu':>7}")
    lines += ["", header, "-" * len(header)]
    for s in report.searched:
        name = f"{s.operation}:{s.kind}" if s.kind else s.operation
        lines.append(f"{s.mode:<9} {name:<36} {s.paths:>6} {s.reached_engine:>6} {s.rejected:>8} "
                     f"{'yes' if s.exhausted else 'no':>9} {s.findings:>8} {s.cpu_seconds:>6.1f}s")
    for mode in report.modes:
        rows = [s for s in report.searched if s.mode == mode]
        paths = sum(s.paths for s in rows)
        reached = sum(s.reached_engine for s in rows)
        rejected = sum(s.rejected for s in rows)
        share = f"{100 * reached / paths:.0f}%" if paths else "-"
        lines.append(f"{mode}: {paths} paths, {reached} reached the engine ({share}), {rejected} rejected before it")
    for clause, why in sorted(report.skipped_clauses.items()):
        lines.append(f"skipped {clause}: {why}")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.summary.counts.items())) or "no finding"
    lines += ["", f"{counts} in {report.summary.seconds:.1f}s"
              + ("" if report.complete else f" (incomplete: {report.stopped or 'stopped'})")]
    if not report.failing and report.complete:
        lines.append("no difference from the contract found within the budget (not a proof)")
    lines += render_findings(report.records, "known failures found again (xfail):")
    return "\n".join(lines)
