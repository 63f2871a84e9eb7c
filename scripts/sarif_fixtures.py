"""Make the report pair the SARIF tests read: two real ``check`` reports of vLLM 0.34.0,
trimmed to what ``--sarif`` and ``diff`` read.

Usage: python scripts/sarif_fixtures.py  (needs vLLM: scripts/setup.sh installs it; minutes)

Runs, with the clauses below, ``kvcontract check --engine vllm`` (the base) and
``kvcontract check --engine tests.engines.seed_regression:factory --baseline BASE`` (the head:
0.34.0 with the seed's regression patched back, one new defect), then writes both to
``tests/data/sarif/`` without what the SARIF log does not need (per-clause coverage, the engine's
log, the corpus tables fed, each record's snippet and witness: a defect keeps its repro). The clauses give a MUST
defect a real model table reaches, MUST defects on several lines, a SHOULD one, an advisory
one and two engine files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "sarif"
CLAUSES = "MERGE-UNION-1,GROUP-UNION-1,MERGE-IDENTITY-1,GROUP-PAGE-1,ERROR-EMPTY-1"
DROP = ("coverage", "engine_log", "tables", "table_kinds")
DROP_RECORD = ("snippet", "witness")


def trim(report: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in report.items() if k not in DROP}
    out["records"] = [{k: v for k, v in r.items() if k not in DROP_RECORD} for r in report["records"]]
    out["clauses"] = [{k: v for k, v in c.items() if k != "exercised"} for c in report.get("clauses", [])]
    return out


def check(engine: str, json_path: Path, *extra: str) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_LOGGING_LEVEL": "ERROR"}
    result = subprocess.run([sys.executable, "-m", "kvcontract", "check", "--engine", engine, "--profile", "quick",
                             "--quiet", "--no-xfails", "--clauses", CLAUSES, "--json", str(json_path),
                             "--repro-dir", str(json_path.parent / "repros"), *extra],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        sys.exit(f"check --engine {engine} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base, head = Path(tmp) / "base.json", Path(tmp) / "head.json"
        check("vllm", base)
        check("tests.engines.seed_regression:factory", head, "--baseline", str(base))
        OUT.mkdir(parents=True, exist_ok=True)
        for path in (base, head):
            data = trim(json.loads(path.read_text()))
            (OUT / path.name).write_text(json.dumps(data, indent=1) + "\n")
            print(f"{OUT / path.name}: {len(data['defects'])} defects, {len(data['records'])} records")


if __name__ == "__main__":
    main()
