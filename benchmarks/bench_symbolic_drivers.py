"""Our symbolic driver against Hypothesis's CrossHair backend, on the same mutants, in one run.

Run: ``.venv/bin/python benchmarks/bench_symbolic_drivers.py [--budget 60] [--mutants a,b]
[--write docs/symbolic-drivers.md]``

Per mutant (default: the value-branch survivors, ``dispatch-long-block``, and a sample of the
catalogue across chapters), each driver gets the same CPU budget in the normal mode and stops
at its first finding:

- **ours**: ``kvcontract symbolic`` on the mutant (:func:`~kvcontract.conformance.power.symbolic.symbolic_hunt`),
  its structural and value groups for the operations the mutant changes;
- **hypothesis-crosshair**: ``settings(backend="crosshair")`` over the strategies of the clauses the
  mutant is expected to fail (:mod:`kvcontract.conformance.power.crosshair_backend`), the whole
  law check traced.

The table gives found or not, CPU seconds to the first finding and inputs judged (paths or
examples); the last line, findings per CPU second of each. Figures compare only within one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from kvcontract.conformance.power.crosshair_backend import backend_available, backend_hunt_isolated
from kvcontract.conformance.power.symbolic import symbolic_hunt
from kvcontract.reports import markdown_table, text_table, write_atomic

DEFAULT_MUTANTS = ("block-size-48", "fp8-family-pair", "dispatch-long-block", "drops-capability",
                   "unchecked-beyond-second", "e5m2-large-block-page", "dispatch-uniform-by-sum",
                   "uniform-by-kind", "sorts-input")


WHAT_WE_KEEP = """\
**What we keep.** `kvcontract symbolic` keeps its own driver, and the comparison stays here as a
benchmark. The backend runs each law's Hypothesis strategy symbolically, so it can draw only
what the strategy's value lists hold (no block size of 48, however long it runs), and it traces
the whole law check, the kit's bookkeeping included, so each example costs the solver far
more than one of our paths: see the examples column against the paths column. Where a
strategy already draws the defect's shape (one dtype at large blocks), the backend can be the
quicker of the two, and the table shows where. Our driver chooses structure from the engine's
building blocks and keeps only the values of one field symbolic, through the engine's own
operation; its value groups then end in a bounded proof or a counterexample. An error in the
backend's column is the backend's, raised where the kit's dispatch law reads a symbolic value
with tracing off: it is not a finding."""


def _ours(name: str, budget: float) -> dict[str, Any]:
    start = time.perf_counter()
    found = symbolic_hunt(name, budget)
    return {"found": found["symbolic_found"], "seconds": found.get("symbolic_seconds"),
            "inputs": found["symbolic_paths"], "clause": ",".join(found.get("symbolic_clauses", [])),
            "wall": round(time.perf_counter() - start, 1)}


def _theirs(name: str, budget: float) -> dict[str, Any]:
    start = time.perf_counter()
    found = backend_hunt_isolated(name, budget)
    return {"found": found["found"], "seconds": found["seconds"] if found["found"] else None,
            "inputs": found["examples"], "clause": found.get("clause", ""),
            "errors": found.get("errors", {}), "skipped": found.get("skipped", ""),
            "wall": round(time.perf_counter() - start, 1)}


def _cell(r: dict[str, Any]) -> list[str]:
    return ["found" if r["found"] else "not found", f"{r['seconds']:.1f}" if r["seconds"] is not None else "-",
            str(r["inputs"])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=60.0, help="CPU seconds per mutant and driver")
    parser.add_argument("--mutants", default=",".join(DEFAULT_MUTANTS))
    parser.add_argument("--write", metavar="MD", help="write the markdown report here")
    args = parser.parse_args()
    why = backend_available()
    if why:
        print(f"bench_symbolic_drivers: {why}", file=sys.stderr)
        return 2
    rows = []
    for name in [m for m in args.mutants.split(",") if m]:
        ours, theirs = _ours(name, args.budget), _theirs(name, args.budget)
        print(f"{name}: ours {'found' if ours['found'] else 'not found'} ({ours['inputs']} paths), "
              f"hypothesis-crosshair {'found' if theirs['found'] else 'not found'} ({theirs['inputs']} examples"
              + (f", errors {theirs['errors']}" if theirs["errors"] else "") + ")", flush=True)
        rows.append((name, ours, theirs))
    header = ["mutant", "ours", "CPU s", "paths", "hypothesis-crosshair", "CPU s", "examples"]
    table = [[n, *_cell(o), *_cell(t)] for n, o, t in rows]
    totals = []
    for label, i in (("ours", 1), ("hypothesis-crosshair", 2)):
        found = sum(r[i]["found"] for r in rows)
        cpu = sum(r[i]["seconds"] if r[i]["found"] else args.budget for r in rows)
        totals.append(f"{label}: {found}/{len(rows)} found, {found / cpu:.3f} findings per CPU second "
                      f"({cpu:.0f} CPU s)")
    print("\n".join(text_table(header, table, align="<<>><>>")))
    print("\n".join(totals))
    if args.write:
        errors = {n: t["errors"] for n, _o, t in rows if t["errors"]}
        text = [
            "# Our symbolic driver vs hypothesis-crosshair",
            "",
            f"Generated by `python benchmarks/bench_symbolic_drivers.py --budget {args.budget:g} --write "
            f"{args.write}`: {args.budget:g} CPU s per mutant and driver, normal mode, each stopping at its "
            "first finding. Do not edit by hand.",
            "",
            *markdown_table(header, table),
            "",
            *(f"- {t}" for t in totals),
        ]
        text += ["", WHAT_WE_KEEP]
        if errors:
            text += ["", "Errors the backend raised (counted per clause, not findings): "
                     + "; ".join(f"`{n}`: {e}" for n, e in errors.items())]
        write_atomic(args.write, "\n".join(text) + "\n")
        print(f"wrote {Path(args.write)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
