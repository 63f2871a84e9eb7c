"""The ``kvcontract`` command line.

Each verb has its module and registers itself here: a verb module exposes
``register(subparsers)``, which adds its parser and sets ``func`` (``args -> exit
code``) as the parser default. The conformance verbs live in
``kvcontract.conformance.cli.<verb>`` and take their shared options from
:mod:`kvcontract.conformance.cli.options`; ``kernels`` lives with the kernels.

Exit codes: 0 nothing failed, 1 something failed, 2 usage error (one line, no
traceback; ``kvcontract`` without a verb prints the usage).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import kvcontract
from kvcontract.usage import UsageError

# Verb modules, imported lazily so that a verb's heavy imports (torch, an
# engine) never slow down or break the others.
VERB_MODULES: tuple[str, ...] = (
    "kvcontract.conformance.cli.check",
    "kvcontract.conformance.cli.engines",
    "kvcontract.conformance.cli.diff",
    "kvcontract.conformance.cli.coverage",
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
        "against it (check), list engines (engines), see its surface (coverage), search it "
        "symbolically (symbolic), measure the suite's power (mutants) and check attention kernels "
        "against the ground truth (kernels). Exit 0: nothing failed, 1: something failed, "
        "2: usage error."))
    parser.add_argument("--version", action="version", version=f"kvcontract {kvcontract.__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name in VERB_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
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
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
