"""Runs the laws against an engine, in this interpreter and under ``python -O``.

The ``-O`` pass is one subprocess per run (``python -O -m
kvcontract.conformance.runner``), with a time limit; if it hangs or dies, its
clauses are reported as ``error``. Results of both passes merge into one
:class:`~kvcontract.conformance.report.Report`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

import kvcontract
from kvcontract.conformance.engine import Engine, load_engine
from kvcontract.conformance.laws import (
    DERIVED,
    LAWS,
    Example,
    Law,
    Violation,
    domain_of,
    render_snippet,
)
from kvcontract.conformance.laws import (
    law as law_of,
)
from kvcontract.conformance.report import Record, Report, summarize
from kvcontract.conformance.xfails import Expectations, load_xfails
from kvcontract.spec import clause as catalogue_clause

PROFILES: dict[str, int] = {"quick": 25, "default": 100, "thorough": 1000}
"""Profile -> hypothesis examples per law."""
OPTIMIZED_TIMEOUT_S = 600.0

Progress = Callable[[str], None]


def _mode_name() -> str:
    return "optimized" if sys.flags.optimize else "normal"


def _run_witness(engine: Engine, law: Law, witness: dict[str, Any]) -> Violation | None:
    example = getattr(law, "example_type", Example).from_json(witness)
    try:
        law.check(engine, example)
    except Violation as violation:
        violation.example = example  # type: ignore[attr-defined]
        return violation
    return None


def _search(engine: Engine, law: Law, examples: int, seed_value: int) -> tuple[int, Example | None, Violation | None]:
    state: dict[str, Any] = {"count": 0, "last": None}

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
              report_multiple_bugs=False, print_blob=False,
              phases=(Phase.explicit, Phase.generate, Phase.shrink))
    @seed(seed_value)
    @given(law.strategy(domain_of(engine)))
    def probe(example: Example) -> None:
        state["count"] += 1
        state["last"] = example
        law.check(engine, example)

    try:
        probe()
    except Violation as violation:
        return state["count"], state["last"], violation
    return state["count"], None, None


def run_law(engine: Engine, law: Law, profile: str, seed_value: int,
            expectations: Expectations | None) -> Record:
    """One clause in this interpreter: skip, witness replay (xfail/xpass) or search."""
    mode = _mode_name()
    start = time.perf_counter()
    base = {"clause": law.clause, "title": law.title, "level": law.level, "mode": mode}
    skip = law.requires(engine)
    if skip:
        return Record(**base, status="skip", message=skip)
    expected = expectations.get(law.clause, mode) if expectations else None
    optimized = bool(sys.flags.optimize)
    try:
        if expected is not None:
            violation = _run_witness(engine, law, expected.witness)
            seconds = time.perf_counter() - start
            if violation is None:
                return Record(**base, status="xpass", examples=1, seconds=seconds, witness=expected.witness,
                              message=f"expected to fail ({expected.reason}) but the witness passes")
            return Record(**base, status="xfail", examples=1, seconds=seconds, witness=expected.witness,
                          message=f"{expected.reason} [witness: {violation.message}]",
                          snippet=getattr(law, "render", render_snippet)(engine, law, violation.example, violation, optimized))  # type: ignore[attr-defined]
        count, example, violation = _search(engine, law, PROFILES[profile], seed_value)
    except Exception as exc:  # noqa: BLE001 - a broken adapter or strategy is an error, not a finding
        return Record(**base, status="error", seconds=time.perf_counter() - start,
                      message=f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    if violation is None or example is None:
        return Record(**base, status="pass", examples=count, seconds=seconds)
    return Record(**base, status="fail", examples=count, seconds=seconds, message=violation.message,
                  snippet=getattr(law, "render", render_snippet)(engine, law, example, violation, optimized),
                  witness=example.to_json())


def run_mode(engine: Engine, profile: str, seed_value: int, expectations: Expectations | None,
             progress: Progress | None = None, clauses: Sequence[str] | None = None) -> list[Record]:
    """Every law in this interpreter, in SPEC.md order."""
    laws = [law for law in LAWS if clauses is None or law.clause in clauses]
    records = []
    for index, law in enumerate(laws, 1):
        if progress:
            progress(f"[{_mode_name()} {index}/{len(laws)}] {law.clause} ...")
        record = run_law(engine, law, profile, seed_value, expectations)
        if progress:
            progress(f"[{_mode_name()} {index}/{len(laws)}] {law.clause} {record.status} "
                     f"({record.examples} examples, {record.seconds:.2f}s)")
        records.append(record)
    return records


class _OptimizedPass:
    """The ``python -O`` pass, started in a subprocess so that it runs while the
    normal pass runs here (two cores, two interpreters importing the engine)."""

    def __init__(self, engine_name: str, profile: str, seed_value: int, xfails: str | None,
                 clauses: Sequence[str] | None, timeout: float, progress: Progress | None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="kvcontract-")
        self.out = Path(self._tmp.name) / "optimized.json"
        cmd = [sys.executable, "-O", "-m", "kvcontract.conformance.runner", "--engine", engine_name,
               "--profile", profile, "--seed", str(seed_value), "--out", str(self.out)]
        if xfails:
            cmd += ["--xfails", xfails]
        if clauses:
            cmd += ["--clauses", ",".join(clauses)]
        self.clauses = clauses
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        env = dict(os.environ, PYTHONOPTIMIZE="1")
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                     stderr=None if progress else subprocess.PIPE, text=True)

    def result(self) -> list[Record]:
        problem = None
        try:
            _, stderr = self.proc.communicate(timeout=max(0.0, self.deadline - time.monotonic()))
            if self.proc.returncode != 0 or not self.out.exists():
                tail = (stderr or "").strip().splitlines()[-3:]
                problem = f"python -O pass exited with {self.proc.returncode}: {' | '.join(tail)}"
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            problem = f"python -O pass did not finish within {self.timeout:.0f}s"
        try:
            if problem is None:
                return [Record.model_validate(r) for r in json.loads(self.out.read_text())]
        finally:
            self._tmp.cleanup()
        laws = [law for law in LAWS if self.clauses is None or law.clause in self.clauses]
        return [Record(clause=law.clause, title=law.title, level=law.level, mode="optimized",
                       status="error", message=problem) for law in laws]


def _optimized_pass(engine_name: str, profile: str, seed_value: int, xfails: str | None,
                    clauses: Sequence[str] | None, timeout: float, progress: Progress | None) -> list[Record]:
    return _OptimizedPass(engine_name, profile, seed_value, xfails, clauses, timeout, progress).result()


def _derived(records: list[Record], engine: Engine, expectations: Expectations | None) -> list[Record]:
    """ERROR-OPTIMIZE-1: a source clause's optimized witness (failing under -O) is
    replayed here, in the normal interpreter; if it passes here, python -O changed
    the engine's behaviour. Deterministic: it uses the pinned or shrunk witness."""
    out = []
    by_key = {(r.clause, r.mode): r for r in records}
    for clause_id, sources in DERIVED.items():
        c = catalogue_clause(clause_id)
        base = {"clause": clause_id, "title": c.title, "level": c.level}
        if any((s, "normal") in by_key for s in sources):
            out.append(Record(**base, mode="normal", status="skip",  # type: ignore[arg-type]
                              message="judged in the optimized interpreter"))
        if not any((s, "optimized") in by_key for s in sources):
            continue
        evidence = None
        for source in sources:
            optimized = by_key.get((source, "optimized"))
            if optimized is None or optimized.status not in ("fail", "xfail") or not optimized.witness:
                continue
            if _run_witness(engine, law_of(source), optimized.witness) is None:
                evidence = optimized
                break
        if evidence is None:
            out.append(Record(**base, mode="optimized", status="pass",  # type: ignore[arg-type]
                              message=f"no witness of {', '.join(sources)} behaves differently under -O"))
            continue
        expected = expectations.get(clause_id, "optimized") if expectations else None
        message = (f"{evidence.clause} holds in the normal interpreter but fails under python -O "
                   f"on its witness: {evidence.message}")
        out.append(Record(**base, mode="optimized", status="xfail" if expected else "fail",  # type: ignore[arg-type]
                          message=f"{expected.reason} [{message}]" if expected else message,
                          snippet=evidence.snippet, witness=evidence.witness, examples=1))
    return out


