"""Generate docs/mutants.md from ``kvcontract mutants --json`` reports.

Usage: python scripts/mutants_doc.py [--out OUT.md] [REPORT.json ...]
Without reports the catalogue is hunted four times, at the default and the quick profile at
seeds 0 and 1 (both modes each); the first report gives the main table, every report a column
of the table across profiles and seeds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from kvcontract.conformance.power.hunt import MutantsReport, render_markdown
from kvcontract.reports import write_atomic

ROOT = Path(__file__).resolve().parent.parent
RUNS = (("default", 0), ("default", 1), ("quick", 0), ("quick", 1))


def hunt(profile: str, seed: int, folder: Path) -> Path | None:
    path = folder / f"mutants-{profile}-{seed}.json"
    print(f"kvcontract mutants --profile {profile} --seed {seed} ...", flush=True)
    done = subprocess.run([sys.executable, "-m", "kvcontract", "mutants", "--quiet", "--profile", profile,
                           "--seed", str(seed), "--json", str(path)], cwd=ROOT)
    if not path.exists():
        print(f"kvcontract mutants wrote no report (exit {done.returncode})", file=sys.stderr)
        return None
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "mutants.md")
    parser.add_argument("reports", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths: list[Path] = list(args.reports)
    if not paths:
        folder = Path(tempfile.mkdtemp(prefix="kvcontract-mutants-"))
        for profile, seed in RUNS:
            path = hunt(profile, seed, folder)
            if path is None:
                return 1
            paths.append(path)
    reports = [MutantsReport.model_validate_json(p.read_text()) for p in paths]
    write_atomic(args.out, render_markdown(reports[0], reports[1:]))
    print(f"wrote {args.out} ({len(reports[0].mutants)} mutants, {len(reports)} runs: "
          + "; ".join(f"{r.profile} seed {r.seed} {sum(m.verdict == 'killed' for m in r.mutants)}/{len(r.mutants)}"
                      for r in reports) + ")")
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
