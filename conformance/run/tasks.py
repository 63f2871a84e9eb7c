"""The task functions ``check`` (and the mutant hunt, the symbolic search's ERROR-OPTIMIZE-1, the
pytest plugin's normal-interpreter replays) run in supervised workers.

A :class:`~kvcontract.conformance.run.worker.Worker` loads a task by its name,
``"kvcontract.conformance.run.tasks:<function>"`` (the constants below); each is called
as ``function(args, emit)`` with JSON arguments and returns JSON. The engine is loaded
once per worker, by name (:func:`engine`).
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import Any

from kvcontract.conformance.contract.corpus import use_corpus
from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.strategies import use_domain
from kvcontract.conformance.engines.protocol import Engine, SourceInfo
from kvcontract.conformance.reports.expectations import load_xfails
from kvcontract.conformance.run import share
from kvcontract.conformance.run.execution import (
    prepare_shared,
    replay,
    replay_items,
    replay_json,
    run_law,
)
from kvcontract.conformance.run.worker import Emit

ENGINE_INFO_TASK = "kvcontract.conformance.run.tasks:engine_info_task"
LAW_TASK = "kvcontract.conformance.run.tasks:law_task"
REPLAY_TASK = "kvcontract.conformance.run.tasks:replay_task"
REPLAY_ALL_TASK = "kvcontract.conformance.run.tasks:replay_all_task"
LOCATE_TASK = "kvcontract.conformance.run.tasks:locate_task"
REACH_TASK = "kvcontract.conformance.run.tasks:reach_task"
PREPARE_TASK = "kvcontract.conformance.run.tasks:prepare_task"

_ENGINES: dict[str, Engine] = {}
_INFO: dict[str, dict[str, Any]] = {}

GC_THRESHOLD = (50_000, 20, 100)
"""The worker's collector thresholds once an engine is loaded (Python's are 700, 10, 10). A
law's run allocates some 50,000 examples' worth of short-lived objects beside an engine's
half a million (vLLM with torch): with the defaults the collector ran 936 times in a quick
pass and took 0.69 s of its 7.4 s; with these and the engine's objects frozen, 12 times, 0.11 s.
What a task leaves behind (the examples, their facts, the engine's answers, which the next
clauses judge again) is frozen too (:func:`_settle`)."""


def _settle() -> None:
    """Freeze what this worker holds after a task: the objects a task leaves are the caches the
    next tasks read, and the collector scanned them again and again (the first older-generation
    collection after a quick pass, 0.33 s, fell in its findings' tracing, its last serial part)."""
    gc.freeze()


def engine(name: str) -> Engine:
    """The engine ``name`` resolves to, loaded once in this worker. What the load leaves behind
    (modules, the engine's tables) lives as long as the worker: it is frozen out of the cyclic
    collector's scans (:data:`GC_THRESHOLD`). The collector is paused while it loads (a worker
    starts with it paused: :func:`~kvcontract.conformance.run.worker.serve`): scanning the half
    million objects an import leaves, most of them for good, took 0.9 s of vLLM's 4.9 s load."""
    if name not in _ENGINES:
        from kvcontract.conformance.engines.registry import resolve_engine

        gc.disable()
        try:
            _ENGINES[name] = resolve_engine(name)  # records ``name`` as the engine's ref (snippets load it by it)
        finally:
            gc.freeze()  # no collection first: it took 0.22 s, for what little garbage an import leaves
            gc.set_threshold(*GC_THRESHOLD)
            gc.enable()
    return _ENGINES[name]


def engine_info_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """Load the engine; its name, version and bundled expectations file (worked out once per
    worker: a pass asks again before its first clause, in case its worker was replaced)."""
    name = str(args["engine"])
    if name not in _INFO:
        _INFO[name] = _engine_info(engine(name))
    return _INFO[name]


def _engine_info(loaded: Engine) -> dict[str, Any]:
    from kvcontract.conformance.contract.surface import coverage_summary
    from kvcontract.conformance.reports.expectations import bundled_xfails

    found = bundled_xfails(loaded)
    source = loaded.source_info() if isinstance(loaded, SourceInfo) else None
    return {"name": loaded.name, "version": loaded.version, "expectations": str(found) if found else None,
            "coverage_summary": coverage_summary(loaded), "source": source}


def law_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """One clause in this worker: its records and its run summary (JSON), drawn from the
    domain ``args["domain"]`` names (default: the worker's, ``strategies.domain_mode``)."""
    use_domain(args.get("domain"))
    share.use_share(args.get("share"))
    use_corpus(args.get("corpus"))
    loaded = engine(str(args["engine"]))
    path = args.get("xfails")
    expectations = load_xfails(str(path)) if path else None
    records, run = run_law(loaded, law(str(args["clause"])), str(args["profile"]), int(args["seed"]),
                           expectations, emit, known=[str(k) for k in args.get("known") or ()])
    _settle()
    return {"records": [r.model_dump() for r in records], "run": run.model_dump()}


def prepare_task(args: Mapping[str, Any], emit: Emit) -> list[str]:
    """This worker's part of the examples the check's workers share (``args["share"]``, its
    directory): see :mod:`kvcontract.conformance.run.share`."""
    use_domain(args.get("domain"))
    share.use_share(args.get("share"))
    use_corpus(args.get("corpus"))
    written = prepare_shared(engine(str(args["engine"])), [law(str(c)) for c in args["clauses"]],
                             str(args["profile"]), int(args["seed"]), emit)
    _settle()
    return written


def replay_all_task(args: Mapping[str, Any], emit: Emit) -> list[dict[str, Any]]:
    """:func:`replay_task` for many (clause, witness) pairs, one progress event each; a witness
    whose replay raises gets that exception as its result, the others still run."""
    return replay_items(engine(str(args["engine"])), [(str(c), w) for c, w in args["items"]], emit)


def replay_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """Replay one witness of one clause here: does it still violate, with which signature?"""
    return replay_json(replay(engine(str(args["engine"])), law(str(args["clause"])), args["witness"]))


def locate_task(args: Mapping[str, Any], emit: Emit) -> list[dict[str, Any]]:
    """Where in the engine each finding comes from (:func:`~kvcontract.conformance.run.locate.locate`):
    run in the normal interpreter, so that an -O finding's assert fires."""
    from kvcontract.conformance.run.locate import locate_items

    return locate_items(engine(str(args["engine"])), args["items"], emit)


def reach_task(args: Mapping[str, Any], emit: Emit) -> dict[str, dict[str, Any]]:
    """Which engine functions planning each given corpus table calls
    (:func:`~kvcontract.conformance.run.locate.reach_tables`)."""
    from kvcontract.conformance.run.locate import reach_tables

    return reach_tables(engine(str(args["engine"])), args["tables"], args["functions"], emit)
