"""``kvcontract report``: a check report (``kvcontract check --json``) as one self-contained HTML
page — the clause table, a section per defect with its engine line in context, the reference's and
the engine's plans of every corpus table drawn side by side, the release history. The page opens
offline from a file (no server, no network, no script).

The plans are drawn from a plans file (``--plans``, what ``--save-plans`` keeps), or planned now
(the corpus: ``--corpus``, by default the shipped one of the report's release) by the reference
and, with ``--engine``, the engine in workers; the plan agreement (``--agreement``, by default the
kit's ``docs/plan-agreement.json`` of the same release) is listed under each drawing. Exit 0: written; 2: usage
error (a file that is not a check report, a bad option), one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kvcontract.conformance.cli.options import add_corpus, add_engine, writable_file
from kvcontract.usage import UsageError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report", help="a check report as one self-contained HTML page (defects, plans drawn, history)",
        description="Render a check report (kvcontract check --json FILE) as one static HTML page: header and "
                    "verdict, the clause table, one section per defect (reach, harm, the engine line with its "
                    "source), the reference's and the engine's plans of every corpus table drawn side by side "
                    "with the differences marked, and the release history. No server, no network, no script.")
    p.add_argument("check", metavar="CHECK.json", help="a kvcontract check --json report")
    p.add_argument("--out", metavar="FILE", help="the HTML file to write (default: CHECK.html beside the report)")
    add_engine(p, required=False, what="plan the corpus tables now with this engine (in workers)")
    p.add_argument("--plans", metavar="FILE", help="draw the plans kept in FILE (--save-plans writes one) "
                                                   "instead of planning")
    p.add_argument("--save-plans", metavar="FILE", help="keep the plans drawn in FILE (for --plans)")
    p.add_argument("--agreement", metavar="FILE", help="the plan agreement to list under each drawing (default: "
                                                       "the kit's docs/plan-agreement.json, when of the "
                                                       "report's engine and release)")
    add_corpus(p, tables=False, what="the corpus whose tables the check fed, to plan and draw: auto (default: the "
                                     "one shipped for the report's vLLM release, else the pinned release's, which "
                                     "every other engine is fed), none (no plans), or a corpus file")
    p.add_argument("--history", metavar="FILE", help="release history data (default: the kit's "
                                                     "docs/vllm-history/findings.json, for a vllm report)")
    p.add_argument("--no-history", action="store_true", help="leave the release history out")
    p.add_argument("--source", metavar="DIR", help="the folder holding the engine's package, to read the "
                                                   "defects' lines from (default: the checked source tree, "
                                                   "else the installed package of the report's version)")
    p.set_defaults(func=run)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _corpus(report: Any, given: str) -> tuple[Any, str]:
    """The corpus whose tables the check fed: ``--corpus FILE``; ``auto``: the shipped corpus of the
    report's vLLM release, else the pinned release's (what a check of any other engine is fed);
    ``none``: no plans."""
    from kvcontract.conformance.contract.corpus import CorpusFileError, read_corpus
    from kvcontract.conformance.engines.vllm import corpus as vllm_corpus

    if given == "none":
        return None, "no corpus (--corpus none)"
    if given != "auto":
        path = Path(given)
        if not path.is_file():
            raise UsageError(f"kvcontract report: --corpus {given}: no such file")
    else:
        own = vllm_corpus.shipped_path(report.engine_version) if report.engine.split("@")[0] == "vllm" else None
        path = own if own is not None and own.is_file() else vllm_corpus.shipped_path(vllm_corpus.PINNED_RELEASE)
        if not path.is_file():
            return None, "no corpus found here"
    try:
        corpus = read_corpus(path)
    except CorpusFileError as exc:
        raise UsageError(f"kvcontract report: --corpus: {exc}") from None
    return corpus, f"the corpus {path.name} ({corpus.engine} {corpus.release}, {len(corpus.tables)} tables)"


def _history(report: Any, args: argparse.Namespace) -> tuple[Any, str]:
    from kvcontract.conformance.reports.html.history import DEFAULT, HistoryFileError, read_history

    if args.no_history:
        return None, "left out (--no-history)."
    if args.history:
        if not Path(args.history).is_file():
            raise UsageError(f"kvcontract report: --history {args.history}: no such file")
        path = Path(args.history)
    elif report.engine.split("@")[0] != "vllm":
        return None, (f"the kit's history data is of vLLM releases, and this report is of {report.engine} "
                      "(give --history FILE).")
    elif not DEFAULT.is_file():
        return None, "this kit has no history data (a checkout's docs/vllm-history/findings.json; give --history FILE)."
    else:
        path = DEFAULT
    try:
        return read_history(path), ""
    except HistoryFileError as exc:
        raise UsageError(f"kvcontract report: --history {exc}") from None


def _agreement(report: Any, given: str | None) -> tuple[Any, str]:
    from kvcontract.conformance.reports.html.agreement import (
        DEFAULT,
        AgreementFileError,
        read_agreement,
    )

    if given and not Path(given).is_file():
        raise UsageError(f"kvcontract report: --agreement {given}: no such file")
    path = Path(given) if given else DEFAULT
    if not path.is_file():
        return None, "this kit has no plan agreement (a checkout's docs/plan-agreement.json; give --agreement FILE)."
    try:
        found = read_agreement(path)
    except AgreementFileError as exc:
        raise UsageError(f"kvcontract report: --agreement {exc}") from None
    engine = report.engine.split("@")[0]
    if (found.engine, found.engine_version) != (engine, report.engine_version):
        if given:
            raise UsageError(f"kvcontract report: --agreement {given} is of {found.engine} {found.engine_version}, "
                             f"the report of {engine} {report.engine_version}")
        return None, (f"the kit's plan agreement is of {found.engine} {found.engine_version}, this report of "
                      f"{engine} {report.engine_version}.")
    return found, ""


def run(args: argparse.Namespace) -> int:
    from kvcontract.conformance.reports.html import plans as plan_data
    from kvcontract.conformance.reports.html.render import (
        NotACheckReport,
        build_page,
        load_check,
        render_page,
    )
    from kvcontract.reports import write_atomic

    out = args.out or str(Path(args.check).with_suffix(".html"))
    writable_file(out, "--out")
    writable_file(args.save_plans, "--save-plans")
    if args.plans and args.engine:
        raise UsageError("kvcontract report: give --plans FILE or --engine NAME, not both")
    try:
        report = load_check(args.check)
    except NotACheckReport as exc:
        raise UsageError(f"kvcontract report: {exc}") from None
    if args.engine:
        from kvcontract.conformance.engines.protocol import check_engine_name

        try:
            check_engine_name(args.engine)
        except LookupError as exc:
            raise UsageError(f"kvcontract report: {exc}") from None
    history, history_note = _history(report, args)
    corpus, corpus_how = _corpus(report, args.corpus)
    agreement, agreement_note = _agreement(report, args.agreement)
    engine_title = "engine"
    if args.plans:
        try:
            kept = plan_data.read_plans(args.plans)
        except plan_data.PlansFileError as exc:
            raise UsageError(f"kvcontract report: --plans {exc}") from None
        cases, missing = kept["cases"], []
        engine_title = kept.get("engine") or "engine"
        how = (f"Plans read from {args.plans} (the engine's by {kept.get('engine') or 'no engine'}; "
               f"{kept.get('corpus') or 'corpus not recorded'}).")
    elif corpus is None:
        cases, missing, how = [], list(report.tables), f"Nothing planned: {corpus_how} (give --corpus FILE)."
    else:
        cases, missing = plan_data.plan_cases(report, corpus)
        _say(f"kvcontract report: planning {len(cases)} cases of {len(report.tables)} corpus tables "
             f"({corpus_how}) with the reference{f' and {args.engine}' if args.engine else ''} ...")
        plan_data.plan_all(cases, corpus, args.engine, _say)
        engine_title = args.engine or "engine"
        how = (f"Planned from {corpus_how} within the PLAN laws' budget: the reference here, "
               + (f"the engine ({args.engine}) in supervised workers." if args.engine else
                  "the engine not (kvcontract report --engine NAME plans it too)."))
    if args.save_plans:
        plan_data.write_plans(args.save_plans, args.engine or None, cases, corpus_how)
    page = build_page(report, source_name=Path(args.check).name, cases=cases, corpus=corpus, plans_how=how,
                      engine_title=engine_title, missing=missing, history=history, history_note=history_note,
                      source_dir=args.source, agreement=agreement, agreement_note=agreement_note)
    html = render_page(page)
    write_atomic(out, html)
    _say(f"kvcontract report: wrote {out} ({len(html) / 1e6:.1f} MB: {len(page['defects'])} defects, "
         f"{len(page['tables'])} plan drawings, {page['differing']} with differences)")
    return 0


__all__ = ["register", "run"]
