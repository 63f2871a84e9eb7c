"""Regenerate the shipped layer tables from the installed vLLM.

    python scripts/vllm_model_tables.py OUT.json [--no-grouping]

Builds every model family's layer table with vLLM's own spec-building code
(``kvcontract.conformance.engines.vllm.tables``), converts it with the vLLM adapter,
runs it through grouping in a normal and an ``-O`` interpreter, and writes the JSON
(shipped as ``conformance/engines/vllm/tables/vllm-<version>.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("out", type=Path)
    parser.add_argument("--no-grouping", action="store_true",
                        help="leave out the grouping runs (two subprocesses)")
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    from kvcontract.conformance.engines.vllm.tables.document import build_document

    document = build_document(with_grouping=not args.no_grouping)
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(document['tables'])} tables, {len(document['skipped'])} skipped",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
