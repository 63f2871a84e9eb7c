"""``kvcontract symbolic``: CrossHair behaviour diff of an engine against the reference."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kvcontract.conformance.engine import UnknownEngine
from kvcontract.conformance.symbolic import OPERATIONS, render, run_symbolic
from kvcontract.reference import SPEC_KINDS
from kvcontract.reports import write_atomic
from kvcontract.usage import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "symbolic", help="search for inputs where the engine differs from the reference",
        description="CrossHair behaviour diff of the engine (through its adapter) against the reference, "
                    "per operation and spec kind, in a supervised worker. Exit 1 when something differs.")
    parser.add_argument("--engine", required=True,
                        help="builtin name, mutant:<name>, installed entry point, or package.module:factory")
    parser.add_argument("--budget", type=float, default=180.0, help="seconds of search in all (default 180)")
    parser.add_argument("--optimize", default="off", choices=("off", "on"),
                        help="on: search under python -O (default off)")
    parser.add_argument("--ops", default=",".join(OPERATIONS), help=f"subset of {','.join(OPERATIONS)}")
    parser.add_argument("--kinds", help="comma-separated spec kinds (default: all the engine has)")
    parser.add_argument("--json", metavar="FILE", help="write the findings as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if ":" not in args.engine:
        from kvcontract.conformance.registry import all_engine_names

        if args.engine not in all_engine_names():
            raise UsageError(str(UnknownEngine(f"unknown engine {args.engine!r}; known: "
                                               f"{', '.join(all_engine_names())}, or package.module:factory")))
    kinds = args.kinds.split(",") if args.kinds else None
    unknown_kinds = [k for k in kinds or [] if k not in {c.__name__ for c in SPEC_KINDS}]
    if unknown_kinds:
        raise UsageError(f"unknown spec kind(s) {', '.join(unknown_kinds)}; choose from "
                         f"{', '.join(c.__name__ for c in SPEC_KINDS)}")
    ops = args.ops.split(",")
    unknown = [o for o in ops if o not in OPERATIONS]
    if unknown:
        raise UsageError(f"unknown operation(s) {', '.join(unknown)}; choose from {', '.join(OPERATIONS)}")
    if args.budget <= 0:
        raise UsageError("--budget must be positive")
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        report = run_symbolic(args.engine, args.budget, args.optimize, ops, kinds, progress)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(render(report))
    if args.json:
        write_atomic(args.json, json.dumps(report.to_json(), indent=1, default=str) + "\n")
    return 1 if report.findings else 0
