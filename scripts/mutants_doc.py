"""Generate docs/mutants.md from a `kvcontract mutants --json` report.

Usage: python scripts/mutants_doc.py [REPORT.json] [OUT.md]
Without REPORT.json the catalogue is run first (default profile, both modes).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from kvcontract.conformance.power.hunt import MutantsReport, render_markdown
from kvcontract.reports import write_atomic

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "mutants.md"
    if argv:
        report_path = Path(argv[0])
    else:
        report_path = Path(tempfile.mkdtemp(prefix="kvcontract-mutants-")) / "mutants.json"
        done = subprocess.run([sys.executable, "-m", "kvcontract", "mutants", "--json", str(report_path)],
                              cwd=ROOT)
        if not report_path.exists():
            print(f"kvcontract mutants wrote no report (exit {done.returncode})", file=sys.stderr)
            return 1
    report = MutantsReport.model_validate_json(report_path.read_text())
    write_atomic(out, render_markdown(report))
    print(f"wrote {out} ({len(report.mutants)} mutants)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
