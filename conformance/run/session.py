"""Runs the laws against an engine: systematic phase, random phase, expectations.

Two halves:

- **in a worker** (:func:`run_law`, and the task functions ``*_task`` that the
  supervised workers of :mod:`kvcontract.conformance.run.worker` call): one law in
  this interpreter. The systematic phase runs every enumerated example; the
  random phase (hypothesis) keeps searching after each finding and shrinks
  every new signature to its own witness. Every distinct signature is one
  finding. Pinned witnesses of the expectations file are replayed on top, so a
  known failure (xfail) never hides a new one (fail), and a fixed one shows as
  xpass.
- **in the command line** (:func:`run_check`): the normal and the ``python -O``
  pass, each in its own supervised worker, concurrently. A law that hangs or
  crashes its worker becomes an ``error`` record naming the clause and the
  example being run; a fresh worker takes the remaining clauses. The report is
  always complete.
"""

from __future__ import annotations

import copy
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

import kvcontract
from kvcontract.conformance.contract.laws import CLAUSE_ORDER, DERIVED, LAWS, law
from kvcontract.conformance.contract.model import Example, KitFailure, Law, Violation, domain_of
from kvcontract.conformance.contract.systematic import all_pairs, exercised
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.conformance.reports.check import ClauseRun, Mode, Record, Report, Status, summarize
from kvcontract.conformance.reports.expectations import Expectation, Expectations, load_xfails
from kvcontract.conformance.run.worker import Emit, TaskResult, Worker, last_frame
from kvcontract.spec import clause as catalogue_clause

PROFILES: dict[str, int] = {"quick": 0, "default": 100, "thorough": 1000}
"""Profile -> random examples per law after the systematic phase (quick: none;
a law without a systematic enumerator then draws 25)."""
QUICK_FALLBACK_EXAMPLES = 25
CLAUSE_TIMEOUT_S = 300.0
"""Seconds one clause may run in a worker before it is stopped."""
EXAMPLE_TIMEOUT_S = 30.0
"""Seconds one example may run (no progress) before the engine counts as hung."""
ENGINE_LOAD_TIMEOUT_S = 180.0

Progress = Callable[[str], None]


def mode_name() -> Mode:
    return "optimized" if sys.flags.optimize else "normal"


