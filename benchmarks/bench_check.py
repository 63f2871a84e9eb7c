"""Benchmark of the commands a CI job runs, as ratios to what they cannot avoid, in one run.

Run: ``.venv/bin/python benchmarks/bench_check.py [--engine vllm] [--profiles quick,default]
[--repeat 3] [--no-hang]``

Measured side by side on this machine, each the median of ``--repeat`` runs:

- the floors: one interpreter importing the engine, and two importing it at once (a normal
  and a ``-O`` one: what a check's two passes cannot avoid);
- ``check`` per profile (both modes, bundled expectations), as a ratio to the two-import floor
  (targets: quick <= 1.5x, default <= 2x);
- ``engines`` and ``coverage``, as a ratio to one import (target <= 1.2x);
- the time to ``check``'s first progress line (target <= 2 s);
- a hanging engine (``tests.engines.misbehaving:hanging``, quick profile): the time from the
  first clause reported as hung to the end of the run (target <= 60 s).

Each row says whether it meets its target. Figures are only comparable within one run on
one machine; docs/bench-check.md is this script's output (--write). A floor is a whole interpreter
run (start, import, exit); a check's workers end without the interpreter's teardown. The
kit's caches (``$KVCONTRACT_CACHE_DIR``: the scan of vLLM's spec-building code, the parsed
expectations file) are warm, as on a machine that has run a check before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kvcontract.reports import markdown_table, text_table

ROOT = Path(__file__).resolve().parent.parent
CHECK_RATIO = {"quick": 1.5, "default": 2.0, "thorough": 20.0}
"""Target: a check's wall time over the two-import floor."""
TOOL_RATIO = 1.2
"""Target: ``engines`` and ``coverage`` over one import."""
FIRST_LINE_S = 2.0
HANG_TAIL_S = 60.0
ENV = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "CUDA_VISIBLE_DEVICES": "",
       "PYTHONPATH": os.pathsep.join([str(ROOT.parent), str(ROOT), os.environ.get("PYTHONPATH", "")])}
KV = [sys.executable, "-m", "kvcontract"]


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def imports(engine: str, modes: list[list[str]]) -> float:
    """Wall time of fresh interpreters (one per entry of ``modes``) loading the engine at once."""
    code = f"from kvcontract.conformance.engines.registry import resolve_engine; resolve_engine({engine!r})"
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, *flags, "-c", code], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT) for flags in modes]
    for p in procs:
        p.wait()
    return time.perf_counter() - start


def lines_with_times(cmd: list[str]) -> tuple[list[tuple[float, str]], float]:
    """Each output line of ``cmd`` with the seconds since its start; and the total."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV, cwd=ROOT)
    out = []
    if proc.stdout is not None:
        for line in proc.stdout:
            out.append((time.perf_counter() - start, line.rstrip()))
    proc.wait()
    return out, time.perf_counter() - start


def median(repeat: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(repeat))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--profiles", default="quick,default")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-hang", action="store_true", help="skip the hanging-engine row (it takes minutes)")
    parser.add_argument("--write", metavar="FILE.md", help="also write the table as markdown (docs/bench-check.md)")
    args = parser.parse_args()
    one = median(args.repeat, lambda: imports(args.engine, [[]]))
    two = median(args.repeat, lambda: imports(args.engine, [[], ["-O"]]))
    rows: list[list[object]] = [["import the engine once", f"{one:.1f}", "", "", "(floor)"],
                                ["import it twice at once (normal, -O)", f"{two:.1f}", "", "", "(floor)"]]

    def row(what: str, seconds: float, floor: float, target: float) -> None:
        ratio = seconds / floor
        rows.append([what, f"{seconds:.1f}", f"{ratio:.2f}x", f"<= {target:g}x", "yes" if ratio <= target else "NO"])

    slowest: list[tuple[float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for profile in args.profiles.split(","):
            out = Path(tmp) / f"{profile}.json"
            cmd = [*KV, "check", "--engine", args.engine, "--profile", profile, "--quiet", "--json", str(out)]
            row(f"check --profile {profile}", median(args.repeat, lambda c=cmd: wall(c)), two, CHECK_RATIO[profile])
            report = json.loads(out.read_text())
            slowest = sorted(((c["seconds"], f'{c["clause"]} [{c["mode"]}]') for c in report["clauses"]),
                             reverse=True)[:5]
        row("engines", median(args.repeat, lambda: wall([*KV, "engines"])), one, TOOL_RATIO)
        row(f"coverage --engine {args.engine}",
            median(args.repeat, lambda: wall([*KV, "coverage", "--engine", args.engine])), one, TOOL_RATIO)

        def first_line() -> float:
            lines, _ = lines_with_times([*KV, "check", "--engine", args.engine, "--profile", "quick",
                                         "--clauses", "ROLE-COVER-1"])
            return lines[0][0] if lines else float("inf")

        first = median(args.repeat, first_line)
        rows.append(["check: first progress line", f"{first:.1f}", "", f"<= {FIRST_LINE_S:g} s",
                     "yes" if first <= FIRST_LINE_S else "NO"])
        if not args.no_hang:
            lines, total = lines_with_times([*KV, "check", "--engine", "tests.engines.misbehaving:hanging",
                                             "--profile", "quick", "--json", str(Path(tmp) / "hang.json")])
            hung = next((t for t, line in lines if " error " in f" {line} " and "/" in line), None)
            tail = total - hung if hung is not None else float("nan")
            rows.append(["hanging engine: first hang -> end", f"{tail:.1f}", "", f"<= {HANG_TAIL_S:g} s",
                         "yes" if tail <= HANG_TAIL_S else "NO"])
            rows.append(["hanging engine: whole quick check", f"{total:.1f}", "", "", ""])
    header = ["what", "wall s", "ratio", "target", "met"]
    title = (f"engine {args.engine}; medians of {args.repeat} runs; {os.cpu_count()} CPUs; "
             f"{time.strftime('%Y-%m-%d')}")
    print(title)
    print("\n".join(text_table(header, rows, align="<>>>>")))
    if slowest:
        print("slowest clauses (last profile): " + ", ".join(f"{name} {s:.2f}s" for s, name in slowest))
    block = "\n".join([f"`benchmarks/bench_check.py` ({title}; a floor is a whole interpreter run, the kit's "
                        "caches warm):", "", *markdown_table(header, [[str(c) for c in r] for r in rows])])
    if args.write:
        Path(args.write).write_text(f"# check speed\n\n{block}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
