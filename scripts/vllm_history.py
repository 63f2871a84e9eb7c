#!/usr/bin/env python3
"""The vLLM release history: every release's findings, and when each was born and fixed.

usage: python3 scripts/vllm_history.py [--versions 0.11.0,...,0.34.0] [--jobs 2] [--profile quick]
                                       [--env-root DIR] [--base-python PY] [--render-only]

One command builds (and caches) an environment per release, checks each, and
writes ``docs/vllm-history.md`` from the reports.

**An environment per release** (``<env-root>/vllm-<release>/``, default
``~/.cache/kvcontract/envs``) is three layers, outermost first:

1. ``tree/vllm``: the release's Python files, unpacked from its wheel (kept in
   ``~/.cache/kvcontract/wheels``, downloaded by pip when missing); compiled
   extensions are left out — the KV-cache code does not need them on the CPU;
2. ``extras/``: the light packages this release imports and the base lacks,
   found by importing the modules the kit drives and installing one package per
   ``ModuleNotFoundError`` (``pip install --target --no-deps``, version range from
   the release's own ``Requires-Dist``) until everything imports;
3. the base: the Python given by ``--base-python`` (torch 2.13.0 CPU and the
   pins of ``requirements/vllm-0.34.0-cpu.txt``, as ``scripts/setup.sh`` builds it).

The extras found are pinned in ``requirements/vllm-<release>-cpu.txt`` together
with the base's pins, so ``scripts/install-vllm.sh <release> PY`` can build a
standalone environment from the same file. A release whose
``vllm.v1.kv_cache_interface`` does not import after that has no environment,
with the reason.

**The check** of a release is ``kvcontract check --engine vllm --engine-path
<env>/tree --no-xfails --profile P --seed S --json docs/vllm-history/reports/<release>.json``
(a source-tree check: ``import vllm`` resolves to the release's tree), releases
in parallel in a process pool (``--jobs``), with a progress line per step.

**The history**: per finding subject x clause (``kvcontract.conformance.reports.diff``'s
signature, kinds and fields included), the first release that has it and the
first later release that no longer has it ("fixed in"), over the releases
checked, in order. Generated, never edited by hand: ``--render-only`` re-renders
the document from the reports.

The logic lives in :mod:`kvcontract.conformance.reports.releases` (``environments``,
``checks``, ``reviews``, ``history``); this script runs ``history.main``.
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
