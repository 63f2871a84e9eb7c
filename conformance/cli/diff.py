"""``kvcontract diff BASE.json HEAD.json``: what a change introduced."""

from __future__ import annotations

import argparse
from typing import Any

from kvcontract.conformance.cli.options import add_json
from kvcontract.conformance.reports.diff import PRESENT, compare, read_report, render, write_json


def register(subparsers: Any) -> None:
    diff = subparsers.add_parser(
        "diff", help="compare two check reports: new / fixed / unchanged findings",
        description="Compare two `kvcontract check --json` reports finding by finding (clause x mode x "
                    f"signature; present = status {', '.join(sorted(PRESENT))}). Prints the counts and one "
                    "line per new finding (--verbose: each with its message and repro). Exit 1 only when HEAD has a new finding, "
                    "0 otherwise, 2 when a file is not a check report.")
    diff.add_argument("base", metavar="BASE.json", help="the report of the base (e.g. the merge base)")
    diff.add_argument("head", metavar="HEAD.json", help="the report of the change")
    add_json(diff, "the comparison (kind 'diff')")
    diff.add_argument("--verbose", action="store_true",
                      help="print every new finding in full (message, location, repro) and every fixed one")
    diff.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = compare(read_report(args.base), read_report(args.head), base_name=args.base, head_name=args.head)
    print(render(result, verbose=args.verbose))
    if args.json:
        write_json(result, args.json)
    return result.exit_code


__all__ = ["register", "run"]
