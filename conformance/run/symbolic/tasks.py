"""The symbolic search's worker tasks, loaded by name (:data:`INFO_TASK`, :data:`SYMBOLIC_TASK`).

The engine is loaded once per worker by :func:`kvcontract.conformance.run.tasks.engine`, the
same cache ``check``'s tasks use, so the replays of ERROR-OPTIMIZE-1
(:data:`kvcontract.conformance.run.tasks.REPLAY_ALL_TASK`) run on the engine searched.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kvcontract.conformance.contract.corpus import use_corpus
from kvcontract.conformance.contract.model import domain_of
from kvcontract.conformance.reports.expectations import load_xfails
from kvcontract.conformance.run.symbolic.search import OPERATIONS, Search
from kvcontract.conformance.run.tasks import engine
from kvcontract.conformance.run.worker import Emit

INFO_TASK = "kvcontract.conformance.run.symbolic.tasks:info_task"
SYMBOLIC_TASK = "kvcontract.conformance.run.symbolic.tasks:symbolic_task"


def info_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """Load the engine: name, version, bundled expectations, the kinds it has."""
    from kvcontract.conformance.reports.expectations import bundled_xfails

    loaded = engine(str(args["engine"]))
    found = bundled_xfails(loaded)
    return {"name": loaded.name, "version": loaded.version, "expectations": str(found) if found else None,
            "kinds": [k.__name__ for k in domain_of(loaded).kinds]}


def symbolic_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """The search as a worker task: every finding (and xpass) and every round's stats are
    emitted as they come; the result adds the errors and the clauses searched."""
    path = args.get("xfails")
    use_corpus(args.get("corpus"))  # the corpus group's tables (none: that group is left out)
    search = Search(engine(str(args["engine"])), operations=list(args.get("operations") or OPERATIONS),
                    kinds=args.get("kinds"), clauses=args.get("clauses"),
                    expectations=load_xfails(str(path)) if path else None, seed_value=int(args.get("seed", 0)),
                    on_finding=lambda r: emit({"finding": r.model_dump()}),
                    on_stats=lambda s: emit({"stats": [x.model_dump() for x in s]}))
    budget = args.get("budget")
    iterations = args.get("iterations")
    deadline = args.get("deadline")
    ended_by = search.run(float(budget) if budget is not None else None,
                          int(iterations) if iterations is not None else None,
                          bool(args.get("stop_on_finding", False)),
                          deadline=float(deadline) if deadline is not None else None)
    return {"records": [r.model_dump() for r in [*search.xpasses, *search.records.values()]],
            "errors": [r.model_dump() for r in search.errors.values()],
            "stats": [g.stats.model_dump() for g in search.groups],
            "skipped_clauses": {c: why for c, why in search.skips.items() if why},
            "searched_clauses": sorted(search.searched), "ended_by": ended_by,
            "cpu_s": round(time.process_time() - search.start_cpu, 3)}
