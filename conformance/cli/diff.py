"""``kvcontract diff BASE.json HEAD.json``: what a change introduced."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kvcontract.conformance.cli.options import add_json, add_sarif, writable_file
from kvcontract.conformance.reports.diff import PRESENT, compare, read_report, render, write_json
from kvcontract.conformance.reports.sarif import write_sarif
from kvcontract.usage import UsageError


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
    add_sarif(diff, "HEAD, each result marked against BASE (new / updated / unchanged)")
    diff.add_argument("--verbose", action="store_true",
                      help="print every new finding in full (message, location, repro) and every fixed one")
    diff.set_defaults(func=run)


def _check_outputs(args: argparse.Namespace) -> None:
    """The output paths, before anything is read (exit 2 with what to fix)."""
    inputs = {Path(args.base).resolve(): "BASE.json", Path(args.head).resolve(): "HEAD.json"}
    outputs: dict[Path, str] = {}
    for option, value in (("--json", args.json), ("--sarif", args.sarif)):
        if not value:
            continue
        writable_file(value, option)
        path = Path(value).resolve()
        if path in inputs:
            raise UsageError(f"{option} would overwrite {inputs[path]}; write it elsewhere")
        if path in outputs:
            raise UsageError(f"{outputs[path]} and {option} name the same file; give each its own")
        outputs[path] = option


def run(args: argparse.Namespace) -> int:
    _check_outputs(args)
    base, head = read_report(args.base), read_report(args.head)
    result = compare(base, head, base_name=args.base, head_name=args.head)
    print(render(result, verbose=args.verbose))
    if args.json:
        write_json(result, args.json)
    if args.sarif:
        write_sarif(head, args.sarif, baseline=base, baseline_name=args.base)
    return result.exit_code


__all__ = ["register", "run"]