def _neutral_hypothesis() -> None:
    """Make a seed draw the same examples in every process: hypothesis mixes
    constants found in the modules a process has loaded into its draws, and the
    normal and ``-O`` workers load different modules."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return
    empty = providers.Constants()  # type: ignore[attr-defined]
    if hasattr(providers, "_get_local_constants"):
        providers._get_local_constants = lambda: empty


_neutral_hypothesis()


# -- one law, in this interpreter ----------------------------------------------------------


class _Findings:
    """Distinct findings of one law run, keyed by signature, and its errors."""

    def __init__(self) -> None:
        self.found: dict[str, tuple[Example, Violation, str]] = {}
        self.errors: dict[str, tuple[Example, BaseException]] = {}
        self.examples = 0
        self.not_driven = 0
        """Examples the kit could not take to the engine (its own code failed first)."""
        self.pairs: set[tuple[str, str]] = set()

    def judge(self, engine: Engine, law_: Law, ex: Example, phase: str, emit: Emit | None) -> Violation | None:
        self.examples += 1
        self.pairs |= exercised([*ex.specs, *(s for _, s in ex.table)])
        pristine = ex.to_json()  # an engine that writes into its inputs must not rewrite the witness
        if emit is not None:
            emit({"clause": law_.clause, "phase": phase, "example": pristine})
        try:
            law_.check(engine, ex)
        except Violation as violation:
            new = [sig for sig in violation.signatures if sig not in self.found]
            if new:  # the example is rebuilt only for a new finding: most violations repeat one
                violation.example = law_.example_type.from_json(pristine)
                for sig in new:
                    self.found[sig] = (violation.example, violation, phase)
            return violation
        except Exception as exc:  # noqa: BLE001 - the kit could not judge: an error, not a finding
            self.not_driven += 1
            key = f"{type(exc).__name__}: {exc}" if isinstance(exc, KitFailure) else \
                f"{type(exc).__name__} at {last_frame(exc)}"
            self.errors.setdefault(key, (ex, exc))
        return None


def _examples_budget(law_: Law, profile: str) -> int:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    if law_.systematic is None and profile == "quick":
        return QUICK_FALLBACK_EXAMPLES
    return PROFILES[profile]


def _hypothesis_settings(examples: int, shrink: bool) -> settings:
    phases = (Phase.explicit, Phase.generate, Phase.shrink) if shrink else (Phase.explicit, Phase.generate)
    return settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                    report_multiple_bugs=False, print_blob=False, phases=phases)


class _Stop(Exception):
    pass


def _random_phase(engine: Engine, law_: Law, examples: int, seed_value: int, findings: _Findings,
                  emit: Emit | None) -> list[str]:
    """Search without stopping at a finding; returns the signatures it found first."""
    before = set(findings.found)
    strategy = law_.strategy(domain_of(engine))

    @_hypothesis_settings(examples, shrink=False)
    @seed(seed_value)
    @given(strategy)
    def probe(ex: Example) -> None:
        findings.judge(engine, law_, ex, "random", emit)

    probe()
    return [s for s in findings.found if s not in before]


def _shrink(engine: Engine, law_: Law, examples: int, seed_value: int, wanted: str,
            emit: Emit | None) -> tuple[Example, Violation] | None:
    """The same search again, failing only on ``wanted``: hypothesis draws the
    same examples up to the first one with that signature, then shrinks it."""
    strategy = law_.strategy(domain_of(engine))
    last: dict[str, Any] = {}

    @_hypothesis_settings(examples, shrink=True)
    @seed(seed_value)
    @given(strategy)
    def probe(ex: Example) -> None:
        if emit is not None:
            emit({"clause": law_.clause, "phase": "shrink", "example": ex.to_json()})
        pristine = copy.deepcopy(ex)
        try:
            law_.check(engine, ex)
        except Violation as violation:
            if wanted in violation.signatures:
                last["found"] = (pristine, violation)
                raise _Stop() from None
        except Exception:  # noqa: BLE001, S110 - errors were recorded by the search
            pass

    try:
        probe()
    except _Stop:
        pass
    found: tuple[Example, Violation] | None = last.get("found")
    return found


def _replay(engine: Engine, law_: Law, witness: Mapping[str, Any]) -> Violation | None:
    example = law_.example_type.from_json(witness)
    try:
        law_.check(engine, copy.deepcopy(example))
    except Violation as violation:
        violation.example = example
        return violation
    return None


def run_law(engine: Engine, law_: Law, profile: str, seed_value: int,
            expectations: Expectations | None, emit: Emit | None = None) -> tuple[list[Record], ClauseRun]:
    """One clause in this interpreter: every distinct finding, each expectation
    judged by its pinned witness, errors of the kit's own code apart."""
    mode = mode_name()
    start = time.perf_counter()
    base: dict[str, Any] = {"clause": law_.clause, "title": law_.title, "level": law_.level, "mode": mode}
    skip = law_.requires(engine)
    domain = domain_of(engine)
    total_pairs = len(all_pairs(domain))
    if skip:
        return [Record(**base, status="skip", message=skip)], ClauseRun(
            clause=law_.clause, mode=mode, status="skip", total_pairs=total_pairs)
    optimized = bool(sys.flags.optimize)
    findings = _Findings()
    systematic = 0
    try:
        if law_.systematic is not None:
            for ex in law_.systematic(domain):
                findings.judge(engine, law_, ex, "systematic", emit)
        if law_.engine_examples is not None:
            for ex in law_.engine_examples(engine):
                findings.judge(engine, law_, ex, "systematic", emit)
            systematic = findings.examples
        budget = _examples_budget(law_, profile)
        if budget:
            for new in _random_phase(engine, law_, budget, seed_value, findings, emit):
                shrunk = _shrink(engine, law_, budget, seed_value, new, emit)
                if shrunk is not None:
                    findings.found[new] = (shrunk[0], shrunk[1], "random")
    except Exception as exc:  # noqa: BLE001 - a broken strategy or enumerator is the kit's error
        findings.errors.setdefault(f"{type(exc).__name__} at {last_frame(exc)}", (Example(), exc))
    records: list[Record] = []
    expected = expectations.for_clause(law_.clause, mode) if expectations else []
    covered: set[str] = set()
    for entry in expected:
        violation = _replay_safely(engine, law_, entry)
        if isinstance(violation, Violation) and entry.signature in violation.signatures:
            covered.add(entry.signature)
            example = violation.example or Example()
            records.append(Record(**base, status="xfail", signature=entry.signature, examples=1,
                                  message=f"{entry.reason} [witness: {violation.message}]",
                                  witness=entry.witness, phase="witness",
                                  snippet=law_.snippet(engine, example, violation, optimized)))
        else:
            now = ("passes" if violation is None else
                   f"fails differently now ({', '.join(violation.signatures)})" if isinstance(violation, Violation)
                   else f"cannot be judged ({violation})")
            records.append(Record(**base, status="xpass", signature=entry.signature, examples=1,
                                  witness=entry.witness, phase="witness",
                                  message=f"expected to fail ({entry.reason}) but the pinned witness {now}"))
    for sig, (ex, violation, phase) in sorted(findings.found.items()):
        if sig in covered:
            continue
        records.append(Record(**base, status="fail", signature=sig, examples=1, phase=phase,
                              message=violation.message, witness=ex.to_json(),
                              snippet=law_.snippet(engine, ex, violation, optimized)))
    for key, (bad_example, error) in sorted(findings.errors.items()):
        records.append(Record(**base, status="error", signature=f"kit-error:{type(error).__name__}",
                              message=f"the kit could not judge an example: {key}",
                              where=last_frame(error), witness=bad_example.to_json() or None))
    driven = findings.examples - findings.not_driven
    if not records and driven == 0:
        records.append(Record(**base, status="skip", message="no example reached the engine"))
    elif not records:
        records.append(Record(**base, status="pass", examples=driven))
    seconds = time.perf_counter() - start
    for r in records:
        r.seconds = round(seconds, 3)
    run = ClauseRun(clause=law_.clause, mode=mode, status=_worst(records), examples=findings.examples,
                    driven=driven, not_driven=findings.not_driven,
                    systematic_examples=systematic, seconds=round(seconds, 3),
                    covered_pairs=len(findings.pairs), total_pairs=total_pairs,
                    findings=sum(r.status in ("fail", "xfail") for r in records),
                    exercised=sorted(f"{k}.{f}" for k, f in findings.pairs))
    return records, run


