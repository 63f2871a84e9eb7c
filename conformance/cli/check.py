"""``kvcontract check``: the main job of the kit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kvcontract.conformance.cli.options import (
    add_engine,
    add_json,
    add_optimize,
    add_profile,
    add_quiet,
    add_seed,
    add_xfails,
    comma_list,
    progress_printer,
)
from kvcontract.conformance.contract.laws import known_clauses
from kvcontract.conformance.engines.protocol import SOURCE_SEPARATOR
from kvcontract.conformance.reports.check import render_table, write_json, write_junit
from kvcontract.conformance.reports.diff import apply_baseline, read_report
from kvcontract.conformance.reports.diff import render as render_diff
from kvcontract.conformance.reports.expectations import XfailsError, check_xfails_options
from kvcontract.conformance.run.session import (
    CLAUSE_TIMEOUT_S,
    EXAMPLE_TIMEOUT_S,
    EngineLoadError,
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
    add_engine(check)
    check.add_argument("--engine-path", metavar="DIR",
                       help="check the engine from a source checkout: DIR holds its package (for vllm: "
                            "DIR/vllm/__init__.py), imported with this environment's dependencies; the "
                            "report records DIR, git describe and whether the tree is dirty")
    add_profile(check)
    add_optimize(check)
    add_json(check, "the report (schema 'check' v2)")
    check.add_argument("--junit", metavar="FILE", help="write the report as JUnit XML")
    add_seed(check, "the hypothesis random phase")
    add_xfails(check)
    check.add_argument("--clauses", metavar="IDS", help="comma-separated clause IDs (default: all)")
    check.add_argument("--clause-timeout", type=float, default=CLAUSE_TIMEOUT_S, metavar="S",
                       help=f"seconds one clause may run before it is stopped (default {CLAUSE_TIMEOUT_S:g})")
    check.add_argument("--example-timeout", type=float, default=EXAMPLE_TIMEOUT_S, metavar="S",
                       help="seconds one example may run without progress before the engine counts "
                            f"as hung (default {EXAMPLE_TIMEOUT_S:g})")
    add_quiet(check)
    check.add_argument("--baseline", metavar="BASE.json",
                       help="compare with a previous report (e.g. of the merge base): classify findings "
                            "new / fixed / unchanged; exit 1 only when one is new")
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_xfails_options(args.xfails, args.no_xfails)
    clauses = comma_list(args.clauses, "--clauses")
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
    progress = progress_printer(args.quiet)
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


__all__ = ["register", "run"]
