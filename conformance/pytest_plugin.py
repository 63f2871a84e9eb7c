"""pytest plugin: ``pytest --kvcontract-engine NAME`` adds the conformance laws to the run.

One item per clause, in this interpreter (run ``python -O -m pytest`` for the
optimized mode), collected once per session beside the project's own tests (which
still run; ``--kvcontract-only`` deselects them). The items hang off a collector
``kvcontract`` attached to the session: node ids ``kvcontract::<engine>::<CLAUSE>``,
so that ``--junitxml`` writes classname ``kvcontract.<engine>`` and name ``<CLAUSE>``;
``-k`` selects clauses by ID (``-k "MERGE-ORDER-1 or MERGE-UNION-1"``).

Options: ``--kvcontract-engine-path DIR`` (the engine from a source tree: ``NAME@DIR``),
``--kvcontract-profile`` (default quick), ``--kvcontract-seed``, and the expectations
pair ``--kvcontract-xfails FILE`` / ``--kvcontract-no-xfails``. Known failures from the
engine release's bundled expectations file (or the given one) become xfails decided by
their pinned witness. A bad option value (an unknown engine, a missing file or
directory) is a :class:`pytest.UsageError`.

The derived clauses (ERROR-OPTIMIZE-1) come last, judged as ``check`` judges them
(:mod:`kvcontract.conformance.run.verdicts`): under ``python -O`` from this
session's ``-O`` findings of their source clauses (a source not run in this session is
run first), each replayed in the normal interpreter in a supervised worker, and the
pinned witnesses of their expectations replayed both here and there. A plain
``pytest`` run (the normal interpreter) has no ``-O`` finding to derive from: the item
skips, saying so.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

COLLECTOR_NAME = "kvcontract"
"""The top collector's name and node id: items are ``kvcontract::<engine>::<CLAUSE>``."""


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("kvcontract", "kvcontract conformance laws")
    group.addoption("--kvcontract-engine", default=None, metavar="NAME",
                    help="add the kvcontract conformance laws for this engine to the run: a builtin "
                         "name, mutant:<name>, an installed entry point (group kvcontract.engines) "
                         "or package.module:factory")
    group.addoption("--kvcontract-engine-path", default=None, metavar="DIR",
                    help="load the engine from the source tree DIR (for vllm: DIR/vllm/__init__.py)")
    group.addoption("--kvcontract-only", action="store_true", default=False,
                    help="run only the conformance items; the project's own tests are deselected")
    group.addoption("--kvcontract-profile", default="quick", choices=("quick", "default", "thorough"),
                    help="examples per clause: quick (the systematic phase only; default), "
                         "default (+100 random), thorough (+1000 random)")
    group.addoption("--kvcontract-seed", type=int, default=0, metavar="N",
                    help="seed of the random phase (default 0)")
    group.addoption("--kvcontract-xfails", default=None, metavar="FILE",
                    help="expected findings; default: the bundled file for the engine release, if any")
    group.addoption("--kvcontract-corpus", default="auto", metavar="auto|none|FILE",
                    help="the corpus of real models' tables fed first (default auto: the engine's own where it "
                         "builds one, else the pinned vLLM release's; see kvcontract tables)")
    group.addoption("--kvcontract-no-xfails", action="store_true", default=False,
                    help="report known failures as failures")


def _conclude(records: Sequence[Any]) -> None:
    """The item's outcome from its records: fail, skip, xfail or pass."""
    failing = [r for r in records if r.status in ("fail", "xpass", "error")]
    if failing:
        raise ClauseFailure(failing)
    if all(r.status == "skip" for r in records):
        pytest.skip(records[0].message)
    xfails = [r for r in records if r.status == "xfail"]
    if xfails:
        pytest.xfail("; ".join(f"[{r.signature}] {r.message}" for r in xfails))


def _run_law(state: dict[str, Any], law: Any) -> list[Any]:
    """``law`` in this interpreter, once per session (the derived items reuse its records)."""
    from kvcontract.conformance.run.execution import run_law

    if law.clause not in state["records"]:
        state["records"][law.clause], _run = run_law(state["engine"], law, state["profile"], state["seed"],
                                                     state["xfails"])
    records: list[Any] = state["records"][law.clause]
    return records