def _replay_safely(engine: Engine, law_: Law, entry: Expectation) -> Violation | str | None:
    try:
        return _replay(engine, law_, entry.witness)
    except Exception as exc:  # noqa: BLE001 - an unreadable witness is the file's problem, reported
        return f"{type(exc).__name__}: {exc}"


STATUS_RANK = {"error": 5, "fail": 4, "xpass": 3, "xfail": 2, "pass": 1, "skip": 0}


def _worst(records: Sequence[Record]) -> Status:
    return max((r.status for r in records), key=STATUS_RANK.__getitem__, default="pass")


# -- worker tasks ------------------------------------------------------------------------------

_ENGINES: dict[str, Engine] = {}


def _engine(name: str) -> Engine:
    if name not in _ENGINES:
        from kvcontract.conformance.engines.registry import resolve_engine

        engine = resolve_engine(name)
        try:
            engine.kvcontract_ref = name  # type: ignore[attr-defined]  # snippets load it by this name
        except AttributeError:
            pass
        _ENGINES[name] = engine
    return _ENGINES[name]


def engine_info_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """Load the engine; its name, version and bundled expectations file."""
    from kvcontract.conformance.contract.surface import coverage_summary
    from kvcontract.conformance.reports.expectations import default_xfails

    engine = _engine(str(args["engine"]))
    found = default_xfails(engine.name, engine.version)
    source = getattr(engine, "source_info", None)
    return {"name": engine.name, "version": engine.version, "expectations": str(found) if found else None,
            "coverage_summary": coverage_summary(engine), "source": source() if callable(source) else None}


def law_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """One clause in this worker: its records and its run summary (JSON)."""
    engine = _engine(str(args["engine"]))
    path = args.get("xfails")
    expectations = load_xfails(str(path)) if path else None
    records, run = run_law(engine, law(str(args["clause"])), str(args["profile"]), int(args["seed"]),
                           expectations, emit)
    return {"records": [r.model_dump() for r in records], "run": run.model_dump()}


