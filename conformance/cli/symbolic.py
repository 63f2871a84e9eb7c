"""``kvcontract symbolic``: CrossHair's path search over the contract's inputs, judged by
the clause oracles of ``check`` (:mod:`kvcontract.conformance.run.symbolic.search`).

Exit codes: 0 nothing failed, 1 a finding (or an error, or an incomplete run),
2 usage error (one line): an unknown engine, kind, operation or clause; 130 / 143
stopped by SIGINT / SIGTERM (the report written so far is kept, ``complete`` false).
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from kvcontract.conformance.cli.options import (
    add_corpus,
    add_domain,
    add_engine,
    add_json,
    add_optimize,
    add_quiet,
    add_seed,
    add_xfails,
    comma_list,
    progress_printer,
)
from kvcontract.conformance.contract.laws import SEARCHED_CLAUSES
from kvcontract.conformance.contract.strategies import use_domain
from kvcontract.conformance.engines.protocol import UnknownEngine
from kvcontract.conformance.reports.expectations import check_xfails_options
from kvcontract.conformance.run.symbolic.report import render
from kvcontract.conformance.run.symbolic.search import DEFAULT_BUDGET_S, OPERATIONS, SearchError
from kvcontract.conformance.run.symbolic.session import DEFAULT_WALL_S, run_symbolic
from kvcontract.usage import Interrupted, UsageError, interrupt_exit_code, interrupt_name


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "symbolic", help="search the contract's inputs symbolically (CrossHair) with check's clause oracles",
        description="CrossHair explores symbolic choices over valid specs, lists, layer tables and routing "
                    "batches; every path is judged by the clause oracles of check. Findings are keyed by "
                    "signature like check's, with the same expectations file and repro snippets. "
                    "Exit 1 on a finding.")
    add_engine(parser)
    add_domain(parser)
    add_corpus(parser, what="the corpus of real models' layer tables the 'corpus' group starts from: auto "
                            "(default: as check picks it), none (that group is left out), or a corpus file")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"CPU seconds of search per mode (default {DEFAULT_BUDGET_S:g} unless --iterations "
                             "is given; the modes run concurrently)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="paths per mode: a budget that does not depend on machine load")
    parser.add_argument("--wall", type=float, default=None, metavar="S",
                        help=f"wall seconds for the whole run (default {DEFAULT_WALL_S:g} with the default budget, "
                             "none with --budget or --iterations): each mode's search stops at its budget or "
                             "short of this, whichever comes first")
    add_optimize(parser)
    parser.add_argument("--ops", default=",".join(OPERATIONS), help=f"subset of {','.join(OPERATIONS)}")
    parser.add_argument("--kinds", help="comma-separated spec kinds (default: every kind the engine has)")
    parser.add_argument("--clauses", help="comma-separated clause IDs to judge (default: all searched)")
    add_json(parser, "the report (schema 'symbolic' v2; rewritten after every finding)")
    add_xfails(parser)
    add_seed(parser, "CrossHair's path choices")
    add_quiet(parser)
    parser.add_argument("--verbose", action="store_true",
                        help="list every known failure found again (xfail), one a line (default: a count per clause)")
    parser.set_defaults(func=run)


def _interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


def run(args: argparse.Namespace) -> int:
    if ":" not in args.engine:
        from kvcontract.conformance.engines.registry import all_engine_names

        if args.engine not in all_engine_names():
            raise UsageError(str(UnknownEngine(f"unknown engine {args.engine!r}; known: "
                                               f"{', '.join(all_engine_names())}, or package.module:factory")))
    ops = comma_list(args.ops, "--ops") or list(OPERATIONS)
    unknown = [o for o in ops if o not in OPERATIONS]
    if unknown:
        raise UsageError(f"unknown operation(s) {', '.join(unknown)}; choose from {', '.join(OPERATIONS)}")
    clauses = comma_list(args.clauses, "--clauses")
    bad = [c for c in clauses or [] if c not in SEARCHED_CLAUSES]
    if bad:
        raise UsageError(f"clause(s) {', '.join(bad)} are not searched; choose from "
                         f"{', '.join(sorted(SEARCHED_CLAUSES))}")
    if args.budget is not None and args.budget <= 0:
        raise UsageError("--budget must be positive")
    if args.iterations is not None and args.iterations <= 0:
        raise UsageError("--iterations must be positive")
    if args.wall is not None and args.wall <= 0:
        raise UsageError("--wall must be positive")
    check_xfails_options(args.xfails, args.no_xfails)
    explicit = args.budget is not None or args.iterations is not None
    budget = args.budget if explicit else DEFAULT_BUDGET_S
    wall = args.wall if args.wall is not None or explicit else DEFAULT_WALL_S
    signal.signal(signal.SIGTERM, _interrupted)  # a stopped run closes its workers, keeps its report
    progress = progress_printer(args.quiet)
    use_domain(args.domain)  # the search's workers inherit it: they draw from check's domain
    corpus = None
    if "corpus" in ops:
        from kvcontract.conformance.engines.corpora import resolve

        chosen = resolve(args.engine, args.corpus, args.tables, progress=progress)  # the report names it
        corpus = str(chosen.path) if chosen.path else None
    try:
        report = run_symbolic(args.engine, budget_s=budget, iterations=args.iterations, optimize=args.optimize,
                              operations=ops, kinds=comma_list(args.kinds, "--kinds"), clauses=clauses,
                              xfails=args.xfails, use_default_xfails=not args.no_xfails, seed_value=args.seed,
                              json_path=args.json, progress=progress, wall_s=wall, corpus=corpus)
    except SearchError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt as exc:
        where = f"partial report kept in {args.json}" if args.json else "no report requested (--json)"
        print(f"interrupted by {interrupt_name(exc)}; {where} (complete: false)", file=sys.stderr)
        return interrupt_exit_code(exc)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(render(report, verbose=args.verbose))
    return 1 if report.failing or not report.complete else 0
