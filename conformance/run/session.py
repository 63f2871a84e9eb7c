"""``kvcontract check`` on the command line's side: supervised passes, one report.

:func:`run_check` runs the normal and the ``python -O`` pass, each in its own supervised
worker (:mod:`kvcontract.conformance.run.worker`), concurrently; the workers run the
task functions of :mod:`kvcontract.conformance.run.tasks`, which run one law each
(:mod:`kvcontract.conformance.run.execution`). A law that hangs or crashes its worker
becomes an ``error`` record naming the clause and the example being run; a fresh worker
takes the remaining clauses. The derived clauses are judged from both passes
(:mod:`kvcontract.conformance.run.verdicts`). The report is complete unless the run is
interrupted: on SIGINT / SIGTERM (a :class:`KeyboardInterrupt` in the main thread) the
workers are stopped (their process groups killed), and :class:`CheckInterrupted` carries
the partial report: the records so far, ``complete`` false, the clause x mode runs not run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import kvcontract
from kvcontract.conformance.contract.corpus import read_corpus
from kvcontract.conformance.contract.laws import CLAUSE_ORDER, DERIVED, LAWS
from kvcontract.conformance.contract.strategies import DOMAIN_ENV, DOMAIN_MODES, domain_mode
from kvcontract.conformance.engines.declared import engine_env
from kvcontract.conformance.reports.check import (
    STATUS_RANK,
    ClauseRun,
    Mode,
    NotRun,
    Record,
    Report,
    optimize_modes,
    summarize,
    write_junit,
)
from kvcontract.conformance.reports.expectations import Expectations, load_xfails
from kvcontract.conformance.run import share, tasks
from kvcontract.conformance.run.tracing import ENGINE_LOAD_TIMEOUT_S, EarlyTracing, trace_defects
from kvcontract.conformance.run.verdicts import derive_optimize_only, failure_record
from kvcontract.conformance.run.worker import TaskResult, Worker
from kvcontract.reports import write_atomic
from kvcontract.usage import Interrupted, interrupt_exit_code, interrupt_name, interrupt_signal

CLAUSE_TIMEOUT_S = 300.0
"""Seconds one clause may run in a worker before it is stopped."""
EXAMPLE_TIMEOUT_S = 30.0
"""Seconds one example may run (no progress) before the engine counts as hung."""
AFTER_HANG_EXAMPLE_TIMEOUT_S = 3.0
"""The per-example limit for the rest of a pass once the engine has hung on an example."""

Progress = Callable[[str], None]
DEFAULT_DOMAIN = DOMAIN_MODES[0]
"""The domain a check draws from unless told: ``producible`` (what the engine's code builds)."""


STOP_JOIN_S = 10.0
"""Seconds an interrupted run waits for its passes' threads once their workers are killed."""


class EngineLoadError(Exception):
    """The engine could not be loaded in a worker (unknown name, not installed)."""


class CheckInterrupted(Interrupted):
    """``run_check`` was stopped by a signal; ``report`` is what ran (``complete`` false)."""

    def __init__(self, signum: int, report: Report, runs_done: int, runs_total: int) -> None:
        super().__init__(signum, f"interrupted after {runs_done} of {runs_total} clause runs")
        self.report, self.runs_done, self.runs_total = report, runs_done, runs_total


def keep_partial(exc: CheckInterrupted, json_path: str | None, junit_path: str | None) -> int:
    """The command line's answer to an interrupted ``check``: the partial report written where
    ``--json`` / ``--junit`` say, one line on stderr, and the exit code (130 SIGINT, 143 SIGTERM)."""
    written = [str(p) for p in (json_path, junit_path) if p]
    if json_path:
        write_report_json(exc.report, json_path)
    if junit_path:
        write_junit(exc.report, junit_path)
    where = f"partial report written to {' and '.join(written)}" if written else "no report requested (--json)"
    print(f"interrupted by {interrupt_name(exc)} after {exc.runs_done} of {exc.runs_total} clause runs; {where}",
          file=sys.stderr, flush=True)
    return interrupt_exit_code(exc)


def replay_all(worker: Worker, engine_name: str, items: Sequence[tuple[str, Mapping[str, Any]]], *,
               timeout: float, heartbeat: float) -> list[TaskResult]:
    """Each (clause, witness) replayed in ``worker``, in one task (each witness its own
    heartbeat); when that task hangs or crashes, witness by witness, so the culprit gets
    its own result. A :data:`~kvcontract.conformance.run.verdicts.Replayer`."""
    batch = worker.run(tasks.REPLAY_ALL_TASK, {"engine": engine_name, "items": [[c, dict(w)] for c, w in items]},
                       timeout=timeout, heartbeat=heartbeat)
    if not batch.ok:
        return [worker.run(tasks.REPLAY_TASK, {"engine": engine_name, "clause": clause, "witness": dict(witness)},
                           timeout=timeout, heartbeat=heartbeat) for clause, witness in items]
    return [TaskResult("raised", error=v["raised"], where=v["where"]) if "raised" in v
            else TaskResult("done", value=v) for v in batch.value]


class Pass:
    """One interpreter mode's pass over the laws, in a supervised worker."""

    def __init__(self, engine_name: str, *, optimized: bool, profile: str, seed_value: int,
                 xfails: str | None, clauses: Sequence[str], progress: Progress | None,
                 clause_timeout: float, example_timeout: float, domain: str = DEFAULT_DOMAIN,
                 known: Mapping[tuple[str, str], Sequence[str]] | None = None, share: str | None = None,
                 corpus: str | None = None) -> None:
        self.engine_name = engine_name
        self.corpus = corpus
        """The corpus file the laws are fed (:mod:`~kvcontract.conformance.engines.corpora`), if any."""
        self.known = known or {}
        self.share = share
        """The check's share directory (:mod:`~kvcontract.conformance.run.share`), if its passes share."""
        self.mode = "optimized" if optimized else "normal"
        self.domain = domain
        env = engine_env(engine_name, os.environ)  # a declared engine's own environment (EnvironmentMissing)
        if domain_mode(env.get(DOMAIN_ENV)) != domain:  # every task's domain (unset: the default)
            env[DOMAIN_ENV] = domain
        self.worker = Worker.take(optimized=optimized, env=env)  # a worker the command line started early
        self.profile, self.seed, self.xfails = profile, seed_value, xfails
        self.clauses = list(clauses)
        self.progress = progress
        self.clause_timeout, self.example_timeout = clause_timeout, example_timeout
        self.records: list[Record] = []
        self.runs: list[ClauseRun] = []
        self.log: list[str] = []
        self.problem: BaseException | None = None
        self.finished = threading.Event()
        """Set when this pass has run its clauses (or stopped)."""

    def info(self) -> dict[str, Any]:
        result = self.worker.run(tasks.ENGINE_INFO_TASK, {"engine": self.engine_name}, timeout=ENGINE_LOAD_TIMEOUT_S)
        if not result.ok:
            raise EngineLoadError(result.error or result.status)
        info: dict[str, Any] = result.value
        return info

    def run(self) -> None:
        try:
            if self.clauses:
                self.info()  # loaded already (run_check); a worker that died since reloads here
                self._prepare()
            for index, clause in enumerate(self.clauses, 1):
                if self.worker.stopped:
                    break
                if not self.worker.alive():
                    # Load the engine first, under the load limit: importing an engine (a
                    # source tree compiling its .pyc) may take longer than one example may.
                    self.worker.run(tasks.ENGINE_INFO_TASK, {"engine": self.engine_name},
                                    timeout=ENGINE_LOAD_TIMEOUT_S)
                self._say(f"[{self.mode} {index}/{len(self.clauses)}] {clause} ...")
                result = self.worker.run(
                    tasks.LAW_TASK,
                    {"engine": self.engine_name, "clause": clause, "profile": self.profile,
                     "seed": self.seed, "xfails": self.xfails, "domain": self.domain, "share": self.share,
                     "corpus": self.corpus,
                     "known": list(self.known.get((clause, self.mode), ()))},
                    timeout=self.clause_timeout, heartbeat=self.example_timeout)
                if result.status == "stopped":
                    break  # interrupted: the clause did not run to its end, it is not recorded
                if result.ok:
                    records = [Record.model_validate(r) for r in result.value["records"]]
                    run = ClauseRun.model_validate(result.value["run"])
                else:
                    records = [failure_record(clause, self.mode, result)]
                    run = ClauseRun(clause=clause, mode=self.mode, status="error",  # type: ignore[arg-type]
                                    seconds=round(result.seconds, 3))
                    if result.status == "timeout" and self.example_timeout > AFTER_HANG_EXAMPLE_TIMEOUT_S:
                        # The engine has hung once: it likely hangs on the next clause's like example
                        # too. Its examples take milliseconds; waiting the full limit each time made
                        # a hanging engine's run take many minutes.
                        self.example_timeout = AFTER_HANG_EXAMPLE_TIMEOUT_S
                        self._say(f"[{self.mode}] the engine hung: the per-example limit is now "
                                  f"{AFTER_HANG_EXAMPLE_TIMEOUT_S:g}s for the rest of this pass")
                self.records += records
                self.runs.append(run)
                found = sum(r.status in ("fail", "xfail") for r in records)
                self._say(f"[{self.mode} {index}/{len(self.clauses)}] {clause} {run.status}"
                          f"{f' ({found} findings)' if found else ''} ({run.examples} examples, {run.seconds:.2f}s)")
        except BaseException as exc:  # noqa: BLE001 - reported by the supervisor after join
            self.problem = exc
        finally:
            self.log = self.worker.log_tail()
            self.finished.set()

    def _prepare(self) -> None:
        """The examples the passes share, before the -O worker's first clause (how it divides them
        with the normal worker, which traces every finding after its pass and claims a shape only
        when a clause needs it unclaimed: :mod:`~kvcontract.conformance.run.share`). A failure
        costs only the sharing: each clause then works out its own examples."""
        if self.share and self.mode == "optimized":
            self.worker.run(tasks.PREPARE_TASK, {"engine": self.engine_name, "clauses": self.clauses,
                                                 "profile": self.profile, "seed": self.seed,
                                                 "domain": self.domain, "share": self.share,
                                                 "corpus": self.corpus},
                            timeout=self.clause_timeout, heartbeat=self.example_timeout)

    def replay(self, clause: str, witness: Mapping[str, Any]) -> TaskResult:
        return self.worker.run(tasks.REPLAY_TASK,
                               {"engine": self.engine_name, "clause": clause, "witness": dict(witness)},
                               timeout=self.clause_timeout, heartbeat=self.example_timeout)

    def replay_all(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> list[TaskResult]:
        """:func:`replay_all` in this pass's worker."""
        return replay_all(self.worker, self.engine_name, items, timeout=self.clause_timeout,
                          heartbeat=self.example_timeout)

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def close(self) -> None:
        self.worker.close()

    def not_run(self) -> list[NotRun]:
        """The clauses of this pass without a finished run."""
        done = {r.clause for r in self.runs}
        return [NotRun(clause=c, mode=self.mode) for c in self.clauses if c not in done]  # type: ignore[arg-type]


def record_domain(report: Report, domain: str) -> Report:
    """``report`` with the domain it drew from (``report.domain``, where the report model has it;
    :func:`report_json` writes it in any case)."""
    if "domain" in type(report).model_fields:
        report.domain = domain  # type: ignore[attr-defined,unused-ignore]
    else:
        _DOMAINS[id(report)] = domain
    return report


_DOMAINS: dict[int, str] = {}


def report_json(report: Report) -> str:
    """The report's JSON with its top-level ``domain`` (the domain the run drew from)."""
    if "domain" in type(report).model_fields or id(report) not in _DOMAINS:
        return report.model_dump_json(indent=2) + "\n"
    data = {"domain": _DOMAINS[id(report)], **report.model_dump(mode="json")}
    return json.dumps(data, indent=2) + "\n"


def write_report_json(report: Report, path: str | Path) -> None:
    """:func:`~kvcontract.conformance.reports.check.write_json`, with the domain recorded."""
    write_atomic(path, report_json(report))


def selected_clauses(clauses: Sequence[str] | None) -> list[str]:
    """The laws' clauses to run, in SPEC.md order (derived clauses are judged from them)."""
    if not clauses:
        return [law_.clause for law_ in LAWS]
    wanted = set(clauses)
    for derived, sources in DERIVED.items():
        if derived in wanted:
            wanted |= set(sources)
    return [law_.clause for law_ in LAWS if law_.clause in wanted]


class Loads:
    """Each pass's worker loads the engine at once, side by side (an engine's import is most of a
    quick check), and each pass starts on its clauses as soon as its own worker has: the two loads
    often end seconds apart, and the first worker used to wait for the second. A load that fails
    stops every pass (:meth:`raise_first` raises its :class:`EngineLoadError`)."""

    def __init__(self, passes: Mapping[str, Pass], *, default_xfails: bool) -> None:
        self.passes, self.default_xfails = passes, default_xfails
        self.infos: dict[str, dict[str, Any]] = {}
        self.problems: list[BaseException] = []
        self._reading: threading.Thread | None = None
        self._lock = threading.Lock()

    def then(self, mode: str, run: Callable[[], None]) -> Callable[[], None]:
        """A thread's body: ``mode``'s load, then ``run`` (its pass)."""
        def body() -> None:
            p = self.passes[mode]
            start = time.perf_counter()
            try:
                info = self.infos[mode] = p.info()
            except BaseException as exc:  # noqa: BLE001 - raised by raise_first, in the caller's thread
                self.problems.append(exc)
                for other in self.passes.values():
                    other.worker.stop()
                    other.finished.set()
                return
            p._say(f"[{mode}] {info['name']} {info['version']} loaded ({time.perf_counter() - start:.1f}s)")
            if self.default_xfails and info.get("expectations"):
                p.xfails = str(info["expectations"])
            self._read(p.xfails)
            run()
        return body

    def _read(self, xfails: str | None) -> None:
        """Parse the expectations file in this process while the passes run (it took 0.3 s,
        after both had ended); :func:`load_xfails` keeps what it parsed. A file that cannot be
        read is reported by the caller's own reading, after the passes."""
        with self._lock:
            if xfails is None or self._reading is not None:
                return
            self._reading = threading.Thread(target=_read_quietly, args=(xfails,), name="kvcontract-xfails",
                                             daemon=True)
            self._reading.start()

    def expectations(self, xfails: str | None) -> Expectations | None:
        """The expectations file ``xfails`` (read while the passes ran, where it was)."""
        if self._reading is not None:
            self._reading.join()
        return load_xfails(xfails) if xfails else None

    def raise_first(self) -> None:
        if self.problems:
            raise self.problems[0]


def _read_quietly(xfails: str) -> None:
    with contextlib.suppress(Exception):
        load_xfails(xfails)


def run_check(engine_name: str, *, profile: str = "default", seed_value: int = 0,
              optimize: str = "both", xfails: str | None = None, use_default_xfails: bool = False,
              clauses: Sequence[str] | None = None, progress: Progress | None = None,
              clause_timeout: float = CLAUSE_TIMEOUT_S, example_timeout: float = EXAMPLE_TIMEOUT_S,
              domain: str = DEFAULT_DOMAIN,
              known: Mapping[tuple[str, str], Sequence[str]] | None = None,
              corpus: str | None = None) -> Report:
    """The main job: every clause against ``engine_name``, each mode in its own
    supervised worker, concurrently, drawing from ``domain`` (``producible``: what the engine's
    own code builds; ``constructor``: every field and value). ``known``: per (clause, mode), the
    signatures a baseline already has, which a new finding's witness avoids where it can.
    ``corpus``: the corpus file every law is fed first (:mod:`~kvcontract.conformance.engines.corpora`).
    Raises :class:`EngineLoadError` when the engine cannot be loaded at all."""
    domain = domain_mode(domain)
    start = time.perf_counter()
    selected = selected_clauses(clauses)
    modes = optimize_modes(optimize)
    shared = tempfile.mkdtemp(prefix="kvcontract-share-") if len(modes) > 1 else None
    store = share.store_dir() if shared else None
    if shared:
        share.seed_run(Path(shared), store)
    passes: dict[str, Pass] = {m: Pass(engine_name, optimized=m == "optimized", profile=profile, seed_value=seed_value,
                      xfails=xfails, clauses=selected, progress=progress, clause_timeout=clause_timeout,
                      example_timeout=example_timeout, domain=domain, known=known, share=shared,
                      corpus=corpus) for m in modes}
    info: dict[str, Any] = {}
    expectations = None
    threads: list[threading.Thread] = []
    loads = Loads(passes, default_xfails=use_default_xfails and xfails is None)
    try:
        early = EarlyTracing(passes, engine_name, timeout=clause_timeout, heartbeat=example_timeout)
        threads = [threading.Thread(target=loads.then(m, early.run if m == "normal" else p.run),
                                    name=f"kvcontract-{m}") for m, p in passes.items()]
        for mode, p in passes.items():  # the first line at once: an engine's import takes seconds
            p._say(f"[{mode}] loading {p.engine_name} in a "
                   f"{'python -O' if mode == 'optimized' else 'python'} worker ...")
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        loads.raise_first()
        info = loads.infos[modes[0]]
        xfails = passes[modes[0]].xfails
        expectations = loads.expectations(xfails)
        for p in passes.values():
            if p.problem is not None:
                raise p.problem
        records = [r for p in passes.values() for r in p.records]
        runs = [r for p in passes.values() for r in p.runs]
        normal, optimized = passes.get("normal"), passes.get("optimized")
        records += derive_optimize_only(records, normal=normal.replay_all if normal else None,
                                        optimized=optimized.replay_all if optimized else None,
                                        expectations=expectations, complete=True)
        report = record_domain(_report(engine_name, info, profile, seed_value, modes, expectations, records, runs,
                                       passes, start, corpus), domain)
        reviews = {e.defect: e.reason for e in expectations.entries if e.defect} if expectations else {}
        trace_defects(report, passes["normal"].worker if "normal" in passes else None, engine_name,
                      progress=progress, timeout=clause_timeout, heartbeat=example_timeout, reviews=reviews,
                      located=early.located, corpus=corpus)
    except KeyboardInterrupt as exc:
        # SIGINT, or SIGTERM through the command line's handler: stop every worker first
        # (its process group killed), then keep what ran.
        for p in passes.values():
            p.worker.stop()
        for t in threads:
            t.join(timeout=STOP_JOIN_S)
        records = [r for p in passes.values() for r in p.records]
        runs = [r for p in passes.values() for r in p.runs]
        info = info or next(iter(loads.infos.values()), {})  # the passes load and run in their threads
        judged_by = passes[modes[0]].xfails
        if expectations is None and judged_by:
            with contextlib.suppress(Exception):  # what could not be read was not judged either
                expectations = load_xfails(judged_by)
        report = record_domain(_report(engine_name, info, profile, seed_value, modes, expectations, records, runs,
                                       passes, start, corpus), domain)
        report.complete = False
        report.not_run = [n for p in passes.values() for n in p.not_run()]
        raise CheckInterrupted(interrupt_signal(exc), report, len(runs), len(selected) * len(modes)) from None
    finally:
        for p in passes.values():
            p.worker.release()
        for p in passes.values():
            p.close()
        if shared:
            share.keep_run(Path(shared), store)
            shutil.rmtree(shared, ignore_errors=True)
    return report


def _report(engine_name: str, info: Mapping[str, Any], profile: str, seed_value: int, modes: list[Mode],
            expectations: Expectations | None, records: list[Record], runs: list[ClauseRun],
            passes: Mapping[str, Pass], start: float, corpus: str | None = None) -> Report:
    order = {m: i for i, m in enumerate(("normal", "optimized"))}
    records.sort(key=lambda r: (CLAUSE_ORDER.get(r.clause, len(CLAUSE_ORDER)), order[r.mode],
                                STATUS_RANK[r.status] * -1, r.signature))
    fed = read_corpus(corpus) if corpus else None
    coverage: dict[str, list[str]] = {}
    for run in runs:
        for pair in run.exercised:
            coverage.setdefault(pair, [])
            if run.clause not in coverage[pair]:
                coverage[pair].append(run.clause)
    return Report(kit_version=kvcontract.__version__, engine=info.get("name", engine_name),
                  engine_version=info.get("version", "unknown"), profile=profile, seed=seed_value, modes=modes,
                  expectations=expectations.path if expectations else None,
                  engine_source=info.get("source"), records=records, clauses=runs, coverage=coverage,
                  coverage_summary=str(info.get("coverage_summary", "")),
                  engine_log={m: p.log for m, p in passes.items() if p.log},
                  tables=[t.name for t in fed.tables] if fed else [],
                  table_kinds={t.name: sorted(t.kinds()) for t in fed.tables} if fed else {},
                  summary=summarize(records, time.perf_counter() - start))
