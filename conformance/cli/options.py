"""The options the conformance verbs share, each declared once.

``--engine``, ``--domain``, ``--optimize`` (and the interpreter modes it selects), ``--profile`` and
the expectations pair ``--xfails FILE`` / ``--no-xfails``, on top of the options of every
verb family (:mod:`kvcontract.options`: ``--json``, ``--seed``, ``--quiet`` and the
comma-separated lists), which this module re-exports so that a conformance verb imports
its options from here only. A verb adds an option by calling its ``add_*`` helper with
the help text of its own output.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from kvcontract.conformance.reports.check import OPTIMIZE_CHOICES, optimize_modes
from kvcontract.options import add_json, add_quiet, add_seed, comma_list
from kvcontract.usage import UsageError

__all__ = [
    "add_corpus",
    "add_domain",
    "add_engine",
    "add_json",
    "add_optimize",
    "add_profile",
    "add_quiet",
    "add_sarif",
    "add_seed",
    "add_xfails",
    "comma_list",
    "optimize_modes",
    "progress_printer",
    "writable_dir",
    "writable_file",
]

ENGINE_HELP = ("builtin name (see `kvcontract engines`), mutant:<name>, an installed entry point "
               "(group kvcontract.engines), or package.module:factory")


def add_engine(parser: argparse.ArgumentParser, *, mutants: bool = True, required: bool = True,
               what: str = "", default: str | None = None) -> None:
    """``--engine NAME`` (required unless ``required=False`` or a ``default`` is given); ``mutants``:
    whether ``mutant:<name>`` is accepted; ``what``: what the engine is used for, put before the names."""
    text = ENGINE_HELP if mutants else ENGINE_HELP.replace(" mutant:<name>,", "")
    text = f"{what}: {text}" if what else text
    parser.add_argument("--engine", required=required and default is None, default=default,
                        help=f"{text} (default {default})" if default else text)


def add_corpus(parser: argparse.ArgumentParser, *, tables: bool = True, what: str | None = None) -> None:
    """``--corpus auto|none|FILE`` and (``tables``) ``--tables FILE ...``: the real models' tables a run
    feeds the engine (:mod:`kvcontract.conformance.engines.corpora`); ``what``: the help of a verb
    that reads the corpus for another purpose."""
    parser.add_argument("--corpus", default="auto", metavar="auto|none|FILE",
                        help=what or "the corpus of real models' layer tables fed to the engine first: auto "
                             "(default: for vllm, the one built by the checked release's own model code, shipped "
                             "or cached, else built now; for any other engine, the pinned vLLM release's), "
                             "none, or a corpus file (kvcontract tables --build --out FILE)")
    if not tables:
        return
    parser.add_argument("--tables", nargs="+", default=[], metavar="FILE",
                        help="your own layer-table files (JSON: model, layers, optional settings), added "
                             "to the corpus as members like any other")


def add_domain(parser: argparse.ArgumentParser) -> None:
    """``--domain producible|constructor`` (default producible): which spec inputs are drawn."""
    from kvcontract.conformance.contract.strategies import DOMAIN_MODES

    parser.add_argument("--domain", default=DOMAIN_MODES[0], choices=DOMAIN_MODES,
                        help="spec inputs drawn: producible (default; for an engine whose adapter reads "
                             "its code, e.g. vllm: only the fields and literal values its own code sets, "
                             "the rest kept at their defaults) or constructor (every field, every value "
                             "the spec constructors accept: findings on inputs the engine never builds)")


def add_optimize(parser: argparse.ArgumentParser) -> None:
    """``--optimize off|on|both`` (default both): the interpreter modes
    (:func:`optimize_modes` turns the value into them)."""
    parser.add_argument("--optimize", default="both", choices=OPTIMIZE_CHOICES,
                        help="interpreter modes: off (normal only), on (python -O only), both (default)")


def add_profile(parser: argparse.ArgumentParser) -> None:
    """``--profile quick|default|thorough``: how many examples each clause draws."""
    from kvcontract.conformance.run.execution import PROFILES  # the runner defines them

    parser.add_argument("--profile", default="default", choices=sorted(PROFILES),
                        help="examples per clause: quick (the systematic phase only), default (+100 "
                             "random), thorough (+1000 random); default: default")


def add_xfails(parser: argparse.ArgumentParser) -> None:
    """``--xfails FILE`` / ``--no-xfails`` (they exclude each other:
    :func:`kvcontract.conformance.reports.expectations.check_xfails_options`)."""
    parser.add_argument("--xfails", metavar="FILE",
                        help="expected findings; default: the bundled file for the engine release, if any")
    parser.add_argument("--no-xfails", action="store_true",
                        help="report known failures as failures")


def add_sarif(parser: argparse.ArgumentParser, of: str) -> None:
    """``--sarif FILE``: the defects ``of`` a report as a SARIF 2.1.0 log
    (:mod:`kvcontract.conformance.reports.sarif`), for code-scanning tools."""
    parser.add_argument("--sarif", metavar="FILE",
                        help=f"write the defects of {of} as SARIF 2.1.0 to FILE: one result per defect on "
                             "its engine line, its repro attached, for code scanning (e.g. GitHub's upload-sarif)")


def progress_printer(quiet: bool) -> Callable[[str], None] | None:
    """Where progress lines go: stderr, or nowhere with ``--quiet``."""
    if quiet:
        return None

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return progress


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def _creatable(path: Path, option: str) -> None:
    """``path`` does not exist: its nearest existing ancestor must be a writable folder."""
    ancestor = _nearest_existing(path.parent if str(path.parent) else Path("."))
    if not ancestor.is_dir():
        raise UsageError(f"{option} {path}: {ancestor} is not a directory; give a path under a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: directory {ancestor} is not writable; choose another path")


def writable_file(value: str | None, option: str) -> None:
    """An output file (``--json FILE``): not a directory, and writable or creatable (its
    missing parent folders are created when it is written). Raises :class:`UsageError`
    before any work is done, so that a run's results are never lost to a bad path."""
    if not value:
        return
    path = Path(value)
    if path.is_dir() or value.endswith(("/", os.sep)):
        example = {"--junit": "report.xml", "--sarif": "report.sarif"}.get(option, "report.json")
        raise UsageError(f"{option} {value} is a directory; give a file name, e.g. {option} {path / example}")
    if path.exists():
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {value} is not writable; choose another path or fix its permissions")
        return
    _creatable(path, option)


def writable_dir(value: str | Path, option: str) -> None:
    """An output folder (``--repro-dir DIR``): a writable folder, or creatable."""
    path = Path(value)
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{option} {value} exists and is not a directory; give a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {value} is not writable; choose another directory")
        return
    _creatable(path, option)
