#!/usr/bin/env python3
"""The vLLM release matrix: per release, the distinct findings, and whether every seed finds them.

usage: python3 scripts/vllm_matrix.py [--versions 0.29.0,...,0.34.0] [--seeds 0,1,2,3,4]
                                      [--profile default] [--jobs 2] [--env-root DIR]
                                      [--base-python PY] [--reuse-reports] [--render-only]
                                      [--date YYYY-MM-DD]

What it does and the files it writes: :mod:`kvcontract.conformance.reports.releases.matrix` (this script runs its ``main``).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # kvcontract/ (the link tree) importable without an install
    sys.path.insert(0, str(REPO))

from kvcontract.conformance.reports.releases.matrix import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
