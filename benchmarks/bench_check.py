"""Benchmark of the main job: ``kvcontract check --engine vllm`` per profile, both modes.

Run: ``.venv/bin/python benchmarks/bench_check.py [--engine vllm] [--profiles quick,default]``

Prints, side by side in one run, each profile's wall time (process start to exit: the two
worker processes import the engine concurrently, each pass runs its clauses), its target
(quick < 20 s, default < 60 s), and its ratio to the bare cost of importing the engine twice
in parallel (what the two passes cannot avoid), plus examples per second and the slowest
clauses. Figures are only comparable within one run on one machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvcontract.reports import text_table

TARGETS_S = {"quick": 20.0, "default": 60.0, "thorough": 600.0}


def wall(cmd: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - start, proc.returncode


def two_imports(engine: str) -> float:
    """Wall time of two fresh interpreters loading the engine at once (a normal and a -O one)."""
    code = f"from kvcontract.conformance.engines.registry import resolve_engine; resolve_engine({engine!r})"
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, *flags, "-c", code], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for flags in ([], ["-O"])]
    for p in procs:
        p.wait()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--profiles", default="quick,default")
    args = parser.parse_args()
    imports_s = two_imports(args.engine)
    rows = []
    slowest: list[tuple[float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for profile in args.profiles.split(","):
            out = Path(tmp) / f"{profile}.json"
            seconds, code = wall([sys.executable, "-m", "kvcontract", "check", "--engine", args.engine,
                                  "--profile", profile, "--quiet", "--json", str(out)])
            if code == 2 or not out.exists():
                print(f"check failed to run for profile {profile} (exit {code})", file=sys.stderr)
                return 2
            report = json.loads(out.read_text())
            examples = sum(r["examples"] for r in report["clauses"])
            law_s = sum(r["seconds"] for r in report["clauses"])
            rows.append((profile, seconds, TARGETS_S[profile], examples, law_s))
            if profile == rows[-1][0]:
                slowest = sorted(((r["seconds"], f'{r["clause"]} [{r["mode"]}]') for r in report["clauses"]),
                                 reverse=True)[:5]
    print(f"engine {args.engine}: two concurrent imports {imports_s:.1f}s")
    table = [[profile, f"{seconds:.1f}", f"{target:.0f}", f"{seconds / target:.2f}", f"{seconds / imports_s:.2f}",
              examples, f"{examples / law_s if law_s else 0.0:.0f}"]
             for profile, seconds, target, examples, law_s in rows]
    print("\n".join(text_table(["profile", "wall s", "target s", "wall/target", "wall/imports", "examples",
                                "examples/s"], table, align="<>>>>>>")))
    if slowest:
        print("slowest clauses (last profile): " + ", ".join(f"{name} {s:.2f}s" for s, name in slowest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
