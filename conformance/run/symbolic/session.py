"""``kvcontract symbolic`` on the command line's side: the search
(:mod:`kvcontract.conformance.run.symbolic.search`) in one supervised worker per interpreter
mode, concurrently, one report written as findings come.

Budgets: CPU seconds of search per mode (``budget_s``: load-independent) and/or paths
(``iterations``), and a wall-clock limit for the whole run (``wall_s``): each mode's search
stops at whichever comes first, so a loaded machine does not make the default run long, and
the report says which limit ended each mode and what it spent (CPU and wall).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from kvcontract.conformance.contract.laws import CLAUSE_ORDER, DERIVED
from kvcontract.conformance.reports.check import Mode, Record, optimize_modes, summarize
from kvcontract.conformance.run import verdicts
from kvcontract.conformance.run.symbolic.report import LiveReport, Progress, SymbolicReport
from kvcontract.conformance.run.symbolic.search import (
    DEFAULT_BUDGET_S,
    INFO_TASK,
    OPERATIONS,
    SYMBOLIC_TASK,
    SearchError,
)
from kvcontract.usage import interrupt_name

DEFAULT_WALL_S = 175.0
"""Wall seconds for a whole default run (engine loads, search, the -O comparison): three minutes."""
WALL_RESERVE_S = 20.0
"""Of the wall limit, what the search leaves for the -O comparison's replays and the report."""


def run_symbolic(engine_name: str, *, budget_s: float | None = DEFAULT_BUDGET_S, iterations: int | None = None,
                 optimize: str = "both", operations: Sequence[str] = OPERATIONS,
                 kinds: Sequence[str] | None = None, clauses: Sequence[str] | None = None,
                 xfails: str | None = None, use_default_xfails: bool = True, seed_value: int = 0,
                 json_path: str | None = None, progress: Progress | None = None,
                 stop_on_finding: bool = False, wall_s: float | None = None,
                 corpus: str | None = None) -> SymbolicReport:
    """The search in one supervised worker per mode (``python -O`` for the optimized
    one), concurrently, each stopping at its CPU budget, its paths, or ``wall_s`` seconds
    after this call less :data:`WALL_RESERVE_S` (the deadline every worker is given),
    whichever comes first. ``corpus`` (a corpus file) feeds the ``corpus`` group its tables
    (without one that group is left out). Raises :class:`SearchError` for an unknown kind or
    operation, :class:`RuntimeError` when the engine cannot be loaded."""
    import kvcontract
    from kvcontract.conformance.reports.expectations import XfailsError, load_xfails
    from kvcontract.conformance.run.session import CLAUSE_TIMEOUT_S, EXAMPLE_TIMEOUT_S, replay_all
    from kvcontract.conformance.run.worker import Worker

    unknown_ops = [o for o in operations if o not in OPERATIONS]
    if unknown_ops:
        raise SearchError(f"unknown operation(s) {', '.join(unknown_ops)}; choose from {', '.join(OPERATIONS)}")
    modes = optimize_modes(optimize)
    started = time.time()
    deadline = started + max(wall_s - WALL_RESERVE_S, 1.0) if wall_s is not None else None
    workers = {m: Worker(optimized=m == "optimized") for m in modes}
    live: LiveReport | None = None
    threads: list[threading.Thread] = []
    try:
        info_result = workers[modes[0]].run(INFO_TASK, {"engine": engine_name}, timeout=180.0)
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
            profile="symbolic", seed=seed_value, modes=modes, budget_s=budget_s, iterations=iterations, wall_s=wall_s,
            operations=list(operations), kinds=list(kinds) if kinds else None,
            expectations=expectations.path if expectations else None, summary=summarize([], 0.0),
            corpus=corpus if "corpus" in operations else None)
        live = LiveReport(report, json_path, progress)
        results: dict[str, Any] = {}
        args = {"engine": engine_name, "budget": budget_s, "iterations": iterations, "operations": list(operations),
                "kinds": list(kinds) if kinds else None, "clauses": list(clauses) if clauses else None,
                "xfails": xfails, "seed": seed_value, "stop_on_finding": stop_on_finding, "deadline": deadline,
                "corpus": corpus}
        # the CPU budget is the search's; the wall limit only catches a hung engine
        wall = (budget_s or 0) * 6 + (iterations or 0) * 2.0 + 300
        if deadline is not None:  # a worker past the deadline by a minute is stuck in the engine
            wall = min(wall, deadline - time.time() + 60.0)

        def one(mode: Mode) -> None:
            results[mode] = workers[mode].run(SYMBOLIC_TASK, args, timeout=wall, heartbeat=120.0,
                                              on_event=lambda e: live.event(mode, e))

        threads += [threading.Thread(target=one, args=(m,), name=f"kvcontract-symbolic-{m}") for m in modes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        problems = []
        for mode in modes:
            result = results.get(mode)
            if result is None or not result.ok:
                why = result.error if result is not None else "no result"
                problems.append(f"{mode}: {why}")
                continue
            live.add(Record(**r) for r in result.value["errors"])
            with live.lock:
                live.set_stats(mode, result.value["stats"])
                report.ended_by[mode] = str(result.value.get("ended_by", ""))
                report.cpu_s[mode] = float(result.value.get("cpu_s", 0.0))
                report.skipped_clauses.update(result.value["skipped_clauses"])
        if "optimized" in modes:
            done = results.get("optimized")
            searched = done.value["searched_clauses"] if done is not None and done.ok else None
            if "normal" not in modes:
                with live.lock:
                    report.skipped_clauses.update({d: "needs the normal mode to compare with" for d in DERIVED})
            elif results.get("normal") is not None and results["normal"].ok:

                def replayer(mode: Mode) -> verdicts.Replayer:
                    return lambda items: replay_all(workers[mode], engine_name, items, timeout=CLAUSE_TIMEOUT_S,
                                                    heartbeat=EXAMPLE_TIMEOUT_S)

                live.add(verdicts.derive_optimize_only(
                    report.records, normal=replayer("normal"), optimized=replayer("optimized"),
                    expectations=expectations, complete=False, sources_run=searched))
        with live.lock:
            report.stopped = "; ".join(problems)
            report.complete = not problems
            report.records.sort(key=lambda r: (CLAUSE_ORDER.get(r.clause, len(CLAUSE_ORDER)), r.mode, r.signature))
            live.write()
        return report
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM through the command line's handler
        for w in workers.values():
            w.stop()  # its process group killed at once; a running task returns "stopped"
        for t in threads:
            t.join(timeout=10.0)
        if live is not None:  # the report so far, marked stopped
            with live.lock:
                live.report.stopped = f"interrupted by {interrupt_name(exc)}"
                live.report.complete = False
                live.write()
        raise
    finally:
        for w in workers.values():
            w.close()
