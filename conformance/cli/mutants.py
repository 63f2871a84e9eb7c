"""``kvcontract mutants``: the suite against the mutant catalogue — evidence that it fails
engines that are wrong (:mod:`kvcontract.conformance.power.hunt`); with ``--symbolic``, the
symbolic mode's power on the same catalogue next to the suite's
(:mod:`kvcontract.conformance.power.symbolic`).

Exit codes: 0 every mutant killed (with ``--symbolic``: found) and the control clean,
1 otherwise, 2 usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kvcontract.conformance.cli.options import (
    add_json,
    add_optimize,
    add_profile,
    add_quiet,
    add_seed,
    comma_list,
    progress_printer,
)
from kvcontract.conformance.engines.mutants import KNOWN_SURVIVORS, MUTANTS
from kvcontract.conformance.power.hunt import render_catalogue, render_table, run_mutants
from kvcontract.conformance.power.symbolic import (
    SYMBOLIC_BUDGET_S,
    render_symbolic_table,
    run_symbolic_power,
)
from kvcontract.reports import write_atomic
from kvcontract.usage import UsageError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mutants", help="run the suite against the mutant catalogue; every mutant must be killed",
        description="Hunt each catalogue mutant (the reference with one realistic defect) to its first "
                    "failing clause, in both interpreter modes, after a control run of the reference. "
                    "Exit 0 when every mutant is killed and the control is clean, 1 otherwise.")
    add_profile(p)
    add_optimize(p)
    add_json(p, "the report (schema 'mutants' v2)")
    add_seed(p, "the hypothesis random phase")
    p.add_argument("--mutants", metavar="NAMES",
                   help="comma-separated mutant names (default: the catalogue; see --list)")
    p.add_argument("--exhaustive", action="store_true",
                   help="run every clause on every mutant, not only to the first failure (slow)")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    add_quiet(p)
    p.add_argument("--symbolic", action="store_true",
                   help="also hunt every mutant (catalogue and known survivors) with the symbolic mode and print "
                        "found by property / found by symbolic / time to first finding "
                        "(--json: schema 'mutants-symbolic')")
    p.add_argument("--symbolic-budget", type=float, default=SYMBOLIC_BUDGET_S,
                   help=f"CPU seconds of symbolic search per mutant and mode (default {SYMBOLIC_BUDGET_S:g})")
    p.set_defaults(func=run)


def _selected(spec: str | None) -> list[str]:
    if not spec:
        return list(MUTANTS)
    names = [n.removeprefix("mutant:") for n in comma_list(spec, "--mutants") or []]
    unknown = [n for n in names if n not in MUTANTS and n not in KNOWN_SURVIVORS]
    if unknown:
        raise UsageError(f"unknown mutant(s) {', '.join(unknown)}; known: "
                         f"{', '.join([*MUTANTS, *KNOWN_SURVIVORS])}")
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> int:
    names = _selected(args.mutants)
    if args.list:
        print(render_catalogue())
        return 0
    if args.symbolic:
        return _run_symbolic(args, names if args.mutants else [*MUTANTS, *KNOWN_SURVIVORS])
    report = run_mutants(names, profile=args.profile, seed_value=args.seed, optimize=args.optimize,
                         exhaustive=args.exhaustive, progress=progress_printer(args.quiet))
    print(render_table(report))
    if args.json:
        write_atomic(args.json, report.model_dump_json(indent=2) + "\n")
    return 0 if report.ok else 1


def _run_symbolic(args: argparse.Namespace, names: Sequence[str]) -> int:
    if args.symbolic_budget <= 0:
        raise UsageError("--symbolic-budget must be positive")
    report = run_symbolic_power(names, budget_s=args.symbolic_budget, profile=args.profile, seed_value=args.seed,
                                progress=progress_printer(args.quiet))
    print(render_symbolic_table(report))
    if args.json:
        write_atomic(args.json, report.model_dump_json(indent=2) + "\n")
    return 0 if all(r.symbolic_found for r in report.rows) and not report.control_findings else 1
