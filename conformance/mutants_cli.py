"""``kvcontract mutants``: the suite against the mutant catalogue — evidence that it fails
engines that are wrong.

Each mutant (:mod:`kvcontract.conformance.mutants`) is the reference with one
realistic defect. The run hunts every mutant, in this interpreter and under
``python -O`` (one subprocess for all of them, in parallel with this one), to its
first failing clause, and prints one row per mutant: killed or survived, the
clause(s) that killed it, in which mode, and the time to the first failure. The
unmutated reference runs first in each mode as the control: no clause may fail
on it. Exit codes: 0 every mutant killed and the control clean, 1 otherwise,
2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kvcontract
from kvcontract.conformance.mutants import (
    CONTROL_NAME,
    KNOWN_SURVIVORS,
    MUTANTS,
    Mode,
    ModeOutcome,
    MutantResult,
    MutantsReport,
    Progress,
    combine,
    hunt_all,
    mutant_class,
)
from kvcontract.conformance.report import write_atomic
from kvcontract.conformance.runner import OPTIMIZED_TIMEOUT_S, PROFILES


def _usage(message: str) -> Exception:
    from kvcontract.usage import UsageError

    return UsageError(message)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mutants", help="run the suite against the mutant catalogue; every mutant must be killed")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES))
    p.add_argument("--optimize", default="both", choices=("off", "on", "both"))
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mutants", metavar="NAMES",
                   help="comma-separated mutant names (default: the catalogue; see --list)")
    p.add_argument("--exhaustive", action="store_true",
                   help="run every clause on every mutant, not only to the first failure (slow)")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def _selected(spec: str | None) -> list[str]:
    if not spec:
        return list(MUTANTS)
    names = [n.strip().removeprefix("mutant:") for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in MUTANTS and n not in KNOWN_SURVIVORS]
    if unknown or not names:
        raise _usage(f"unknown mutant(s) {', '.join(unknown) or repr(spec)}; known: "
                     f"{', '.join([*MUTANTS, *KNOWN_SURVIVORS])}")
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> int:
    names = _selected(getattr(args, "mutants", None))
    if getattr(args, "list", False):
        print(render_catalogue())
        return 0
    optimize = getattr(args, "optimize", "both")
    if sys.flags.optimize and optimize != "on":
        raise _usage("kvcontract mutants needs a normal interpreter (this one runs with -O); "
                     "or pass --optimize on")
    quiet = getattr(args, "quiet", False)
    report = run_mutants(names, profile=getattr(args, "profile", "default"),
                         seed_value=getattr(args, "seed", 0), optimize=optimize,
                         exhaustive=getattr(args, "exhaustive", False),
                         progress=None if quiet else _stderr)
    print(render_table(report))
    if getattr(args, "json", None):
        write_atomic(args.json, report.model_dump_json(indent=2) + "\n")
    return 0 if report.ok else 1


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- the run: this interpreter and one python -O subprocess, in parallel -------------------


def run_mutants(names: Sequence[str] | None = None, *, profile: str = "default", seed_value: int = 0,
                optimize: str = "both", exhaustive: bool = False, progress: Progress | None = None,
                timeout: float = OPTIMIZED_TIMEOUT_S) -> MutantsReport:
    """Hunt every mutant in ``names`` (default: the catalogue) in the modes of
    ``optimize`` (off/on/both), with the control, and combine the outcomes."""
    names = list(MUTANTS) if names is None else [n.removeprefix("mutant:") for n in names]
    for name in names:
        mutant_class(name)
    start = time.perf_counter()
    modes: list[Mode] = []
    per_mode: dict[str, list[ModeOutcome]] = {n: [] for n in [CONTROL_NAME, *names]}
    with tempfile.TemporaryDirectory(prefix="kvcontract-mutants-") as tmp:
        worker = None
        if optimize in ("on", "both"):
            worker = _start_worker(names, profile, seed_value, exhaustive, Path(tmp), progress)
        if optimize in ("off", "both"):
            modes.append("normal")
            for name, outcome in hunt_all(names, profile=profile, seed_value=seed_value,
                                          exhaustive=exhaustive, progress=progress).items():
                per_mode[name].append(outcome)
        if worker is not None:
            modes.append("optimized")
            remaining = max(timeout - (time.perf_counter() - start), 1.0)
            for name, outcome in _finish_worker(worker, Path(tmp), [CONTROL_NAME, *names],
                                                remaining).items():
                per_mode[name].append(outcome)
    results = {name: combine(name, outcomes) for name, outcomes in per_mode.items()}
    return MutantsReport(
        kvcontract_version=kvcontract.__version__, profile=profile, seed=seed_value, modes=modes,
        exhaustive=exhaustive, mutants=[results[n] for n in names], control=results[CONTROL_NAME],
        seconds=round(time.perf_counter() - start, 3))


def _start_worker(names: Sequence[str], profile: str, seed_value: int, exhaustive: bool, tmp: Path,
                  progress: Progress | None) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-O", "-m", "kvcontract.conformance.mutants_cli", "--worker",
           "--profile", profile, "--seed", str(seed_value), "--out", str(tmp / "optimized.json")]
    if names:
        cmd += ["--mutants", ",".join(names)]
    if exhaustive:
        cmd.append("--exhaustive")
    stderr = None if progress else (tmp / "stderr.txt").open("w")
    try:
        return subprocess.Popen(cmd, env=dict(os.environ, PYTHONOPTIMIZE="1"), stdout=subprocess.DEVNULL,
                                stderr=stderr, text=True)
    finally:
        if stderr is not None:
            stderr.close()


def _finish_worker(proc: subprocess.Popen[str], tmp: Path, names: Sequence[str],
                   timeout: float) -> dict[str, ModeOutcome]:
    out = tmp / "optimized.json"
    try:
        proc.wait(timeout=timeout)
        problem = None
        if proc.returncode != 0 or not out.exists():
            log = tmp / "stderr.txt"
            tail = log.read_text().strip().splitlines()[-3:] if log.exists() else []
            problem = f"python -O pass exited with {proc.returncode}: {' | '.join(tail)}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        problem = f"python -O pass did not finish within {timeout:.0f}s"
    if problem is None:
        data = json.loads(out.read_text())
        return {n: ModeOutcome.model_validate(data[n]) for n in names}
    return {n: ModeOutcome(mode="optimized", status="error", errors=[problem], message=problem)
            for n in names}


def _worker(argv: Sequence[str]) -> int:
    """The ``python -O`` pass: hunt the control and the mutants here, write JSON."""
    parser = argparse.ArgumentParser(prog="kvcontract.conformance.mutants_cli --worker")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--profile", default="default", choices=sorted(PROFILES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mutants", default="")
    parser.add_argument("--exhaustive", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    names = [n for n in args.mutants.split(",") if n]
    outcomes = hunt_all(names, profile=args.profile, seed_value=args.seed, exhaustive=args.exhaustive,
                        progress=_stderr)
    write_atomic(args.out, json.dumps({n: o.model_dump() for n, o in outcomes.items()}))
    return 0


# -- rendering ----------------------------------------------------------------------------


def _killers(result: MutantResult) -> str:
    per_mode = {o.mode: o.clauses for o in result.outcomes if o.status == "killed"}
    if len(per_mode) == 2 and per_mode["normal"] != per_mode["optimized"]:
        return "; ".join(f"{', '.join(c)} ({m})" for m, c in per_mode.items())
    return ", ".join(result.killed_by) or "-"


def _mode_cell(result: MutantResult) -> str:
    if len(result.killed_in) == 2:
        return "both"
    return result.killed_in[0] if result.killed_in else "-"


def render_table(report: MutantsReport) -> str:
    """Mutant | verdict | mode | time to first failure | killed by; then the control
    and the details of every survivor or error."""
    width = max([24, *(len(r.mutant) for r in report.mutants)])
    header = f"{'mutant':<{width}} {'verdict':<9} {'mode':<9} {'first failure':>13}  killed by"
    lines = [f"kvcontract mutants: {len(report.mutants)} mutants (profile {report.profile}, "
             f"seed {report.seed}, modes {'+'.join(report.modes)})", "", header, "-" * len(header)]
    for r in report.mutants:
        verdict = r.verdict if r.verdict != "survived" else "SURVIVED"
        seconds = f"{r.seconds:.2f}s" if r.seconds is not None else "-"
        lines.append(f"{r.mutant:<{width}} {verdict:<9} {_mode_cell(r):<9} {seconds:>13}  {_killers(r)}")
    control = report.control
    clean = control.verdict == "survived"
    lines += ["", f"control ({control.engine}): "
              + ("no clause fails in " + "+".join(report.modes) if clean
                 else f"{control.verdict.upper()}: {_killers(control)}")]
    killed = sum(r.verdict == "killed" for r in report.mutants)
    lines.append(f"{killed}/{len(report.mutants)} killed in {report.seconds:.1f}s")
    for r in report.mutants:
        if r.verdict == "survived":
            lines += ["", f"=== SURVIVED {r.mutant}: {r.description}",
                      f"expected to fail: {', '.join(r.expected_clauses)}"]
            if r.known_gap:
                lines.append(f"known gap: {r.known_gap}")
        elif r.verdict == "error":
            lines += ["", f"=== ERROR {r.mutant}: " + "; ".join(
                e for o in r.outcomes for e in o.errors)]
    for o in control.outcomes:
        if o.status != "survived":
            lines += ["", f"=== CONTROL {o.status.upper()} [{o.mode}] {', '.join(o.clauses)}: "
                      f"{o.message or '; '.join(o.errors)}"]
            if o.snippet:
                lines += ["--- repro ---", o.snippet.rstrip()]
    return "\n".join(lines)


def render_catalogue() -> str:
    """Every mutant: name, defect, what it imitates, the clauses it should fail."""
    lines = []
    for title, registry in (("catalogue", MUTANTS), ("known survivors", KNOWN_SURVIVORS)):
        lines.append(f"{title}:")
        for key, cls in registry.items():
            lines.append(f"  {key}: {cls.description}")
            if cls.imitates:
                lines.append(f"      imitates: {cls.imitates}")
            lines.append(f"      should fail: {', '.join(cls.expected_clauses)}")
            if cls.gap:
                lines.append(f"      gap: {cls.gap}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kvcontract.conformance.mutants_cli [options]``: the verb on its own."""
    from kvcontract.usage import UsageError

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(f"{self.prog}: {message}")

    parser = Parser(prog="kvcontract")
    register(parser.add_subparsers(dest="verb", parser_class=Parser))
    try:
        args = parser.parse_args(["mutants", *(sys.argv[1:] if argv is None else argv)])
        return int(args.func(args))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]) if "--worker" in sys.argv[1:] else main())
