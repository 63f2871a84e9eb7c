"""The ``kvcontract`` command line.

Each verb has its module and registers itself here: a verb module exposes
``register(subparsers)``, which adds its parser and sets ``func`` (``args -> exit
code``) as the parser default. The conformance verbs live in
``kvcontract.conformance.cli.<verb>`` and take their shared options from
:mod:`kvcontract.conformance.cli.options`; ``kernels`` lives with the kernels.

Exit codes: 0 nothing failed, 1 something failed, 2 usage error (one line, no
traceback; ``kvcontract`` without a verb prints the usage), 130 stopped by SIGINT
(Ctrl-C), 143 stopped by SIGTERM (what a CI timeout sends). Both signals end the
workers (their process groups), and ``check`` and ``symbolic`` then keep what ran: the
partial report (``complete: false``) at the ``--json`` path, one line on stderr. The
SIGTERM handler is installed here, in the command line's process only (never in a
worker: a worker dies with its supervisor).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import kvcontract
from kvcontract.usage import Interrupted, UsageError, interrupt_exit_code, interrupt_name

# Verb modules, imported lazily so that a verb's heavy imports (torch, an
# engine) never slow down or break the others.
VERB_MODULES: tuple[str, ...] = (
    "kvcontract.conformance.cli.check",
    "kvcontract.conformance.cli.engines",
    "kvcontract.conformance.cli.diff",
    "kvcontract.conformance.cli.coverage",
    "kvcontract.conformance.cli.plan",
    "kvcontract.conformance.cli.tables",
    "kvcontract.conformance.cli.report",
    "kvcontract.conformance.cli.symbolic",
    "kvcontract.conformance.cli.mutants",
    "kvcontract.kernels.cli",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvcontract", description=(
        "kvcontract: the KV-cache spec merge contract of LLM serving engines. Check an engine "
        "against it (check), list engines (engines), see its surface (coverage), plan a model's KV cache "
        "(plan), list the real models' tables it is fed (tables), render a check as an HTML page (report), search it "
        "symbolically (symbolic), measure the suite's power (mutants) and check attention kernels "
        "against the ground truth (kernels). Exit 0: nothing failed, 1: something failed, "
        "2: usage error, 130 / 143: stopped by SIGINT / SIGTERM (check and symbolic keep a partial report)."))
    parser.add_argument("--version", action="version", version=f"kvcontract {kvcontract.__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name in VERB_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _terminated(signum: int, _frame: Any) -> None:
    """SIGTERM as SIGINT is: an exception in the main thread, so that the verb stops its
    workers and keeps its partial report."""
    raise Interrupted(signum)


EARLY_WORKERS = ("check",)
"""Verbs whose workers start before the command line parses and imports (:func:`prestart`)."""


def main(argv: Sequence[str] | None = None) -> int:
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminated)
    words = list(sys.argv[1:] if argv is None else argv)
    early = bool(words) and words[0] in EARLY_WORKERS and not {"-h", "--help"} & set(words)
    if early:
        from kvcontract.conformance.run.worker import prestart

        prestart()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.verb is None:  # bare `kvcontract`: what it can do
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a verb without a partial report
        print(f"interrupted by {interrupt_name(exc)}", file=sys.stderr)
        return interrupt_exit_code(exc)
    except BrokenPipeError:  # the reader went away (`kvcontract tables | head`): nothing more to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    finally:
        if early:
            from kvcontract.conformance.run.worker import discard_prestarted

            discard_prestarted()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
