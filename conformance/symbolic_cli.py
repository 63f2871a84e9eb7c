"""``kvcontract symbolic``: CrossHair behaviour diff of an engine against the reference."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kvcontract.conformance.engine import EngineUnavailable, UnknownEngine, load_engine
from kvcontract.conformance.report import write_atomic
from kvcontract.conformance.symbolic import OPERATIONS, render, run_symbolic


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("symbolic", help="search for inputs where the engine differs from the reference")
    parser.add_argument("--engine", required=True)
    parser.add_argument("--budget", type=float, default=180.0, help="seconds of search in all (default 180)")
    parser.add_argument("--optimize", default="off", choices=("off", "on"))
    parser.add_argument("--ops", default=",".join(OPERATIONS), help=f"subset of {','.join(OPERATIONS)}")
    parser.add_argument("--kinds", help="comma-separated spec kinds (default: all the engine has)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kvcontract.usage import UsageError

    try:
        load_engine(args.engine)
    except (UnknownEngine, EngineUnavailable) as exc:
        raise UsageError(str(exc)) from None
    ops = args.ops.split(",")
    unknown = [o for o in ops if o not in OPERATIONS]
    if unknown:
        raise UsageError(f"unknown operation(s) {', '.join(unknown)}; choose from {', '.join(OPERATIONS)}")
    if args.budget <= 0:
        raise UsageError("--budget must be positive")
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    report = run_symbolic(args.engine, args.budget, args.optimize, ops,
                          args.kinds.split(",") if args.kinds else None, progress)
    print(render(report))
    if args.json:
        write_atomic(args.json, json.dumps(report.to_json(), indent=1, default=str) + "\n")
    return 1 if report.findings else 0
