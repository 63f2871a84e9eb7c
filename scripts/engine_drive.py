#!/usr/bin/env python3
"""What the adapter could and could not drive, per vLLM release and per declared engine.

usage: python3 scripts/engine_drive.py [--versions 0.7.0,...] [--engines aphrodite,vllm-ascend] [--render-only]

Writes docs/engine-drive.md and docs/engine-drive.json: :mod:`kvcontract.conformance.reports.releases.drive`
(this script runs its ``main``; exit 1 when a release or engine had a kit error).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # kvcontract/ (the link tree) importable without an install
    sys.path.insert(0, str(REPO))

from kvcontract.conformance.reports.releases.drive import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
