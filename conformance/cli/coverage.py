"""``kvcontract coverage``: the engine's spec kinds and fields, their roles in the
contract, and the clauses that exercised them (ROLE-COVER-1).

Exit codes: 0 every kind and field classified, 1 something unclassified, 2 usage
error.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kvcontract.usage import UsageError

SCHEMA_VERSION = 1


def register(subparsers: Any) -> None:
    cov = subparsers.add_parser(
        "coverage", help="the engine's spec kinds x fields x roles, and the clauses that exercised them")
    cov.add_argument("--engine", required=True,
                     help="builtin name (see `kvcontract engines`) or package.module:factory")
    cov.add_argument("--report", metavar="CHECK.json",
                     help="a `kvcontract check --json` report: its 'coverage' key gives the clauses")
    cov.add_argument("--json", metavar="FILE", help="write the table as JSON")
    cov.set_defaults(func=run)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render_table(rows: list[Any], exercised: dict[str, list[str]] | None) -> str:
    """Kind, field, role, clauses: one line per field, columns aligned."""
    header = ("kind", "field", "role", "clauses")
    lines = [header]
    for r in rows:
        clauses = "-" if exercised is None else (", ".join(exercised.get(r.key, [])) or "none")
        lines.append((r.kind, r.field, r.role, clauses))
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    return "\n".join(
        f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip() for a, b, c, d in lines)


def run(args: argparse.Namespace) -> int:
    from kvcontract.conformance.contract import surface
    from kvcontract.conformance.engines.protocol import (
        EngineUnavailable,
        UnknownEngine,
        load_engine,
    )

    try:
        engine = load_engine(args.engine)
    except UnknownEngine as exc:
        raise UsageError(str(exc)) from None
    except EngineUnavailable as exc:
        raise UsageError(f"engine {args.engine!r} is not available: {exc}") from None
    exercised = None
    if args.report:
        try:
            exercised = surface.exercised_by(args.report)
        except ValueError as exc:
            raise UsageError(f"--report: {exc}") from None
    if surface.spec_classes_of(engine) is None:
        print(surface.coverage_summary(engine))
        return 0
    rows = surface.coverage_rows(engine)
    missing = surface.unclassified(engine)
    print(render_table(rows, exercised))
    print()
    for item in missing:
        print(f"UNCLASSIFIED {item.name}: {item.message}")
    print(surface.coverage_summary(engine))
    if args.json:
        data = {
            "schema_version": SCHEMA_VERSION,
            "engine": engine.name,
            "version": engine.version,
            "rows": [{"kind": r.kind, "field": r.field, "role": r.role, "status": r.status,
                      "clauses": None if exercised is None else exercised.get(r.key, [])}
                     for r in rows],
            "unclassified": [{"kind": u.kind, "field": u.field, "message": u.message}
                             for u in missing],
        }
        try:
            _write_atomically(Path(args.json), json.dumps(data, indent=2) + "\n")
        except OSError as exc:
            raise UsageError(f"--json {args.json}: cannot write: {exc.strerror}") from None
    return 1 if missing else 0

