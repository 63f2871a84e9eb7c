"""pytest plugin: ``pytest --kvcontract-engine NAME`` runs the conformance laws.

One test per clause, in this interpreter (run ``python -O -m pytest`` for the
optimized mode). Known failures from the engine release's bundled
expectations file (or ``--kvcontract-xfails FILE``) become xfails decided by
their pinned witness. Options: ``--kvcontract-profile``, ``--kvcontract-seed``.

The derived clauses (ERROR-OPTIMIZE-1) come last, judged as ``check`` judges them
(:mod:`kvcontract.conformance.run.verdicts`): under ``python -O`` from this
session's ``-O`` findings of their source clauses (a source not run in this session is
run first), each replayed in the normal interpreter in a supervised worker, and the
pinned witnesses of their expectations replayed both here and there. A plain
``pytest`` run (the normal interpreter) has no ``-O`` finding to derive from: the item
skips, saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("kvcontract")
    group.addoption("--kvcontract-engine", default=None, metavar="NAME",
                    help="run the kvcontract conformance laws against this engine")
    group.addoption("--kvcontract-profile", default="quick", choices=("quick", "default", "thorough"))
    group.addoption("--kvcontract-seed", type=int, default=0)
    group.addoption("--kvcontract-xfails", default=None, metavar="FILE")


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
    def collect(self) -> list[pytest.Item]:
        from kvcontract.conformance.contract.laws import DERIVED, LAWS, law

        items: list[pytest.Item] = [ClauseItem.from_parent(self, name=law_.clause, law=law_) for law_ in LAWS]
        items += [DerivedItem.from_parent(self, name=clause, clause=clause, sources=[law(s) for s in sources])
                  for clause, sources in DERIVED.items()]
        return items


def pytest_configure(config: Any) -> None:
    name = config.getoption("--kvcontract-engine")
    if not name:
        return
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.reports.expectations import bundled_xfails, load_xfails

    engine = resolve_engine(name)
    path = config.getoption("--kvcontract-xfails") or bundled_xfails(engine)
    config._kvcontract = {
        "name": name,
        "engine": engine,
        "profile": config.getoption("--kvcontract-profile"),
        "seed": config.getoption("--kvcontract-seed"),
        "xfails": load_xfails(path) if path else None,
        "records": {},
    }


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    if not getattr(config, "_kvcontract", None):
        return
    engine = config._kvcontract["engine"]
    collector = ConformanceCollector.from_parent(session, name=f"kvcontract[{engine.name}]")
    items[:] = list(collector.collect())


def pytest_ignore_collect(collection_path: Any, config: Any) -> bool | None:
    # With --kvcontract-engine the run is the conformance laws, not the files around.
    return True if config.getoption("--kvcontract-engine") else None