def run_check(engine_name: str, *, profile: str = "default", seed_value: int = 0,
              optimize: str = "both", xfails: str | None = None, clauses: Sequence[str] | None = None,
              progress: Progress | None = None, timeout: float = OPTIMIZED_TIMEOUT_S) -> Report:
    """The main job: every clause against ``engine_name``, per ``optimize`` mode."""
    start = time.perf_counter()
    engine = load_engine(engine_name)
    expectations = load_xfails(xfails) if xfails else None
    records: list[Record] = []
    modes: list[Any] = []
    if optimize in ("off", "both") and sys.flags.optimize:
        raise RuntimeError("--optimize off/both needs a normal interpreter (this one runs with -O)")
    optimized = None
    if optimize in ("on", "both"):
        optimized = _OptimizedPass(engine_name, profile, seed_value, xfails, clauses, timeout, progress)
    if optimize in ("off", "both"):
        modes.append("normal")
        records += run_mode(engine, profile, seed_value, expectations, progress, clauses)
    if optimized is not None:
        modes.append("optimized")
        records += optimized.result()
    records += _derived(records, engine, expectations)
    order = {law.clause: i for i, law in enumerate(LAWS)}
    records.sort(key=lambda r: (order.get(r.clause, len(order)), r.mode))
    return Report(kvcontract_version=kvcontract.__version__, engine=engine.name, engine_version=engine.version,
                  profile=profile, seed=seed_value, modes=modes,
                  expectations=expectations.path if expectations else None,
                  records=records, summary=summarize(records, time.perf_counter() - start))


def _worker(argv: Sequence[str] | None = None) -> int:
    """The ``python -O`` pass: run every law here and write the records as JSON."""
    parser = argparse.ArgumentParser(prog="kvcontract.conformance.runner")
    parser.add_argument("--engine", required=True)
    parser.add_argument("--profile", default="default", choices=sorted(PROFILES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--xfails")
    parser.add_argument("--clauses")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    engine = load_engine(args.engine)
    expectations = load_xfails(args.xfails) if args.xfails else None
    clauses = args.clauses.split(",") if args.clauses else None
    records = run_mode(engine, args.profile, args.seed, expectations,
                       lambda line: print(line, file=sys.stderr, flush=True), clauses)
    from kvcontract.conformance.report import write_atomic

    write_atomic(args.out, json.dumps([r.model_dump() for r in records]))
    return 0


if __name__ == "__main__":
    sys.exit(_worker())
