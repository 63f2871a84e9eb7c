"""Findings traced to the engine code that causes them, grouped into defects (a check's last step).

:class:`EarlyTracing` traces the normal pass's findings while another pass still runs;
:func:`trace_defects` traces the rest and builds the report's defects
(:mod:`kvcontract.conformance.reports.defects`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kvcontract.conformance.reports.check import Record, Report
from kvcontract.conformance.reports.defects import FINDING_STATUSES, build_defects
from kvcontract.conformance.run import tasks
from kvcontract.conformance.run.worker import Worker

if TYPE_CHECKING:
    from kvcontract.conformance.run.session import Pass

Progress = Callable[[str], None]
ENGINE_LOAD_TIMEOUT_S = 180.0
"""Seconds an engine may take to load in a worker."""


def finding_key(record: Record) -> str:
    """A finding as its tracing knows it: clause, mode, signature and witness."""
    return json.dumps([record.clause, record.mode, record.signature, record.witness], sort_keys=True, default=str)


def locate_item(record: Record) -> dict[str, Any]:
    """A finding as the locate task takes it."""
    return {"clause": record.clause, "mode": record.mode, "signature": record.signature, "witness": record.witness}


class EarlyTracing:
    """The normal pass, then, while another pass still runs, the findings so far traced to engine
    code in its worker (:data:`~kvcontract.conformance.run.tasks.LOCATE_TASK`): the normal pass
    ends before the ``-O`` one, whose findings tracing needs a normal interpreter for, and that
    worker idled until both ended (tracing took 1.6 s of a 19 s quick check, on one core).
    :func:`trace_defects` traces what is left. A tracing task that fails here is left to it."""

    POLL_S = 0.05

    def __init__(self, passes: Mapping[str, Pass], engine_name: str, *, timeout: float, heartbeat: float) -> None:
        self.passes, self.engine_name = passes, engine_name
        self.timeout, self.heartbeat = timeout, heartbeat
        self.located: dict[str, dict[str, Any]] = {}
        self._tried: set[str] = set()

    def run(self) -> None:
        normal = self.passes["normal"]
        normal.run()
        others = [p for m, p in self.passes.items() if m != "normal"]
        while not normal.worker.stopped and normal.problem is None:
            running = [p for p in others if not p.finished.is_set()]
            batch = self._untraced()
            if batch:
                self._trace(normal.worker, batch)
            elif not running:
                return
            else:
                running[0].finished.wait(self.POLL_S)

    def _untraced(self) -> dict[str, Record]:
        batch: dict[str, Record] = {}
        for p in self.passes.values():
            for r in list(p.records):
                if r.status in FINDING_STATUSES and r.witness is not None:
                    key = finding_key(r)
                    if key not in self._tried:
                        batch[key] = r
        return batch

    def _trace(self, worker: Worker, batch: Mapping[str, Record]) -> None:
        self._tried |= set(batch)
        try:
            result = worker.run(tasks.LOCATE_TASK, {"engine": self.engine_name,
                                                    "items": [locate_item(r) for r in batch.values()]},
                                timeout=self.timeout, heartbeat=self.heartbeat)
        except Exception:  # noqa: BLE001 - left to trace_defects, which reports what fails
            return
        if result.ok:
            self.located.update(zip(batch, result.value, strict=True))


def corpus_facts(path: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Per corpus table its settings, and per representative table every table it stands for (the
    spec laws' tables with the same specs; the table laws' tables of its planning class)."""
    if not path:
        return {}, {}
    from kvcontract.conformance.contract.corpus import (
        distinct_tables,
        planning_classes,
        read_corpus,
    )

    corpus = read_corpus(path)
    stands = {t.name: names for t, names in distinct_tables(corpus)}
    stands.update({t.name: names for t, names in planning_classes(corpus)})  # the table laws' representatives
    return {t.name: t.settings.to_json() for t in corpus.tables}, stands


REACH_TABLES = 3
"""Corpus tables traced per latent defect (the smallest that hold its layers)."""


def reach_requests(report: Report, corpus: str | None) -> dict[str, dict[str, Any]]:
    """Per latent defect whose layers some corpus table holds: its function and those tables
    (with their settings), to trace the engine's planning of them (:data:`tasks.REACH_TASK`)."""
    if not corpus:
        return {}
    from kvcontract.conformance.contract.codec import spec_to_json
    from kvcontract.conformance.contract.corpus import distinct_tables, read_corpus
    from kvcontract.conformance.reports.defects import kinds_of

    tables = [t for t, _ in distinct_tables(read_corpus(corpus)) if t.layers]
    asks: dict[str, dict[str, Any]] = {}
    for d in report.defects:
        if d.tier != "latent" or not d.function or d.category == "advice":
            continue
        owner = d.function.split(".", 1)[0]
        findings = [set(kinds_of([sig])) for sig in d.signatures]
        if any(owner in k for k in findings):  # a kind's own code: the tables with layers of that kind
            findings = [{owner}]
        holding = [t for t in tables if any(k and k <= set(t.kinds()) for k in findings)]
        if not holding:
            continue
        holding.sort(key=lambda t: len(t.layers))
        asks[d.id] = {"function": d.function, "tables": [
            {"name": t.name, "table": [[n, spec_to_json(s)] for n, s in t.layers], "hybrid": t.settings.hybrid,
             "block_outermost": t.settings.block_outermost} for t in holding[:REACH_TABLES]],
            "holding": [t.name for t in holding]}
    return asks


