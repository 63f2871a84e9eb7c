"""pytest plugin: ``pytest --kvcontract-engine NAME`` runs the conformance laws.

One test per clause, in this interpreter (run ``python -O -m pytest`` for the
optimized mode). Known failures from the engine release's bundled
expectations file (or ``--kvcontract-xfails FILE``) become xfails decided by
their pinned witness. Options: ``--kvcontract-profile``, ``--kvcontract-seed``.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("kvcontract")
    group.addoption("--kvcontract-engine", default=None, metavar="NAME",
                    help="run the kvcontract conformance laws against this engine")
    group.addoption("--kvcontract-profile", default="quick", choices=("quick", "default", "thorough"))
    group.addoption("--kvcontract-seed", type=int, default=0)
    group.addoption("--kvcontract-xfails", default=None, metavar="FILE")


class ClauseItem(pytest.Item):
    def __init__(self, *, law: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.law = law

    def runtest(self) -> None:
        from kvcontract.conformance.run.session import run_law

        state = self.config._kvcontract  # type: ignore[attr-defined]
        records, _run = run_law(state["engine"], self.law, state["profile"], state["seed"], state["xfails"])
        for record in records:
            self.user_properties.append(("kvcontract_finding", f"{record.status} {record.signature}".strip()))
        failing = [r for r in records if r.status in ("fail", "xpass", "error")]
        if failing:
            raise ClauseFailure(failing)
        if all(r.status == "skip" for r in records):
            pytest.skip(records[0].message)
        xfails = [r for r in records if r.status == "xfail"]
        if xfails:
            pytest.xfail("; ".join(f"[{r.signature}] {r.message}" for r in xfails))

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, ClauseFailure):
            return "\n\n".join(f"{r.status.upper()} {r.clause} [{r.signature}]: {r.message}\n\n{r.snippet}"
                                for r in excinfo.value.records)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int, str]:
        return "kvcontract", 0, f"{self.law.clause}: {self.law.title}"


class ClauseFailure(Exception):
    def __init__(self, records: list[Any]) -> None:
        super().__init__("; ".join(r.message for r in records))
        self.records = records


class ConformanceCollector(pytest.Collector):
    def collect(self) -> list[pytest.Item]:
        from kvcontract.conformance.contract.laws import LAWS

        return [ClauseItem.from_parent(self, name=law.clause, law=law) for law in LAWS]


def pytest_configure(config: Any) -> None:
    name = config.getoption("--kvcontract-engine")
    if not name:
        return
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.reports.expectations import default_xfails, load_xfails

    engine = resolve_engine(name)
    path = config.getoption("--kvcontract-xfails") or default_xfails(engine.name, engine.version)
    config._kvcontract = {
        "engine": engine,
        "profile": config.getoption("--kvcontract-profile"),
        "seed": config.getoption("--kvcontract-seed"),
        "xfails": load_xfails(path) if path else None,
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
