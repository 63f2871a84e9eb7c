#!/usr/bin/env python3
"""The vLLM release matrix: per release, the distinct findings, and whether every seed finds them.

usage: python3 scripts/vllm_matrix.py [--versions 0.29.0,...,0.34.0] [--seeds 0,1,2,3,4]
                                      [--profile default] [--jobs 2] [--env-root DIR]
                                      [--base-python PY] [--reuse-reports] [--render-only]
                                      [--date YYYY-MM-DD]

Each release is checked as a source tree in the environment ``scripts/vllm_history.py``
builds and caches for it (``<env-root>/vllm-<release>/``: the wheel's Python files, the
light packages it needs, over the base CPU environment), once per seed:
``kvcontract check --engine vllm --engine-path <env>/tree --no-xfails --profile P --seed S``,
(release, seed) pairs in parallel in a process pool (``--jobs``), a progress line each.

A *finding* is a record present in the report (status fail, xfail or error): clause x
mode x signature. The matrix keeps, per release:

- ``docs/vllm-matrix/reports/<release>.json``: the first seed's report, slimmed as the
  history keeps it (identity and message of every record; the full report with
  snippets and witnesses stays in ``<env>/matrix-seed<S>.json``);
- in ``docs/vllm-matrix/reports/index.json``: per seed, the number of findings, a
  digest of their sorted keys and the check's wall time; and every finding that some
  seed has and another lacks (an unstable verdict).

``docs/vllm-matrix.md`` is a pure function of those files (``--render-only`` reproduces
it byte for byte): per release the findings in each mode and whether all seeds agree;
per clause the findings per release; and every finding, release by release.
Regenerate by hand when the suite or the releases change; CI checks only the pinned
release (0.34.0) against its expectation file.

The logic lives in :mod:`kvcontract.conformance.reports.releases.matrix`; this script
runs its ``main``.
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
