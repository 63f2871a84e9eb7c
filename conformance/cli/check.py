"""``kvcontract check`` and ``kvcontract engines``: the main job of the kit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kvcontract.conformance.contract.laws import known_clauses
from kvcontract.conformance.engines.protocol import SOURCE_SEPARATOR, UnknownEngine
from kvcontract.conformance.reports.check import render_table, write_json, write_junit
from kvcontract.conformance.reports.diff import apply_baseline, read_report
from kvcontract.conformance.reports.diff import render as render_diff
from kvcontract.conformance.reports.expectations import XfailsError, check_xfails_options
from kvcontract.conformance.run.session import (
    CLAUSE_TIMEOUT_S,
    EXAMPLE_TIMEOUT_S,
    PROFILES,
    EngineLoadError,
    Pass,
    run_check,
)
from kvcontract.usage import UsageError


def register(subparsers: Any) -> None:
    check = subparsers.add_parser(
        "check", help="run every clause against an engine (normal and -O)",
        description="Check an engine against every clause of the contract, in the normal interpreter "
                    "and under python -O, each in a supervised worker. Every distinct finding "
                    "(clause x mode x signature) is reported with its repro snippet. Exit 0 when "
                    "nothing failed, 1 otherwise, 2 on a usage error.")
    check.add_argument("--engine", required=True,
                       help="builtin name (see `kvcontract engines`), mutant:<name>, an installed "
                            "entry point (group kvcontract.engines), or package.module:factory")
    check.add_argument("--engine-path", metavar="DIR",
                       help="check the engine from a source checkout: DIR holds its package (for vllm: "
                            "DIR/vllm/__init__.py), imported with this environment's dependencies; the "
                            "report records DIR, git describe and whether the tree is dirty")
    check.add_argument("--profile", default="default", choices=sorted(PROFILES),
                       help="quick: the systematic phase only; default: +100 random examples per "
                            "clause; thorough: +1000 (default: default)")
    check.add_argument("--optimize", default="both", choices=("off", "on", "both"),
                       help="interpreter modes: off (normal only), on (python -O only), both (default)")
    check.add_argument("--json", metavar="FILE", help="write the report as JSON (schema 'check' v2)")
    check.add_argument("--junit", metavar="FILE", help="write the report as JUnit XML")
    check.add_argument("--seed", type=int, default=0, help="hypothesis seed of the random phase (default 0)")
    check.add_argument("--xfails", metavar="FILE",
                       help="expected findings; default: the bundled file for the engine release, if any")
    check.add_argument("--no-xfails", action="store_true", help="report known failures as failures")
    check.add_argument("--clauses", metavar="IDS", help="comma-separated clause IDs (default: all)")
    check.add_argument("--clause-timeout", type=float, default=CLAUSE_TIMEOUT_S, metavar="S",
                       help=f"seconds one clause may run before it is stopped (default {CLAUSE_TIMEOUT_S:g})")
    check.add_argument("--example-timeout", type=float, default=EXAMPLE_TIMEOUT_S, metavar="S",
                       help="seconds one example may run without progress before the engine counts "
                            f"as hung (default {EXAMPLE_TIMEOUT_S:g})")
    check.add_argument("--quiet", action="store_true", help="no progress lines")
    check.add_argument("--baseline", metavar="BASE.json",
                       help="compare with a previous report (e.g. of the merge base): classify findings "
                            "new / fixed / unchanged; exit 1 only when one is new")
    check.set_defaults(func=run)
    engines = subparsers.add_parser("engines", help="list the engines available here, with versions",
                                    description="List the builtin and installed engines, each loaded in a "
                                                "worker, with its version and bundled expectations.")
    engines.set_defaults(func=list_engines)


def run(args: argparse.Namespace) -> int:
    check_xfails_options(args.xfails, args.no_xfails)
    clauses = [c.strip() for c in args.clauses.split(",") if c.strip()] if args.clauses else None
    if args.clauses is not None and not clauses:
        raise UsageError("--clauses names no clause")
    if clauses:
        unknown = set(clauses) - known_clauses()
        if unknown:
            raise UsageError(f"no law for clause(s) {', '.join(sorted(unknown))}")
    if args.clause_timeout <= 0 or args.example_timeout <= 0:
        raise UsageError("--clause-timeout and --example-timeout must be positive")
    baseline = read_report(args.baseline) if args.baseline else None  # a bad file fails before the run
    engine = args.engine
    if args.engine_path:
        if not Path(args.engine_path).is_dir():
            raise UsageError(f"--engine-path {args.engine_path}: no such directory")
        engine = f"{args.engine}{SOURCE_SEPARATOR}{Path(args.engine_path).resolve()}"
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        report = run_check(engine, profile=args.profile, seed_value=args.seed, optimize=args.optimize,
                           xfails=args.xfails, use_default_xfails=not args.no_xfails, clauses=clauses,
                           progress=progress, clause_timeout=args.clause_timeout,
                           example_timeout=args.example_timeout)
    except EngineLoadError as exc:
        raise UsageError(f"engine {args.engine!r} cannot be loaded: {exc}") from None
    except XfailsError as exc:
        raise UsageError(str(exc)) from None
    print(render_table(report))
    if args.json:
        write_json(report, args.json)
    if args.junit:
        write_junit(report, args.junit)
    if not report.clauses:
        print("error: no clause was run", file=sys.stderr)
        return 1
    if baseline is not None:
        delta = apply_baseline(report, args.baseline, base=baseline)
        print("\n" + render_diff(delta))
        return delta.exit_code
    return 0 if report.ok else 1


def list_engines(args: argparse.Namespace) -> int:
    from kvcontract.conformance.engines.protocol import engine_names

    for name in engine_names():
        probe = Pass(name, optimized=False, profile="quick", seed_value=0, xfails=None, clauses=[],
                     progress=None, clause_timeout=CLAUSE_TIMEOUT_S, example_timeout=EXAMPLE_TIMEOUT_S)
        try:
            info = probe.info()
        except EngineLoadError as exc:
            print(f"{name:<12} unavailable: {exc}")
            continue
        finally:
            probe.close()
        note = f" (expectations: {info['expectations'].rsplit('/', 1)[-1]})" if info.get("expectations") else ""
        print(f"{name:<12} {info['version']}{note}")
    return 0


__all__ = ["UnknownEngine", "list_engines", "register", "run"]
