"""Command-line options every verb family declares: ``--json``, ``--seed``, ``--quiet``,
and the comma-separated lists (``--clauses A,B``).

Each option is declared here once; a verb module calls the ``add_*`` helper with the
help text of its own output. Both the conformance verbs
(:mod:`kvcontract.conformance.cli.options` adds ``--engine``, ``--optimize`` and the
expectations pair on top) and ``kvcontract kernels`` use this module, which imports
nothing else of the kit but :mod:`kvcontract.usage`, so neither depends on the other.
"""

from __future__ import annotations

import argparse

from kvcontract.usage import UsageError

__all__ = ["add_json", "add_quiet", "add_seed", "comma_list"]


def add_json(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json FILE``: also write ``what`` (e.g. ``"the report (schema 'check' v2)"``) as JSON."""
    parser.add_argument("--json", metavar="FILE", help=f"write {what} as JSON to FILE")


def add_seed(parser: argparse.ArgumentParser, of: str) -> None:
    """``--seed N`` (default 0): the seed ``of`` what (e.g. ``"the random phase"``)."""
    parser.add_argument("--seed", type=int, default=0, help=f"seed of {of} (default 0)")


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress lines on stderr."""
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def comma_list(value: str | None, option: str) -> list[str] | None:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``; None when the option was not given. A given
    option that names nothing (``--clauses ,``) is a :class:`~kvcontract.usage.UsageError`."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"{option} names nothing: {value!r}")
    return items
