#!/usr/bin/env python3
"""The vLLM release history in defects: per defect the releases that have it, first bad, gone in,
and the releases where a model of the release's own corpus shows its harm.

usage: python3 scripts/vllm_history.py [--versions 0.7.0,...,0.34.0] [--jobs 2] [--profile default]
                                       [--reuse-reports] [--env-root DIR] [--base-python PY] [--render-only]

What it does and the files it writes: :mod:`kvcontract.conformance.reports.releases.history` (this script runs its ``main``).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # kvcontract/ (the link tree) importable without an install
    sys.path.insert(0, str(REPO))

from kvcontract.conformance.reports.releases.history import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
