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

In these structural groups engine code runs on realized values (the choices
are resolved before any engine call), so native code and torch internals are no
obstacle; their symbolic part is the structure of the input. The value groups
(``value-merge:<Kind>``, ``value-group:<Kind>``, ``value-route``; :mod:`kvcontract.conformance.run.symbolic.values`)
keep one field's values symbolic into the engine, so its branches on values (a
block size of 48) are solved, and an exhausted value group is a bounded proof.

Search groups: ``merge:<Kind>`` (1–4 members of one kind), ``mixed`` (two
kinds), ``empty`` (``merge([])``, ``is_uniform({})``), ``uniform`` and
``group`` (layer tables of one or two kinds), ``route`` (routing
batches), and the value groups. Each group keeps its own CrossHair path tree across batches; the
scheduler gives more of the next round to groups whose last batch still
discovered new coverage and drops groups whose tree is exhausted. The budget
is CPU seconds of the worker (``--budget``) and/or a number of paths
(``--iterations``), so a loaded machine does not silently search less.
"""

from __future__ import annotations

import collections
import functools
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract.corpus import current_corpus
from kvcontract.conformance.contract.laws import (
    CLAUSE_ORDER,
    OPERATION_CLAUSES,
    SEARCHED_CLAUSES,
    law,
)
from kvcontract.conformance.contract.laws.common import to_engine
from kvcontract.conformance.contract.model import (
    SEARCH_OPERATIONS,
    Example,
    KitFailure,
    Violation,
    domain_of,
)
from kvcontract.conformance.engines.dispatch import router_for
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.conformance.reports.check import Mode, Record
from kvcontract.conformance.reports.expectations import Expectations
from kvcontract.conformance.run import verdicts
from kvcontract.conformance.run.execution import as_engine_holds, judge_expectations
from kvcontract.conformance.run.symbolic.blocks import Blocks
from kvcontract.conformance.run.symbolic.choices import Chooser, Proportional, Rejected
from kvcontract.conformance.run.symbolic.corpus import (
    CORPUS_OPERATIONS,
    corpus_blocks,
    corpus_probe,
)
from kvcontract.conformance.run.symbolic.probes import (
    Probe,
    empty_probe,
    group_probe,
    merge_probe,
    mixed_probe,
    route_probe,
    uniform_probe,
)
from kvcontract.conformance.run.symbolic.replay import replay_failed
from kvcontract.conformance.run.symbolic.report import (
    OperationStats,
)
from kvcontract.conformance.run.symbolic.values import (
    VALUE_OPERATIONS,
    bounds_of,
    describe_bounds,
    page_neutral,
    value_group_probe,
    value_merge_probe,
    value_route_probe,
)
from kvcontract.conformance.run.worker import last_frame

OPERATIONS: tuple[str, ...] = (*SEARCH_OPERATIONS, *CORPUS_OPERATIONS, *VALUE_OPERATIONS)
"""The operation groups a run can select (``--ops``): the structural ones, the corpus's tables
(:mod:`kvcontract.conformance.run.symbolic.corpus`), then the value groups
(:mod:`kvcontract.conformance.run.symbolic.values`)."""
_BASE_OPERATION = {**CORPUS_OPERATIONS, **VALUE_OPERATIONS}


def clauses_of(operation: str) -> tuple[str, ...]:
    """The clauses that judge an operation group's paths (a corpus or value group: its base operation's)."""
    return OPERATION_CLAUSES[_BASE_OPERATION.get(operation, operation)]

DEFAULT_BUDGET_S = 120.0
"""CPU seconds of search per interpreter mode (the modes run concurrently)."""
FIRST_BATCH = 6
"""Paths per group in the first round: every group is tried early."""
BATCH = 24
"""Paths per group and round at full weight."""
RECENT_KEPT = 64
"""Judged examples a group remembers, to diagnose a path CrossHair could not replay."""


INFO_TASK = "kvcontract.conformance.run.symbolic.tasks:info_task"
SYMBOLIC_TASK = "kvcontract.conformance.run.symbolic.tasks:symbolic_task"
"""The worker tasks (:mod:`kvcontract.conformance.run.symbolic.tasks`), by name."""


class SearchError(ValueError):
    """A search that cannot run as asked (an unknown kind or operation): a usage error."""


class Group:
    """One search group: its path tree (kept across batches), its builder, its stats."""

    def __init__(self, operation: str, kind: str, build: Callable[[Chooser], Probe], seed_value: int,
                 mode: Mode) -> None:
        from crosshair.statespace import RootNode

        self.stats = OperationStats(mode=mode, operation=operation, kind=kind)
        self.build = build
        self.root = RootNode()
        self.root._random = random.Random(f"{seed_value}:{operation}:{kind}")
        self.root.pathing_oracle = Proportional()  # type: ignore[assignment]
        self.seen: set[str] = set()
        self.weight = 1.0
        self.quiet_rounds = 0
        self.new_features = 0
        self.recent: collections.deque[tuple[str, Example, tuple[str, ...] | None, Violation | None]] = \
            collections.deque(maxlen=RECENT_KEPT)
        """The last (clause, example, signatures, violation) judged: what a replay failure is
        diagnosed from."""

    def fresh_tree(self) -> None:
        """A new path tree: what CrossHair could not replay is not searched again."""
        from crosshair.statespace import RootNode

        random_state = self.root._random
        self.root = RootNode()
        self.root._random = random_state
        self.root.pathing_oracle = Proportional()  # type: ignore[assignment]


class Search:
    """The symbolic search against one engine in this interpreter."""

    def __init__(self, engine: Engine, *, operations: Sequence[str] = OPERATIONS,
                 kinds: Sequence[str] | None = None, clauses: Sequence[str] | None = None,
                 expectations: Expectations | None = None, seed_value: int = 0,
                 on_finding: Callable[[Record], None] | None = None,
                 on_stats: Callable[[list[OperationStats]], None] | None = None,
                 record_value_inputs: bool = False) -> None:
        unknown_ops = [o for o in operations if o not in OPERATIONS]
        if unknown_ops:
            raise SearchError(f"unknown operation(s) {', '.join(unknown_ops)}; choose from {', '.join(OPERATIONS)}")
        self.engine = engine
        self.domain = domain_of(engine)
        self.optimized = bool(sys.flags.optimize)
        self.mode: Mode = "optimized" if self.optimized else "normal"
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
        self.blocks = Blocks(self.domain, accepts=lambda spec: to_engine(engine, spec))  # never the kit's own spec
        self.on_finding = on_finding
        self.on_stats = on_stats
        self.records: dict[tuple[str, str], Record] = {}
        self.errors: dict[str, Record] = {}
        self.start_cpu = time.process_time()
        self.value_inputs: list[tuple[Example, tuple[str, ...]]] | None = [] if record_value_inputs else None
        """The value paths' realized inputs with no difference, when asked (a coverage replay)."""
        self.groups = self._groups(operations, seed_value)
        self.searched = {c for g in self.groups for c in clauses_of(g.stats.operation)} & self.active
        """The clauses this search judges (its groups', less those that skip on the engine)."""
        self.judged: dict[str, dict[str, verdicts.Verdict]] = {}
        """Per clause, its expectations in this mode judged by their pinned witnesses."""
        self.xpasses: list[Record] = []
        self._announced = False
        if expectations is not None:
            before = time.process_time()
            self._judge_expectations(expectations)
            self.start_cpu += time.process_time() - before  # the replays are not the search's budget

    def _judge_expectations(self, expectations: Expectations) -> None:
        """Replay the pinned witnesses of the searched clauses' expectations here, before
        the search, as ``check`` does (:mod:`kvcontract.conformance.run.verdicts`): a
        finding is an xfail only when its expectation's witness still fails; one whose
        witness no longer does is an xpass, reported whether or not the search finds it."""
        for clause in sorted(self.searched, key=CLAUSE_ORDER.__getitem__):
            law_ = law(clause)
            self.judged[clause] = judge_expectations(self.engine, law_, expectations, self.mode)
            self.xpasses += [Record(clause=clause, title=law_.title, level=law_.level, mode=self.mode,
                                    status="xpass", signature=sig, examples=1, phase="witness",
                                    message=v.message, witness=v.entry.witness)
                             for sig, v in self.judged[clause].items() if v.status == "xpass"]

    def _groups(self, operations: Sequence[str], seed_value: int) -> list[Group]:
        groups = []
        grouping = [k for k in strat.grouping_domain(self.domain).kinds if k in self.kinds]
        for op in operations:
            if not set(clauses_of(op)) & self.active:
                continue
            if op == "merge":
                for kind in self.kinds:
                    kb = self.blocks.of(kind)
                    if kb is not None:
                        groups.append(Group(op, kind.__name__, functools.partial(
                            merge_probe, blocks=self.blocks, kb=kb), seed_value, self.mode))
            elif op == "mixed" and len(self.kinds) > 1:
                groups.append(Group(op, "", functools.partial(mixed_probe, blocks=self.blocks, kinds=self.kinds),
                                    seed_value, self.mode))
            elif op == "empty":
                groups.append(Group(op, "", empty_probe, seed_value, self.mode))
            elif op == "uniform":
                groups.append(Group(op, "", functools.partial(uniform_probe, blocks=self.blocks, kinds=self.kinds),
                                    seed_value, self.mode))
            elif op == "group" and grouping:
                groups.append(Group(op, "", functools.partial(group_probe, blocks=self.blocks, kinds=grouping),
                                    seed_value, self.mode))
            elif op == "route":
                groups.append(Group(op, "", route_probe, seed_value, self.mode))
            elif op == "corpus" and grouping:
                corpus = current_corpus()
                held = as_engine_holds(self.engine)
                found = corpus_blocks(corpus, held) if corpus is not None else None
                if found is not None:
                    groups.append(Group(op, "", functools.partial(corpus_probe, blocks=found, held=held),
                                        seed_value, self.mode))
            elif op == "value-merge":
                for kind in self.kinds:
                    kb = self.blocks.of(kind)
                    bounds = bounds_of(kb, self.blocks) if kb is not None else []
                    if kb is not None and bounds:
                        group = Group(op, kind.__name__, functools.partial(
                            value_merge_probe, engine=self.engine, kb=kb, bounds=bounds, record=self.value_inputs),
                            seed_value, self.mode)
                        group.stats.bounds = describe_bounds(op, kind.__name__, bounds)
                        groups.append(group)
            elif op == "value-group":
                for kind in grouping:
                    kb = self.blocks.of(kind)
                    bounds = page_neutral(kb.base, bounds_of(kb, self.blocks)) if kb is not None else []
                    if kb is not None and bounds:
                        group = Group(op, kind.__name__, functools.partial(
                            value_group_probe, engine=self.engine, kb=kb, bounds=bounds, record=self.value_inputs),
                            seed_value, self.mode)
                        group.stats.bounds = describe_bounds(op, kind.__name__, bounds)
                        groups.append(group)
            elif op == "value-route" and router_for(self.engine) is not None:
                group = Group(op, "", functools.partial(value_route_probe, engine=self.engine,
                                                        record=self.value_inputs), seed_value, self.mode)
                group.stats.bounds = describe_bounds(op, "", [])
                groups.append(group)
        return groups

    # -- one path ---------------------------------------------------------------------------------

    def _judge(self, group: Group, c: Chooser) -> None:
        from crosshair.util import NotDeterministic

        stats = group.stats
        try:
            probe = group.build(c)
        except Rejected:
            stats.rejected += 1
            return
        except NotDeterministic:
            raise  # diagnosed by the batch (replay.py)
        except Exception as exc:  # noqa: BLE001 - the kit failed building or judging a value path: an error
            # (CrossHair's own control flow, ignored or unexplored paths, is not an Exception)
            law_ = law(clauses_of(stats.operation)[0])
            self._kit_error(group, law_, law_.clause, Example(), exc)
            return
        judged = confirmed = False
        for ex, clauses in probe.cases:
            for clause in clauses:
                if clause not in self.active:
                    continue
                judged = True
                confirmed |= self._check(group, clause, ex)
        if probe.difference is not None and not confirmed:
            stats.unconfirmed += 1
        if judged or probe.reached:
            stats.reached_engine += 1
        else:
            stats.skipped += 1
        new = probe.features - group.seen
        group.seen |= new
        stats.features = len(group.seen)
        group.new_features += len(new)

    def _check(self, group: Group, clause: str, ex: Example) -> bool:
        """Judge ``ex`` by ``clause``; whether the law saw a violation."""
        law_ = law(clause)
        outcome: tuple[str, ...] | None = ()
        seen: Violation | None = None
        try:
            law_.check(self.engine, ex)
        except Violation as violation:
            outcome, seen = tuple(violation.signatures), violation
            violation.example = ex
            for sig in violation.signatures:
                if (clause, sig) not in self.records:
                    self._record(group, law_, clause, sig, ex, violation)
        except Exception as exc:  # noqa: BLE001 - the kit could not judge: an error, not a finding
            outcome = None
            self._kit_error(group, law_, clause, ex, exc)
        finally:
            group.recent.append((clause, ex, outcome, seen))
        return seen is not None

    def _kit_error(self, group: Group, law_: Any, clause: str, ex: Example, exc: BaseException) -> None:
        """The kit's own failure on ``ex``: one error record per cause, never a finding."""
        group.stats.kit_errors += 1
        key = f"{clause}: {type(exc).__name__}: {exc}" if isinstance(exc, KitFailure) else \
            f"{clause}: {type(exc).__name__} at {last_frame(exc)}"
        if key not in self.errors:
            self.errors[key] = Record(clause=clause, title=law_.title, level=law_.level,
                                      mode=self.mode, status="error",
                                      signature=f"kit-error:{type(exc).__name__}", phase="symbolic",
                                      message=f"the kit could not judge an example: {key}",
                                      where=last_frame(exc), witness=ex.to_json() or None)

    def _record(self, group: Group, law_: Any, clause: str, sig: str, ex: Example, violation: Violation) -> None:
        seconds = round(time.process_time() - self.start_cpu, 3)
        judged = self.judged.get(clause, {})
        status = verdicts.finding_status(sig, judged)
        record = Record(clause=clause, title=law_.title, level=law_.level, mode=self.mode,
                        status=status, signature=sig, examples=1, seconds=seconds,
                        message=f"{judged[sig].entry.reason} [symbolic: {violation.message}]" if status == "xfail"
                        else violation.message,
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

        from crosshair.util import NotDeterministic

        start = time.process_time()
        group.new_features = 0
        try:
            result = explore_loop(options, group.root, run_path)
            group.stats.exhausted = bool(result.exhausted)
        except NotDeterministic as exc:  # an engine CrossHair cannot replay: diagnosed, never an abort
            replay_failed(self, group, exc)
        group.stats.paths += options.stats.get("num_paths", 0)
        group.stats.cpu_seconds = round(group.stats.cpu_seconds + time.process_time() - start, 3)

    def run(self, budget_s: float | None, iterations: int | None, stop_on_finding: bool = False,
            deadline: float | None = None) -> str:
        """Rounds over the live groups until the budget (CPU seconds of this process and/or
        paths), the ``deadline`` (``time.time()``), exhaustion of every group, or
        (``stop_on_finding``) a failure; returns which: budget, paths, wall, exhausted, finding."""
        import crosshair.core_and_libs  # noqa: F401 - registers CrossHair's patches

        if not self._announced and self.on_finding is not None:
            for record in self.xpasses:
                self.on_finding(record)
        self._announced = True
        total = 0
        first = True

        def spent() -> str:
            if budget_s is not None and time.process_time() - self.start_cpu >= budget_s:
                return "budget"
            if deadline is not None and time.time() >= deadline:
                return "wall"
            return "paths" if iterations is not None and total >= iterations else ""

        while not spent():
            live = [g for g in self.groups if not g.stats.exhausted]
            if not live:
                self._report_stats()
                return "exhausted"
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
                    return "finding"
            first = False
        self._report_stats()
        return spent() or "exhausted"

    def _report_stats(self) -> None:
        if self.on_stats is not None:
            self.on_stats([g.stats for g in self.groups])