def replay_all_task(args: Mapping[str, Any], emit: Emit) -> list[dict[str, Any]]:
    """:func:`replay_task` for many (clause, witness) pairs, one progress event each; a witness
    whose replay raises gets that exception as its result, the others still run."""
    engine = _engine(str(args["engine"]))
    out: list[dict[str, Any]] = []
    for clause_id, witness in args["items"]:
        emit({"clause": clause_id, "phase": "replay", "example": witness})
        try:
            violation = _replay(engine, law(str(clause_id)), witness)
        except Exception as exc:  # noqa: BLE001 - that witness's result, as replay_task's worker reports it
            out.append({"raised": f"{type(exc).__name__}: {exc}", "where": last_frame(exc)})
            continue
        out.append({"violation": violation is not None, "signatures": violation.signatures if violation else []})
    return out


def replay_task(args: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
    """Replay one witness of one clause here: does it still violate, with which signature?"""
    engine = _engine(str(args["engine"]))
    violation = _replay(engine, law(str(args["clause"])), args["witness"])
    return {"violation": violation is not None, "signatures": violation.signatures if violation else []}


# -- the command line's side: supervised passes ---------------------------------------------------


def failure_record(clause: str, mode: str, result: TaskResult) -> Record:
    """An ``error`` record for a clause whose worker hung, crashed or raised."""
    c = catalogue_clause(clause)
    example = (result.last_event or {}).get("example")
    phase = (result.last_event or {}).get("phase", "")
    if result.status == "raised":
        message = f"the kit failed running this clause: {result.error}"
    else:
        during = ""
        if example is not None:
            shown = json.dumps(example, separators=(",", ":"))
            during = f" while running a {phase} example: {shown if len(shown) <= 600 else shown[:600] + '...'}"
        message = f"{result.error}{during}"
    return Record(clause=clause, title=c.title, level=c.level, mode=mode, status="error",  # type: ignore[arg-type]
                  signature=f"worker-{result.status}", message=message, where=result.where,
                  witness=example, phase=phase, seconds=round(result.seconds, 3))


class EngineLoadError(Exception):
    """The engine could not be loaded in a worker (unknown name, not installed)."""


class Pass:
    """One interpreter mode's pass over the laws, in a supervised worker."""

    def __init__(self, engine_name: str, *, optimized: bool, profile: str, seed_value: int,
                 xfails: str | None, clauses: Sequence[str], progress: Progress | None,
                 clause_timeout: float, example_timeout: float) -> None:
        self.engine_name = engine_name
        self.mode = "optimized" if optimized else "normal"
        self.worker = Worker(optimized=optimized)
        self.profile, self.seed, self.xfails = profile, seed_value, xfails
        self.clauses = list(clauses)
        self.progress = progress
        self.clause_timeout, self.example_timeout = clause_timeout, example_timeout
        self.records: list[Record] = []
        self.runs: list[ClauseRun] = []
        self.log: list[str] = []
        self.problem: BaseException | None = None

    def info(self) -> dict[str, Any]:
        result = self.worker.run("kvcontract.conformance.run.session:engine_info_task", {"engine": self.engine_name},
                                 timeout=ENGINE_LOAD_TIMEOUT_S)
        if not result.ok:
            raise EngineLoadError(result.error or result.status)
        info: dict[str, Any] = result.value
        return info

    def run(self) -> None:
        try:
            if self.clauses:
                self.info()  # loaded already (run_check); a worker that died since reloads here
            for index, clause in enumerate(self.clauses, 1):
                if not self.worker.alive():
                    # Load the engine first, under the load limit: importing an engine (a
                    # source tree compiling its .pyc) may take longer than one example may.
                    self.worker.run("kvcontract.conformance.run.session:engine_info_task",
                                    {"engine": self.engine_name}, timeout=ENGINE_LOAD_TIMEOUT_S)
                self._say(f"[{self.mode} {index}/{len(self.clauses)}] {clause} ...")
                result = self.worker.run(
                    "kvcontract.conformance.run.session:law_task",
                    {"engine": self.engine_name, "clause": clause, "profile": self.profile,
                     "seed": self.seed, "xfails": self.xfails},
                    timeout=self.clause_timeout, heartbeat=self.example_timeout)
                if result.ok:
                    records = [Record.model_validate(r) for r in result.value["records"]]
                    run = ClauseRun.model_validate(result.value["run"])
                else:
                    records = [failure_record(clause, self.mode, result)]
                    run = ClauseRun(clause=clause, mode=self.mode, status="error",  # type: ignore[arg-type]
                                    seconds=round(result.seconds, 3))
                self.records += records
                self.runs.append(run)
                found = sum(r.status in ("fail", "xfail") for r in records)
                self._say(f"[{self.mode} {index}/{len(self.clauses)}] {clause} {run.status}"
                          f"{f' ({found} findings)' if found else ''} ({run.examples} examples, {run.seconds:.2f}s)")
        except BaseException as exc:  # noqa: BLE001 - reported by the supervisor after join
            self.problem = exc
        finally:
            self.log = self.worker.log_tail()

    def replay(self, clause: str, witness: Mapping[str, Any]) -> TaskResult:
        return self.worker.run("kvcontract.conformance.run.session:replay_task",
                               {"engine": self.engine_name, "clause": clause, "witness": dict(witness)},
                               timeout=self.clause_timeout, heartbeat=self.example_timeout)

    def replay_all(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> list[TaskResult]:
        """:meth:`replay` of each (clause, witness), in one task (each witness its own heartbeat);
        when that task hangs or crashes, witness by witness, so the culprit gets its own record."""
        batch = self.worker.run("kvcontract.conformance.run.session:replay_all_task",
                                {"engine": self.engine_name, "items": [[c, dict(w)] for c, w in items]},
                                timeout=self.clause_timeout, heartbeat=self.example_timeout)
        if not batch.ok:
            return [self.replay(clause, witness) for clause, witness in items]
        return [TaskResult("raised", error=v["raised"], where=v["where"]) if "raised" in v
                else TaskResult("done", value=v) for v in batch.value]

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def close(self) -> None:
        self.worker.close()


def _derived(records: list[Record], normal: Pass | None, expectations: Expectations | None) -> list[Record]:
    """ERROR-OPTIMIZE-1: each finding of a source clause under ``-O`` is replayed in the
    normal interpreter; one that does not reproduce there is a finding of its own
    (signature ``optimized-only:SOURCE:SIGNATURE``)."""
    out: list[Record] = []
    for clause_id, sources in DERIVED.items():
        c = catalogue_clause(clause_id)
        base = {"clause": clause_id, "title": c.title, "level": c.level}
        optimized = [r for r in records if r.mode == "optimized" and r.clause in sources
                     and r.status in ("fail", "xfail") and r.witness]
        if any(r.mode == "normal" and r.clause in sources for r in records):
            out.append(Record(**base, mode="normal", status="skip",  # type: ignore[arg-type]
                              message="judged in the optimized interpreter"))
        if not any(r.mode == "optimized" and r.clause in sources for r in records):
            continue
        if normal is None:
            out.append(Record(**base, mode="optimized", status="skip",  # type: ignore[arg-type]
                              message="needs the normal pass to compare with"))
            continue
        expected = {e.signature: e for e in expectations.for_clause(clause_id, "optimized")} if expectations else {}
        found: list[Record] = []
        firsts: dict[str, Record] = {}
        for r in optimized:
            firsts.setdefault(f"optimized-only:{r.clause}:{r.signature}", r)
        results = normal.replay_all([(r.clause, r.witness or {}) for r in firsts.values()])
        for evidence, result in zip(firsts.values(), results, strict=True):
            sig = f"optimized-only:{evidence.clause}:{evidence.signature}"
            if not result.ok:
                found.append(failure_record(clause_id, "optimized", result))
                continue
            if result.value["violation"] and evidence.signature in result.value["signatures"]:
                continue
            entry = expected.get(sig)
            message = (f"{evidence.clause} holds in the normal interpreter but fails under python -O on its "
                       f"witness: {evidence.message}")
            found.append(Record(**base, mode="optimized", status="xfail" if entry else "fail",  # type: ignore[arg-type]
                                signature=sig, examples=1, phase="witness",
                                message=f"{entry.reason} [{message}]" if entry else message,
                                snippet=evidence.snippet, witness=evidence.witness))
        for sig, entry in expected.items():
            if not any(f.signature == sig for f in found):
                found.append(Record(**base, mode="optimized", status="xpass", signature=sig,  # type: ignore[arg-type]
                                    witness=entry.witness, message=f"expected to fail ({entry.reason}) "
                                    "but no finding of its source clause differs under -O any more"))
        out += found or [Record(**base, mode="optimized", status="pass",  # type: ignore[arg-type]
                                message=f"every -O finding of {', '.join(sources)} fails in the normal "
                                "interpreter too")]
    return out


def selected_clauses(clauses: Sequence[str] | None) -> list[str]:
    """The laws' clauses to run, in SPEC.md order (derived clauses are judged from them)."""
    if not clauses:
        return [law_.clause for law_ in LAWS]
    wanted = set(clauses)
    for derived, sources in DERIVED.items():
        if derived in wanted:
            wanted |= set(sources)
    return [law_.clause for law_ in LAWS if law_.clause in wanted]


def _load_engine_everywhere(passes: Mapping[str, Pass]) -> dict[str, dict[str, Any]]:
    """Each pass's worker loads the engine at once, side by side (an engine's import is most
    of a quick check); the first load that fails raises its :class:`EngineLoadError`."""
    infos: dict[str, dict[str, Any]] = {}
    problems: dict[str, BaseException] = {}

    def load(mode: str) -> None:
        start = time.perf_counter()
        try:
            infos[mode] = passes[mode].info()
            passes[mode]._say(f"[{mode}] {infos[mode]['name']} {infos[mode]['version']} loaded "
                              f"({time.perf_counter() - start:.1f}s)")
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
            problems[mode] = exc

    threads = [threading.Thread(target=load, args=(m,), name=f"kvcontract-load-{m}") for m in passes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for mode in passes:
        if mode in problems:
            raise problems[mode]
    return infos


def run_check(engine_name: str, *, profile: str = "default", seed_value: int = 0,
              optimize: str = "both", xfails: str | None = None, use_default_xfails: bool = False,
              clauses: Sequence[str] | None = None, progress: Progress | None = None,
              clause_timeout: float = CLAUSE_TIMEOUT_S, example_timeout: float = EXAMPLE_TIMEOUT_S) -> Report:
    """The main job: every clause against ``engine_name``, each mode in its own
    supervised worker, concurrently. Raises :class:`EngineLoadError` when the
    engine cannot be loaded at all."""
    start = time.perf_counter()
    selected = selected_clauses(clauses)
    modes = [m for m, on in (("normal", optimize in ("off", "both")), ("optimized", optimize in ("on", "both")))
             if on]
    passes = {m: Pass(engine_name, optimized=m == "optimized", profile=profile, seed_value=seed_value,
                      xfails=xfails, clauses=selected, progress=progress, clause_timeout=clause_timeout,
                      example_timeout=example_timeout) for m in modes}
    try:
        info = _load_engine_everywhere(passes)[modes[0]]
        if use_default_xfails and xfails is None and info.get("expectations"):
            xfails = str(info["expectations"])
            for p in passes.values():
                p.xfails = xfails
        expectations = load_xfails(xfails) if xfails else None
        threads = [threading.Thread(target=p.run, name=f"kvcontract-{m}") for m, p in passes.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in passes.values():
            if p.problem is not None:
                raise p.problem
        records = [r for p in passes.values() for r in p.records]
        runs = [r for p in passes.values() for r in p.runs]
        records += _derived(records, passes.get("normal"), expectations)
    finally:
        for p in passes.values():
            p.close()
    order = {m: i for i, m in enumerate(("normal", "optimized"))}
    records.sort(key=lambda r: (CLAUSE_ORDER.get(r.clause, len(CLAUSE_ORDER)), order[r.mode],
                                STATUS_RANK[r.status] * -1, r.signature))
    coverage: dict[str, list[str]] = {}
    for run in runs:
        for pair in run.exercised:
            coverage.setdefault(pair, [])
            if run.clause not in coverage[pair]:
                coverage[pair].append(run.clause)
    return Report(kit_version=kvcontract.__version__, engine=info["name"], engine_version=info["version"],
                  profile=profile, seed=seed_value, modes=modes,  # type: ignore[arg-type]
                  expectations=expectations.path if expectations else None,
                  engine_source=info.get("source"), records=records, clauses=runs, coverage=coverage,
                  coverage_summary=str(info.get("coverage_summary", "")),
                  engine_log={m: p.log for m, p in passes.items() if p.log},
                  summary=summarize(records, time.perf_counter() - start))