def reach_of(asks: Mapping[str, Mapping[str, Any]], traced: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per defect, what tracing the corpus's plans found: the tables whose plan calls its function
    (reached), else the tables that hold its layers and where the path stops."""
    out: dict[str, Any] = {}
    for defect_id, ask in asks.items():
        function = ask["function"]
        names = [t["name"] for t in ask["tables"]]
        reached = [n for n in names if function in traced.get(n, {}).get("called", [])]
        siblings = sorted({s for n in names for s in traced.get(n, {}).get("siblings", []) if s != function})
        stops = f"it calls {', '.join(siblings[:3])} instead" if siblings else \
            f"no method of {function.rsplit('.', 1)[0]} runs" if "." in function else ""
        out[defect_id] = {"reached": reached, "held_by": list(ask["holding"]), "function": function,
                          "stops": "" if reached else stops}
    return out


def trace_defects(report: Report, worker: Worker | None, engine_name: str, *, progress: Progress | None,
                  timeout: float, heartbeat: float, reviews: Mapping[str, str] | None = None,
                  located: Mapping[str, dict[str, Any]] | None = None, corpus: str | None = None) -> None:
    """Trace each finding of ``report`` to the engine code that causes it, in a normal-interpreter
    worker (``worker``, or a fresh one), and group them into ``report.defects``. ``located``: the
    findings traced already (:class:`EarlyTracing`), by :func:`finding_key`; ``corpus``: the corpus
    file the run fed (its tables' settings, and which tables each representative stands for). A
    tracing failure is a warning, never a lost report."""
    wanted = [i for i, r in enumerate(report.records) if r.status in FINDING_STATUSES and r.witness is not None]
    if not wanted:
        return
    start = time.perf_counter()
    own = worker is None
    tracer = worker or Worker(optimized=False)
    try:
        _trace(report, tracer, engine_name, wanted, timeout=timeout, heartbeat=heartbeat, reviews=reviews,
               located=located, corpus=corpus)
    finally:
        if own:
            tracer.close()
    if progress is not None and report.defects:
        progress(f"[defects] {len(wanted)} findings traced to {len(report.defects)} defects "
                 f"({time.perf_counter() - start:.1f}s)")


def _trace(report: Report, worker: Worker, engine_name: str, wanted: list[int], *, timeout: float,
           heartbeat: float, reviews: Mapping[str, str] | None, located: Mapping[str, dict[str, Any]] | None,
           corpus: str | None) -> None:
    early = {i: located[k] for i in wanted if located and (k := finding_key(report.records[i])) in located}
    rest = [i for i in wanted if i not in early]
    results: list[dict[str, Any]] = []
    if rest:
        result = worker.run(tasks.LOCATE_TASK, {"engine": engine_name,
                                                "items": [locate_item(report.records[i]) for i in rest]},
                            timeout=timeout + ENGINE_LOAD_TIMEOUT_S, heartbeat=heartbeat + ENGINE_LOAD_TIMEOUT_S)
        if not result.ok:
            report.warnings.append(f"findings were not traced to engine code: {result.error or result.status}")
            return
        results = result.value
    by_index = {**early, **dict(zip(rest, results, strict=True))}
    settings, equivalents = corpus_facts(corpus)
    located_by = {i: by_index[i] for i in wanted}

    def build(reach: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        report.defects = build_defects(report.records, located_by, tables=report.tables, reviews=reviews,
                                       table_kinds=report.table_kinds, settings=settings, equivalents=equivalents,
                                       reach=reach)

    build()
    asks = reach_requests(report, corpus)
    if asks and not worker.stopped:
        tables = {t["name"]: t for ask in asks.values() for t in ask["tables"]}
        result = worker.run(tasks.REACH_TASK, {"engine": engine_name, "tables": list(tables.values()),
                                               "functions": sorted({a["function"] for a in asks.values()})},
                            timeout=timeout, heartbeat=heartbeat)
        if result.ok:
            build(reach_of(asks, result.value))
        else:
            report.warnings.append(f"the corpus's plans were not traced for latent reasons: {result.error}")


__all__ = ["ENGINE_LOAD_TIMEOUT_S", "EarlyTracing", "finding_key", "locate_item", "trace_defects"]
