"""Write what the pinned vLLM breaks, from a check report: the committed data and the docs.

Usage: python scripts/defects_doc.py REPORT.json

REPORT.json is ``kvcontract check --engine vllm --json REPORT.json`` (with the bundled
expectations, so each defect carries its review). Writes
``docs/vllm-defects/<engine>-<version>.json`` (the defects, without repros),
``docs/vllm-defects.md`` and the README's block between its defects markers; a test keeps
the docs equal to the committed data (counts are generated, never typed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kvcontract.conformance.reports.defects_text import (
    README_BEGIN,
    README_END,
    defects_summary,
    render_document,
    render_readme_block,
)

ROOT = Path(__file__).resolve().parent.parent


def replace_block(text: str, block: str) -> str:
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    return text[:start] + block + text[end:]


def main(report_path: str) -> int:
    report = json.loads(Path(report_path).read_text())
    if not report.get("defects"):
        print(f"{report_path} has no defects (a report of an older kit, or nothing found)", file=sys.stderr)
        return 1
    summary = defects_summary(report)
    data = ROOT / "docs" / "vllm-defects" / f"{report['engine']}-{report['engine_version']}.json"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(json.dumps(summary, indent=1) + "\n")
    (ROOT / "docs" / "vllm-defects.md").write_text(render_document(summary))
    readme = ROOT / "README.md"
    readme.write_text(replace_block(readme.read_text(), render_readme_block(summary)))
    print(f"{len(summary['defects'])} defects -> {data}, docs/vllm-defects.md, README.md")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
