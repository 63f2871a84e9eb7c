"""Benchmark of the main job: ``kvcontract check --engine vllm`` per profile, both modes.

Run: ``.venv/bin/python benchmarks/bench_check.py [--engine vllm] [--profiles quick,default]``

Prints, side by side in one run, each profile's wall time (process start to exit,
so vLLM's import is included) against its target (default < 60 s, quick < 15 s)
as a ratio, examples per second, the engine import time, and the slowest clauses.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS_S = {"quick": 15.0, "default": 60.0, "thorough": 600.0}


def wall(cmd: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - start, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--profiles", default="quick,default")
    args = parser.parse_args()
    exe = Path(sys.executable).with_name("kvcontract")
    import_s, _ = wall([sys.executable, "-c",
                        f"from kvcontract.conformance.engine import load_engine; load_engine({args.engine!r})"])
    rows = []
    slowest: list[tuple[float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for profile in args.profiles.split(","):
            out = Path(tmp) / f"{profile}.json"
            seconds, code = wall([str(exe), "check", "--engine", args.engine, "--profile", profile,
                                  "--quiet", "--json", str(out)])
            if code == 2 or not out.exists():
                print(f"check failed to run for profile {profile} (exit {code})", file=sys.stderr)
                return 2
            report = json.loads(out.read_text())
            examples = sum(r["examples"] for r in report["records"])
            law_s = sum(r["seconds"] for r in report["records"])
            rows.append((profile, seconds, TARGETS_S[profile], examples, law_s))
            if profile == "default":
                slowest = sorted(((r["seconds"], f'{r["clause"]} [{r["mode"]}]') for r in report["records"]),
                                 reverse=True)[:5]
    print(f"engine {args.engine}: import {import_s:.1f}s (fresh interpreter)")
    print(f"{'profile':<9} {'wall s':>7} {'target s':>8} {'wall/target':>11} {'examples':>8} {'examples/s':>10}")
    for profile, seconds, target, examples, law_s in rows:
        rate = examples / law_s if law_s else 0.0
        print(f"{profile:<9} {seconds:>7.1f} {target:>8.0f} {seconds / target:>11.2f} {examples:>8} {rate:>10.0f}")
    if slowest:
        print("slowest clauses (default profile): "
              + ", ".join(f"{name} {s:.2f}s" for s, name in slowest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
