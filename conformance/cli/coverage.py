"""``kvcontract coverage``: the engine's spec kinds and fields, their roles in the
contract, and the clauses that exercised them (ROLE-COVER-1).

Exit codes: 0 every kind and field classified, 1 something unclassified, 2 usage
error.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kvcontract.conformance.cli.options import add_engine, add_json
from kvcontract.reports import text_table, write_atomic
from kvcontract.usage import UsageError

SCHEMA_VERSION = 1


def register(subparsers: Any) -> None:
    cov = subparsers.add_parser(
        "coverage", help="the engine's spec kinds x fields x roles, and the clauses that exercised them")
    add_engine(cov, mutants=False)
    cov.add_argument("--report", metavar="CHECK.json",
                     help="a `kvcontract check --json` report: its 'coverage' key gives the clauses")
    add_json(cov, "the table")
    cov.set_defaults(func=run)


def render_table(rows: list[Any], exercised: dict[str, list[str]] | None) -> str:
    """Kind, field, role, clauses: one line per field, columns aligned."""
    cells = [[r.kind, r.field, r.role,
              "-" if exercised is None else (", ".join(exercised.get(r.key, [])) or "none")] for r in rows]
    return "\n".join(text_table(["kind", "field", "role", "clauses"], cells))


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
            write_atomic(args.json, json.dumps(data, indent=2) + "\n")
        except OSError as exc:
            raise UsageError(f"--json {args.json}: cannot write: {exc.strerror}") from None
    return 1 if missing else 0

