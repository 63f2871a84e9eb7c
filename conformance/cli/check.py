"""``kvcontract check``: the main job of the kit."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvcontract.conformance.cli.options import (
    add_corpus,
    add_domain,
    add_engine,
    add_json,
    add_optimize,
    add_profile,
    add_quiet,
    add_sarif,
    add_seed,
    add_xfails,
    comma_list,
    progress_printer,
    writable_dir,
    writable_file,
)
from kvcontract.conformance.contract.laws import CLAUSE_ORDER, known_clauses
from kvcontract.conformance.engines.environments import EnvironmentMissing
from kvcontract.conformance.engines.protocol import (
    SOURCE_SEPARATOR,
    UnknownEngine,
    check_engine_name,
)
from kvcontract.conformance.reports.check import Report
from kvcontract.conformance.reports.diff import apply_baseline, known_signatures, read_report
from kvcontract.conformance.reports.diff import render as render_diff
from kvcontract.conformance.reports.expectations import (
    XfailsError,
    check_xfails_options,
    load_xfails,
)
from kvcontract.conformance.reports.gate import (
    Gate,
    needing_attention,
    render_console,
    write_junit,
    write_repros,
)
from kvcontract.conformance.reports.sarif import write_sarif
from kvcontract.conformance.run.session import (
    AFTER_HANG_EXAMPLE_TIMEOUT_S,
    CLAUSE_TIMEOUT_S,
    EXAMPLE_TIMEOUT_S,
    CheckInterrupted,
    EngineLoadError,
    keep_partial,
    report_json,
    run_check,
    write_report_json,
)
from kvcontract.usage import UsageError


def register(subparsers: Any) -> None:
    check = subparsers.add_parser(
        "check", help="run every clause against an engine (normal and -O)",
        description="Check an engine against every clause of the contract, in the normal interpreter "
                    "and under python -O, each in a supervised worker. Every distinct finding "
                    "(clause x mode x signature) is reported; the console lists the findings that "
                    "need attention one a line, each with its repro file (--repro-dir), and ends "
                    "with the verdict. Exit 0 when nothing failed (with --baseline: nothing new), "
                    "1 otherwise, 2 on a usage error.")
    add_engine(check)
    check.add_argument("--engine-path", metavar="DIR",
                       help="check the engine from a source checkout: DIR holds its package (for vllm: "
                            "DIR/vllm/__init__.py), imported with this environment's dependencies; the "
                            "report records DIR, git describe and whether the tree is dirty")
    add_profile(check)
    add_corpus(check)
    add_domain(check)
    add_optimize(check)
    add_json(check, "the report (schema 'check' v2)")
    check.add_argument("--junit", metavar="FILE",
                       help="write JUnit XML: one testcase per clause x mode, failed only by a finding "
                            "that needs attention, skipped when it has only known findings")
    check.add_argument("--repro-dir", metavar="DIR",
                       help="write one repro file per finding that needs attention (at most 200) and "
                            "INDEX.txt (default: <json stem>-repros/ beside --json, else ./kvcontract-repros/)")
    add_sarif(check, "the run (with --baseline, each result marked new / updated / unchanged)")
    check.add_argument("--verbose", action="store_true",
                       help="also print every message and repro snippet, and every known finding")
    add_seed(check, "the hypothesis random phase")
    add_xfails(check)
    check.add_argument("--clauses", metavar="IDS",
                       help="comma-separated clause IDs, any case (default: all)")
    check.add_argument("--clause-timeout", type=float, default=CLAUSE_TIMEOUT_S, metavar="S",
                       help=f"seconds one clause may run before it is stopped (default {CLAUSE_TIMEOUT_S:g})")
    check.add_argument("--example-timeout", type=float, default=EXAMPLE_TIMEOUT_S, metavar="S",
                       help="seconds one example may run without progress before the engine counts "
                            f"as hung (default {EXAMPLE_TIMEOUT_S:g}; after a hang, "
                            f"{AFTER_HANG_EXAMPLE_TIMEOUT_S:g} for the rest of that pass)")
    add_quiet(check)
    check.add_argument("--baseline", metavar="BASE.json",
                       help="compare with a previous report (e.g. of the merge base): classify findings "
                            "new / fixed / unchanged; exit 1 only when one is new")
    check.set_defaults(func=run)


def select_clauses(value: str | None) -> list[str] | None:
    """``--clauses``: IDs matched case-insensitively; an unknown one is a usage error
    that lists the valid IDs."""
    clauses = comma_list(value, "--clauses")
    if not clauses:
        return clauses
    known = {c.upper(): c for c in known_clauses()}
    unknown = [c for c in clauses if c.upper() not in known]
    if unknown:
        valid = sorted(known.values(), key=lambda c: (CLAUSE_ORDER.get(c, len(CLAUSE_ORDER)), c))
        raise UsageError(f"--clauses: no law for {', '.join(unknown)}; valid IDs: {', '.join(valid)}")
    return list(dict.fromkeys(known[c.upper()] for c in clauses))


def repro_dir(args: argparse.Namespace) -> Path:
    if args.repro_dir:
        return Path(args.repro_dir)
    if args.json:
        json_path = Path(args.json)
        return json_path.with_name(f"{json_path.stem}-repros")
    return Path("kvcontract-repros")


def validate_outputs(args: argparse.Namespace) -> Path | None:
    """Every output path, before the engine loads (exit 2 with what to fix)."""
    files = [(option, value) for option, value in (("--json", args.json), ("--junit", args.junit),
                                                    ("--sarif", args.sarif)) if value]
    seen: dict[Path, str] = {}
    for option, value in files:
        writable_file(value, option)
        path = Path(value).resolve()
        if path in seen:
            raise UsageError(f"{seen[path]} and {option} name the same file; give each its own")
        if args.baseline and path == Path(args.baseline).resolve():
            raise UsageError(f"{option} would overwrite --baseline; write this check's report elsewhere")
        seen[path] = option
    directory = repro_dir(args)
    if args.repro_dir or args.json:
        writable_dir(directory, "--repro-dir")
        return directory
    try:  # the default in the current directory: a read-only one only loses the repro files
        writable_dir(directory, "--repro-dir")
    except UsageError as exc:
        print(f"warning: no repro files ({exc}); give --repro-dir DIR", file=sys.stderr)
        return None
    return directory


def expectation_warnings(report: Report) -> list[str]:
    """A loud word when the expectations file names another engine or release."""
    if not report.expectations:
        return []
    try:
        expectations = load_xfails(report.expectations)
    except XfailsError:
        return []
    engine, version = expectations.engine, expectations.version
    norm = str.lower
    if norm(engine) == norm(report.engine) and version == report.engine_version:
        return []
    made_for = f"{engine or '(no engine)'} {version or '(no version)'}"
    return [f"expectations file {report.expectations} is for {made_for}, but the engine is "
            f"{report.engine} {report.engine_version}: its known findings may not match; give --xfails "
            "for this release or --no-xfails"]


def run(args: argparse.Namespace) -> int:
    check_xfails_options(args.xfails, args.no_xfails)
    clauses = select_clauses(args.clauses)
    if args.clause_timeout <= 0 or args.example_timeout <= 0:
        raise UsageError("--clause-timeout and --example-timeout must be positive")
    directory = validate_outputs(args)
    baseline = read_report(args.baseline) if args.baseline else None  # a bad file fails before the run
    engine = args.engine
    if args.engine_path:
        if not Path(args.engine_path).is_dir():
            raise UsageError(f"--engine-path {args.engine_path}: no such directory")
        engine = f"{args.engine}{SOURCE_SEPARATOR}{Path(args.engine_path).resolve()}"
    try:
        check_engine_name(engine)  # a misspelt engine fails here, before any worker starts
    except UnknownEngine as exc:
        raise UsageError(str(exc)) from None
    progress = progress_printer(args.quiet)
    from kvcontract.conformance.engines.corpora import resolve

    corpus = resolve(engine, args.corpus, args.tables, progress=progress)
    if progress is not None:
        progress(f"[corpus] {corpus.how}")
    try:
        report = run_check(engine, profile=args.profile, seed_value=args.seed, optimize=args.optimize,
                           xfails=args.xfails, use_default_xfails=not args.no_xfails, clauses=clauses,
                           progress=progress, clause_timeout=args.clause_timeout,
                           example_timeout=args.example_timeout, domain=args.domain,
                           known=known_signatures(baseline) if baseline is not None else None,
                           corpus=str(corpus.path) if corpus.path else None)
    except (EngineLoadError, EnvironmentMissing) as exc:
        raise UsageError(f"engine {args.engine!r} cannot be loaded: {exc}") from None
    except XfailsError as exc:
        raise UsageError(str(exc)) from None
    except CheckInterrupted as exc:
        code = keep_partial(exc, args.json, args.junit)
        if args.sarif:
            _write_partial_sarif(exc.report, args.sarif, baseline, args.baseline)
        return code
    if corpus.warning:
        report.warnings.append(corpus.warning)
    report.warnings += expectation_warnings(report)
    for warning in report.warnings:
        print(f"WARNING: {warning}", file=sys.stderr, flush=True)
    delta = apply_baseline(report, args.baseline, base=baseline) if baseline is not None else None
    gate = Gate(report=report, attention=needing_attention(report, delta), delta=delta)
    outputs: list[tuple[str, str | Path | None, Callable[[str | Path], None]]] = [
        ("--repro-dir", directory, lambda p: write_repros(gate, p)),
        ("--json", args.json, lambda p: write_report_json(report, p)),
        ("--junit", args.junit, lambda p: write_junit(gate, p)),
        ("--sarif", args.sarif, lambda p: write_sarif(json.loads(report_json(report)), p, baseline=baseline,
                                                      baseline_name=args.baseline or "", repro_dir=directory))]
    for option, path, write in outputs:
        if not path:
            continue
        try:
            write(path)
        except OSError as exc:
            gate.output_errors.append(f"{option} {path} not written: {exc.strerror or exc}")
            print(f"error: {option} {path} not written: {exc.strerror or exc}", file=sys.stderr)
    if args.verbose and delta is not None:
        print(render_diff(delta, verbose=True) + "\n")
    print(render_console(gate, verbose=args.verbose))
    return gate.exit_code


def _write_partial_sarif(report: Report, path: str, baseline: dict[str, Any] | None,
                         baseline_name: str | None) -> None:
    """The SARIF log of an interrupted run (not executionSuccessful, no defect traced), with
    one line on stderr."""
    try:
        write_sarif(json.loads(report_json(report)), path, baseline=baseline, baseline_name=baseline_name or "")
    except OSError as exc:
        print(f"error: --sarif {path} not written: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return
    print(f"partial SARIF log written to {path} (not an analysis to upload)", file=sys.stderr, flush=True)


__all__ = ["register", "run"]