class _Item(pytest.Item):
    """One clause's item: its records become its outcome, its failures show their repro."""

    clause = ""
    title = ""

    def conclude(self, records: Sequence[Any]) -> None:
        for record in records:
            self.user_properties.append(("kvcontract_finding", f"{record.status} {record.signature}".strip()))
        _conclude(records)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, ClauseFailure):
            return "\n\n".join(f"{r.status.upper()} {r.clause} [{r.signature}]: {r.message}\n\n{r.snippet}"
                                for r in excinfo.value.records)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int, str]:
        return "kvcontract", 0, f"{self.clause}: {self.title}"


class ClauseItem(_Item):
    def __init__(self, *, law: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.law = law
        self.clause, self.title = law.clause, law.title

    def runtest(self) -> None:
        self.conclude(_run_law(self.config._kvcontract, self.law))  # type: ignore[attr-defined]


class DerivedItem(_Item):
    """A derived clause (ERROR-OPTIMIZE-1), judged from its source clauses' -O records."""

    def __init__(self, *, clause: str, sources: Sequence[Any], **kwargs: Any) -> None:
        from kvcontract.spec import clause as catalogue_clause

        super().__init__(**kwargs)
        self.clause, self.title = clause, catalogue_clause(clause).title
        self.sources = list(sources)

    def runtest(self) -> None:
        from kvcontract.conformance.run import verdicts

        if not sys.flags.optimize:
            pytest.skip(f"{self.clause} is judged from the -O findings of {', '.join(s.clause for s in self.sources)}: "
                        "run python -O -m pytest --kvcontract-engine NAME")
        state = self.config._kvcontract  # type: ignore[attr-defined]
        records = [r for law in self.sources for r in _run_law(state, law)]
        derived = [r for r in verdicts.derive_optimize_only(
            records, normal=lambda items: _normal_replays(state["name"], items), optimized=self._replay_here,
            expectations=state["xfails"], complete=True) if r.clause == self.clause]
        self.conclude(derived or [_skip_record(self.clause, "no source clause ran")])

    def _replay_here(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Any]:
        from kvcontract.conformance.run.execution import replay_items
        from kvcontract.conformance.run.worker import TaskResult

        engine = self.config._kvcontract["engine"]  # type: ignore[attr-defined]
        return [TaskResult("raised", error=v["raised"], where=v["where"]) if "raised" in v
                else TaskResult("done", value=v) for v in replay_items(engine, items)]


def _normal_replays(engine_name: str, items: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Any]:
    """The witnesses replayed in the normal interpreter: a supervised worker (not ``-O``)."""
    from kvcontract.conformance.run.session import CLAUSE_TIMEOUT_S, EXAMPLE_TIMEOUT_S, replay_all
    from kvcontract.conformance.run.worker import Worker

    with Worker(optimized=False) as worker:
        return replay_all(worker, engine_name, items, timeout=CLAUSE_TIMEOUT_S, heartbeat=EXAMPLE_TIMEOUT_S)


def _skip_record(clause: str, message: str) -> Any:
    from kvcontract.conformance.reports.check import Record
    from kvcontract.spec import clause as catalogue_clause

    c = catalogue_clause(clause)
    return Record(clause=clause, title=c.title, level=c.level, mode="optimized", status="skip", message=message)


class ClauseFailure(Exception):
    def __init__(self, records: list[Any]) -> None:
        super().__init__("; ".join(r.message for r in records))
        self.records = records


class ConformanceCollector(pytest.Collector):
    """``kvcontract``: the session's collector of the conformance items, one engine below it."""

    def collect(self) -> list[pytest.Collector]:
        engine = self.config._kvcontract["engine"]  # type: ignore[attr-defined]
        return [EngineCollector.from_parent(self, name=_node_name(engine.name))]


class EngineCollector(pytest.Collector):
    """``kvcontract::<engine>``: one item per clause, the derived clauses last."""

    def collect(self) -> list[pytest.Item]:
        from kvcontract.conformance.contract.laws import DERIVED, LAWS, law

        items: list[pytest.Item] = [ClauseItem.from_parent(self, name=law_.clause, law=law_) for law_ in LAWS]
        items += [DerivedItem.from_parent(self, name=clause, clause=clause, sources=[law(s) for s in sources])
                  for clause, sources in DERIVED.items()]
        return items


def _node_name(name: str) -> str:
    """``name`` as one node-id segment: no ``::`` (a separator), no brackets (parameters)."""
    return re.sub(r"::|[\[\]]", "_", name) or "engine"


def _options_error(message: str) -> pytest.UsageError:
    return pytest.UsageError(f"kvcontract: {message}")


def _engine_name(config: Any) -> str | None:
    """The name that loads the engine (``NAME@DIR`` with ``--kvcontract-engine-path``);
    none without ``--kvcontract-engine``."""
    from kvcontract.conformance.engines.protocol import SOURCE_SEPARATOR

    name = config.getoption("--kvcontract-engine")
    path = config.getoption("--kvcontract-engine-path")
    if not name:
        only = config.getoption("--kvcontract-only")
        for flag, given in (("--kvcontract-engine-path", path), ("--kvcontract-only", only)):
            if given:
                raise _options_error(f"{flag} needs --kvcontract-engine NAME")
        return None
    if path is None:
        return str(name)
    if not Path(path).is_dir():
        raise _options_error(f"--kvcontract-engine-path {path}: no such directory")
    if name.startswith("mutant:") or SOURCE_SEPARATOR in name:
        raise _options_error(f"--kvcontract-engine {name} cannot be combined with --kvcontract-engine-path")
    return f"{name}{SOURCE_SEPARATOR}{Path(path).resolve()}"


def _expectations(config: Any, engine: Any) -> Any:
    """The expectations: ``--kvcontract-xfails FILE``, none with ``--kvcontract-no-xfails``,
    else the engine release's bundled file, if any."""
    from kvcontract.conformance.reports.expectations import XfailsError, bundled_xfails, load_xfails

    given, off = config.getoption("--kvcontract-xfails"), config.getoption("--kvcontract-no-xfails")
    if given and off:
        raise _options_error("--kvcontract-xfails and --kvcontract-no-xfails exclude each other")
    if off:
        return None
    if given and not Path(given).is_file():
        raise _options_error(f"--kvcontract-xfails {given}: no such file")
    path = given or bundled_xfails(engine)
    try:
        return load_xfails(path) if path else None
    except XfailsError as exc:
        raise _options_error(str(exc)) from None


def pytest_configure(config: Any) -> None:
    name = _engine_name(config)
    if name is None:
        return
    from kvcontract.conformance.engines.protocol import EngineUnavailable, UnknownEngine
    from kvcontract.conformance.engines.registry import resolve_engine

    try:
        engine = resolve_engine(name)
    except (UnknownEngine, EngineUnavailable) as exc:
        reason = exc.args[0] if exc.args else type(exc).__name__
        raise _options_error(f"--kvcontract-engine {name}: {reason}") from None
    from kvcontract.conformance.contract.corpus import use_corpus
    from kvcontract.conformance.engines.corpora import resolve
    from kvcontract.usage import UsageError

    try:
        chosen = resolve(name, config.getoption("--kvcontract-corpus"))
    except UsageError as exc:
        raise _options_error(f"--kvcontract-corpus: {exc}") from None
    use_corpus(str(chosen.path) if chosen.path else None)
    config._kvcontract = {
        "name": name,
        "engine": engine,
        "profile": config.getoption("--kvcontract-profile"),
        "seed": config.getoption("--kvcontract-seed"),
        "xfails": _expectations(config, engine),
        "records": {},
    }


def _collect(node: pytest.Item | pytest.Collector) -> Iterator[pytest.Item]:
    """The items under ``node``, through the collection hooks as the session collects a
    file: collect reports (a failure is a collection error), ``pytest_itemcollected``,
    and the terminal's count."""
    if isinstance(node, pytest.Item):
        node.ihook.pytest_itemcollected(item=node)
        yield node
        return
    node.ihook.pytest_collectstart(collector=node)
    report = node.ihook.pytest_make_collect_report(collector=node)
    if report.passed:
        for child in report.result:
            yield from _collect(child)
    node.ihook.pytest_collectreport(report=report)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """The conformance items join the project's own (before ``-k``/``-m`` and the other
    plugins see the list); ``--kvcontract-only`` deselects the project's own."""
    if not getattr(config, "_kvcontract", None):
        return
    if config.getoption("--kvcontract-only") and items:
        config.hook.pytest_deselected(items=list(items))
        items.clear()
    collector = ConformanceCollector.from_parent(session, name=COLLECTOR_NAME, nodeid=COLLECTOR_NAME)
    items.extend(_collect(collector))
