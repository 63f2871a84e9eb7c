"""``kvcontract check`` and ``kvcontract engines``: the main job of the kit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kvcontract.conformance.engine import (
    BUILTIN_ENGINES,
    EngineUnavailable,
    UnknownEngine,
    load_engine,
)
from kvcontract.conformance.report import render_table, write_json, write_junit
from kvcontract.conformance.runner import PROFILES, run_check
from kvcontract.conformance.xfails import XfailsError, default_xfails, load_xfails


def _usage(message: str) -> Any:
    from kvcontract.usage import UsageError

    return UsageError(message)


def register(subparsers: Any) -> None:
    check = subparsers.add_parser("check", help="run every clause against an engine (normal and -O)")
    check.add_argument("--engine", required=True, help="builtin name (see `kvcontract engines`) or package.module:factory")
    check.add_argument("--profile", default="default", choices=sorted(PROFILES))
    check.add_argument("--optimize", default="both", choices=("off", "on", "both"))
    check.add_argument("--json", metavar="FILE")
    check.add_argument("--junit", metavar="FILE")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--xfails", metavar="FILE",
                       help="expected failures; default: the bundled file for the engine release, if any")
    check.add_argument("--no-xfails", action="store_true", help="report known failures as failures")
    check.add_argument("--clauses", metavar="IDS", help="comma-separated clause IDs (default: all)")
    check.add_argument("--quiet", action="store_true", help="no progress lines")
    check.set_defaults(func=run)
    engines = subparsers.add_parser("engines", help="list the engines available here, with versions")
    engines.set_defaults(func=list_engines)


def run(args: argparse.Namespace) -> int:
    try:
        engine = load_engine(args.engine)
    except UnknownEngine as exc:
        raise _usage(str(exc)) from None
    except EngineUnavailable as exc:
        raise _usage(f"engine {args.engine!r} is not available: {exc}") from None
    xfails = None
    if args.xfails and args.no_xfails:
        raise _usage("--xfails and --no-xfails exclude each other")
    if args.xfails:
        xfails = args.xfails
    elif not args.no_xfails:
        found = default_xfails(engine.name, engine.version)
        xfails = str(found) if found else None
    if xfails:
        try:
            load_xfails(xfails)
        except XfailsError as exc:
            raise _usage(str(exc)) from None
    clauses = args.clauses.split(",") if args.clauses else None
    if clauses:
        from kvcontract.conformance.laws import DERIVED, LAWS

        unknown = set(clauses) - {law.clause for law in LAWS} - set(DERIVED)
        if unknown:
            raise _usage(f"no law for clause(s) {', '.join(sorted(unknown))}")
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    report = run_check(args.engine, profile=args.profile, seed_value=args.seed, optimize=args.optimize,
                       xfails=xfails, clauses=clauses, progress=progress)
    print(render_table(report))
    if args.json:
        write_json(report, args.json)
    if args.junit:
        write_junit(report, args.junit)
    return 0 if report.ok else 1


def list_engines(args: argparse.Namespace) -> int:
    for name in BUILTIN_ENGINES:
        try:
            engine = load_engine(name)
        except (UnknownEngine, EngineUnavailable) as exc:
            print(f"{name:<12} unavailable: {exc}")
            continue
        found = default_xfails(engine.name, engine.version)
        note = f" (expectations: {found.name})" if found else ""
        print(f"{name:<12} {engine.version}{note}")
    return 0
